"""``rivven produce TOPIC --input parquet|arrow FILE``: a Parquet or Arrow IPC file (or an
Arrow stream on stdin) produced with ``Engine.produce_arrow``, one record batch at a time:
no Python object per row."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from collections.abc import Iterator
from typing import Any

from engine.errors import plural

from .common import fail, open_engine
from .render import human_bytes, info

BATCH_ROWS = 100_000  # rows read (and produced) per step
ARROW_FILE_MAGIC = b"ARROW1"


def batches(kind: str, path: str | None) -> Iterator[Any]:
    """The file's record batches (``kind``: parquet or arrow), read as they are needed."""
    import pyarrow as pa

    if kind == "parquet":
        import pyarrow.parquet as pq

        if path is None:
            fail("--input parquet needs a FILE (Parquet cannot be read from a pipe)", 2)
        try:
            pf = pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as e:
            fail(f"cannot read {path} as Parquet: {e}")
        try:
            yield from pf.iter_batches(batch_size=BATCH_ROWS)
        except (OSError, pa.ArrowException) as e:
            fail(f"cannot read {path} as Parquet: {e}")
        return
    source: Any = path
    if path is None:  # a pipe: the streaming format as it arrives, a whole file read first
        source = sys.stdin.buffer
        if source.peek(len(ARROW_FILE_MAGIC))[:len(ARROW_FILE_MAGIC)] == ARROW_FILE_MAGIC:
            source = pa.BufferReader(source.read())
    try:
        if path is None and not isinstance(source, pa.BufferReader):
            yield from pa.ipc.open_stream(source)
            return
        try:
            reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:
            reader = None
        if reader is not None:
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
            return
        yield from pa.ipc.open_stream(source)  # (the Arrow streaming format in a file)
    except (OSError, pa.ArrowException) as e:
        fail(f"cannot read {path or 'stdin'} as Arrow IPC (file or stream): {e}")


def produce_file(topic: str, kind: str, path: str | None, partition: int | None,
                 compression: str | None, quiet: bool, json: bool) -> None:
    from . import interrupts

    count = nbytes = 0
    started = time.perf_counter()
    stopped = None
    with open_engine() as eng:
        eng.topic(topic, create_hint=True)
        try:
            with interrupts.guarded() as guard:
                for batch in batches(kind, path):
                    if not batch.num_rows:
                        continue
                    with guard.storing():
                        try:
                            eng.produce_arrow(topic, batch, partition=partition,
                                              compression=compression)
                        except Exception as e:
                            row = getattr(e, "index", None)
                            if row is not None:
                                e.args = (f"row {count + row + 1}: {e}",)
                            raise
                    count += batch.num_rows
                    nbytes += batch.nbytes
        except interrupts.Stopped as e:
            stopped = e
    el = time.perf_counter() - started
    if stopped is not None:
        if json:
            info(jsonlib.dumps({"topic": topic, "records": count, "bytes": nbytes,
                                "seconds": round(el, 3), "stopped": stopped.name}))
        fail(f"stopped by {stopped}: {plural(count, 'record')} stored; the rest of the input "
             "was not produced", stopped.exit_code)
    if json and not quiet:
        info(jsonlib.dumps({"topic": topic, "records": count, "bytes": nbytes,
                            "seconds": round(el, 3)}))
    elif not quiet:
        info(f"produced {plural(count, 'record')} ({human_bytes(nbytes)}) to {topic} in "
             f"{el:.2f} s ({count / el if el else 0:,.0f} records/s)")
