"""Segment administration behind ``rivven segment``: list, recover, reindex."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..storage import files
from ..storage.locks import flocked

if TYPE_CHECKING:
    from ..engine import Engine


def segment_list(eng: Engine, topic: str, partition: int | None = None) -> list[dict[str, Any]]:
    """Per segment, cold ones first: tier, file, base/last offset, records, bytes, time range
    (a header scan of local segments; cold ones from the tier manifest, records unknown)."""
    meta = eng.topic(topic)
    parts = range(meta.partitions) if partition is None else [partition]
    rows = []
    for p in parts:
        log = eng._log(meta, p)
        for e in log.cold_entries():
            rows.append({"partition": p, "tier": "cold", "file": e.url(".log"),
                         "base_offset": e.base_offset, "last_offset": e.next_offset - 1,
                         "records": None, "bytes": e.bytes, "min_timestamp": None,
                         "max_timestamp": e.max_timestamp})
        for seg in log.all_segments():
            records = 0
            last = lo = hi = None
            for ref in seg.iter_batches(0, seg.size, crc=False):
                h = ref.header
                records += h.record_count
                last = h.last_offset
                lo = h.first_timestamp if lo is None else min(lo, h.first_timestamp)
                hi = h.max_timestamp if hi is None else max(hi, h.max_timestamp)
            rows.append({"partition": p, "tier": "local", "file": seg.path,
                         "base_offset": seg.base,
                         "last_offset": last, "records": records, "bytes": seg.size,
                         "min_timestamp": lo, "max_timestamp": hi})
    return rows


def recover_segments(eng: Engine, targets: Sequence[str], truncate_corrupt: bool = False,
                     dry_run: bool = False) -> list[dict[str, Any]]:
    """Truncate torn tails (and with ``truncate_corrupt`` corrupt tails) and rebuild indexes
    of the targeted segments, each partition under its lock."""
    from .verify import recover_segment, resolve_targets

    if not dry_run:
        eng._writable()
    out = []
    for d, only in resolve_targets(eng.path, list(targets)):
        logs = only or [files.path(d, b, files.LOG) for b in files.segment_bases(d)]
        with contextlib.ExitStack() as stack:
            lock = os.path.join(d, files.LOCK_FILE)
            if os.path.exists(lock):  # a live writer waits while its files are mended
                fd = os.open(lock, os.O_RDWR)
                stack.callback(os.close, fd)
                stack.enter_context(flocked(fd))
            for path in logs:
                base = files.parse(os.path.basename(path))[0]
                out.append(recover_segment(path, base, truncate_corrupt, dry_run))
    eng._forget_all()
    return out


def reindex(eng: Engine, path: str) -> dict[str, Any]:
    """Rebuild one segment's ``.index`` and ``.timeindex`` from its log, under its partition's
    lock."""
    from ..storage.segment import Segment

    eng._writable()
    d = os.path.dirname(os.path.abspath(path))
    parsed = files.parse(os.path.basename(path))
    if parsed is None or parsed[1] != files.LOG:
        raise InvalidArgument(f"{path} is not a segment .log file")
    with contextlib.ExitStack() as stack:
        lock = os.path.join(d, files.LOCK_FILE)
        if os.path.exists(lock):
            fd = os.open(lock, os.O_RDWR)
            stack.callback(os.close, fd)
            stack.enter_context(flocked(fd))
        seg = Segment(d, parsed[0], writable=True)
        try:
            seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True)
            seg.index.sync()
            seg.timeindex.sync()
            result = {"path": path, "index_entries": len(seg.index),
                      "timeindex_entries": len(seg.timeindex), "valid_bytes": seg.size}
        finally:
            seg.close()
    eng._forget_all()
    return result
