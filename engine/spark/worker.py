"""Engines kept by a Spark Python worker across the tasks it runs (workers are reused): the
stream source's read-only ones, the sink's writable ones."""

from __future__ import annotations

import os
from typing import Any

_engines: dict[tuple[int, str, str | None, bool], Any] = {}


def engine(path: str, keyring: str | None, read_only: bool) -> Any:
    """This process's engine of the data dir ``path`` (opened on first use; the pid in the
    key keeps a forked worker from using its parent's)."""
    from engine import Engine

    key = (os.getpid(), path, keyring, read_only)
    eng = _engines.get(key)
    if eng is None or eng.closed:
        eng = _engines[key] = Engine.open(path, read_only=read_only, keyring=keyring)
    return eng
