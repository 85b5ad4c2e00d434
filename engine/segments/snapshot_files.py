"""Producer-state snapshot files: ``<partition dir>/<offset as 20 digits>.snapshot``.

The files, not their bytes: naming, listing, reading (bounded), writing whole (tmp, fsync,
rename, fsync dir) and deleting. The bytes are the producer state's (engine.txn.snapshot
encodes and checks them; docs/FORMAT.md has every byte). A partition writes them through its
log (``PartitionLog.write_snapshot``, ``delete_snapshots``) under the partition lock, at
checkpoints.
"""

from __future__ import annotations

import os

from ..errors import DamagedMetadata, plural
from ..fs import durable
from . import filenames

SUFFIX = filenames.SNAPSHOT
MAX_BYTES = 1 << 30  # never read a file a crafted size could make huge
WHAT = "producer-state snapshot"
FIX = "it is ignored: the producer state is rebuilt from an older snapshot or the log"


def path(directory: str, offset: int) -> str:
    return filenames.path(directory, offset, SUFFIX)


def offsets(directory: str) -> list[int]:
    """The offsets of the snapshots in a partition directory, oldest first."""
    out = []
    for f in os.listdir(directory):
        p = filenames.parse(f)
        if p is not None and p[1] == SUFFIX:
            out.append(p[0])
    out.sort()
    return out


def read(directory: str, offset: int) -> tuple[bytes, str]:
    """The bytes of the snapshot at ``offset`` and its path; DamagedMetadata when it cannot
    be read or is larger than any snapshot (FileNotFoundError when it is gone)."""
    p = path(directory, offset)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise DamagedMetadata(f"{WHAT} {p} is damaged (larger than "
                                      f"{plural(MAX_BYTES, 'byte')}); "
                                      f"{FIX}", p)
            data = f.read(size + 1)
    except FileNotFoundError:
        raise
    except OSError as e:  # (EIO, EACCES: as unusable as a damaged file)
        raise DamagedMetadata(f"{WHAT} {p} is unreadable ({e.strerror or e}); {FIX}",
                              p) from None
    return data, p


def write(directory: str, offset: int, data: bytes) -> str:
    """Write ``data`` as the snapshot at ``offset`` (atomically); returns its path."""
    p = path(directory, offset)
    durable.write_atomic(p, data)
    return p


def remove(directory: str, offsets_: list[int]) -> None:
    """Delete the snapshots at ``offsets_`` (missing ones are fine), then fsync the dir."""
    gone = False
    for off in offsets_:
        try:
            os.unlink(path(directory, off))
            gone = True
        except FileNotFoundError:
            pass
    if gone:
        durable.fsync_dir(directory)
