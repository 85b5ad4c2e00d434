"""Read-only engines kept by a Spark Python worker across the tasks it runs (workers are
reused): the stream source's, and the registry's of decoded columns (a writer schema the
driver did not ship: engine.spark.schema_columns). A read-only engine leaves nothing behind
when the worker ends (PySpark's daemon ends a worker with ``os._exit`` or a signal: nothing is
closed); the sink's tasks open a writable engine each and close it
(engine.spark.sink.write_rows)."""

from __future__ import annotations

import os
from typing import Any

_engines: dict[tuple[int, str, str | None], Any] = {}


def engine(path: str, keyring: str | None) -> Any:
    """This process's read-only engine of the data dir ``path`` (opened on first use; the pid
    in the key keeps a forked worker from using its parent's)."""
    from engine import Engine

    key = (os.getpid(), path, keyring)
    eng = _engines.get(key)
    if eng is None or eng.closed:
        eng = _engines[key] = Engine.open(path, read_only=True, keyring=keyring)
    return eng
