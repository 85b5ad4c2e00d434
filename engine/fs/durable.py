"""Durable writes: fsync of a file or a directory, atomic replacement of a file, and the
debris a crash leaves of one.

Every file the engine writes goes through ``guard`` (no links followed, the mode policy);
``write_atomic`` also gives up the data dir's space reserve (``reserve``) on a full disk.
"""

from __future__ import annotations

import os

from ..errors import StorageError, disk_full, os_error
from .guard import open_file
from .reserve import give_up_reserve


def fsync_file(target: str) -> None:
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_write_debris(directory: str) -> None:
    """Temp files of ``write_atomic`` calls cut short by a crash (``NAME.tmp.PID``). Only for
    a directory whose files are written under a lock the caller holds."""
    for f in os.listdir(directory):
        stem, sep, pid = f.rpartition(".tmp.")
        if sep and stem and pid.isdigit():
            os.unlink(os.path.join(directory, f))


def write_atomic(target: str, data: bytes, sync_dir: bool = True) -> None:
    """tmp, fsync, rename, fsync dir: a reader sees the old file or the new one, never a mix.
    ``sync_dir=False`` leaves the rename to the file system's next commit (a crash may then
    leave the old file: for a file whose old version is just as valid, if less recent).
    The temp file is never a link's target (O_NOFOLLOW), and the rename replaces a link at
    ``target`` rather than writing through it. A full disk gives up the data dir's space
    reserve and tries once more; then it is a StorageError saying "disk full"."""
    try:
        _write_atomic(target, data, sync_dir)
        return
    except OSError as e:
        if not disk_full(e) or not give_up_reserve(target):
            raise os_error(e, "write", target) from e
    except StorageError as e:  # (open_file: a full disk when creating the temp file)
        if not disk_full(e) or not give_up_reserve(target):
            raise
    try:
        _write_atomic(target, data, sync_dir)
    except OSError as e:
        raise os_error(e, "write", target) from e


def _write_atomic(target: str, data: bytes, sync_dir: bool) -> None:
    tmp = f"{target}.tmp.{os.getpid()}"
    fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)  # (a full disk: the part written holds space)
        except OSError:
            pass
        raise
    if sync_dir:
        fsync_dir(os.path.dirname(target) or ".")
