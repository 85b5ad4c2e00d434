"""The data dir's space reserve: a file given up when the disk is full, so that the commands
that free space can still record what they do (docs/DURABILITY.md, "A full disk").

Every writable open that finds room keeps ``DATA_DIR/.rivven-reserve`` (``RESERVE_BYTES``);
``files.write_atomic`` gives it up on ENOSPC and tries once more.
"""

from __future__ import annotations

import os

from ..errors import StorageError
from .guard import open_file

RESERVE = ".rivven-reserve"  # in the data dir root: space given up when the disk is full
RESERVE_BYTES = 256 << 10  # a few catalogs' or many checkpoints' worth
RESERVE_ROOM = 4 * RESERVE_BYTES  # free space needed before the reserve is made (again)

_reserves: set[str] = set()  # data dirs (absolute) whose RESERVE this process may give up


def keep_reserve(data_dir: str) -> None:
    """(A writable open.) Make the data dir's space reserve when it is missing and the disk
    has room for it several times over; remember the data dir so ``write_atomic`` may give it
    up. One ``stat`` when it is there."""
    data_dir = os.path.abspath(data_dir)
    _reserves.add(data_dir)
    path = os.path.join(data_dir, RESERVE)
    try:
        os.lstat(path)
        return
    except FileNotFoundError:
        pass
    try:
        st = os.statvfs(data_dir)
        if st.f_bavail * st.f_frsize < RESERVE_ROOM:
            return  # (not while space is short: it is made again once there is room)
        tmp = f"{path}.tmp.{os.getpid()}"
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            except OSError:  # (a file system without fallocate)
                os.pwrite(fd, bytes(RESERVE_BYTES), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except (OSError, StorageError):
        try:
            os.unlink(f"{path}.tmp.{os.getpid()}")
        except OSError:
            pass


def give_up_reserve(target: str) -> bool:
    """Delete the space reserve of the data dir holding ``target``; False when there is
    none (left) to give."""
    target = os.path.abspath(target)
    for d in _reserves:
        if target.startswith(d + os.sep):
            try:
                os.unlink(os.path.join(d, RESERVE))
                return True
            except OSError:
                return False
    return False
