"""A partition's ``.checkpoint``: its recovery point and log start offset (JSON, atomic).

``{"segment": base offset of the active segment, "position": bytes of it known fsynced,
"recovery_point": the offset they end at, "log_start_offset": N}``. Written whole (tmp, fsync,
rename, fsync dir) under the partition lock; read by anyone. An unreadable file counts as no
checkpoint: recovery then trusts no byte of the active segment it has not checked itself.
"""

from __future__ import annotations

import json
import os

from . import files

KEYS = ("segment", "position", "recovery_point", "log_start_offset")


def read_checkpoint(directory: str) -> dict | None:
    """The partition's recovery point, or None when there is none (or it is unreadable)."""
    try:
        with open(os.path.join(directory, files.CHECKPOINT), "rb") as f:
            point = json.loads(f.read())
        return {k: int(point[k]) for k in KEYS}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_checkpoint(directory: str, point: dict) -> None:
    files.write_atomic(os.path.join(directory, files.CHECKPOINT), json.dumps(point).encode())


def stamp(directory: str) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of the file: changes when any process writes a new one."""
    try:
        st = os.stat(os.path.join(directory, files.CHECKPOINT))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
