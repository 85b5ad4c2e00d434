"""Names and durable writes of the data dir's files, in one place.

Segment files are named by their 20-digit zero-padded base offset, so that ``ls`` sorts them
by offset. A segment is its ``.log``: the ``.log`` is installed last and deleted first
(``INSTALL_ORDER``/``DELETE_ORDER``), so indexes without their ``.log`` are debris a writer
removes, never a segment.

Every file the engine writes goes through ``guard`` (no links followed, the mode policy);
``write_atomic`` also gives up the data dir's space reserve (``reserve``) on a full disk.
"""

from __future__ import annotations

import os

from ..errors import StorageError, disk_full, os_error
from .guard import open_file
from .reserve import give_up_reserve

LOG, INDEX, TIMEINDEX = ".log", ".index", ".timeindex"
TXNINDEX = ".txnindex"  # only beside a segment with an aborted transaction (txn_index.py)
SEGMENT_FILES = (LOG, INDEX, TIMEINDEX)  # the files every segment has
OPTIONAL_FILES = (TXNINDEX,)  # files a segment may have
INSTALL_ORDER = (INDEX, TIMEINDEX, TXNINDEX, LOG)  # indexes first: a .log is the segment
DELETE_ORDER = (LOG, INDEX, TIMEINDEX, TXNINDEX)  # .log first, for the same reason
CLEANED, SWAP = ".cleaned", ".swap"
LOCK_FILE = ".lock"
CHECKPOINT = ".checkpoint"


def name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, name(base_offset, suffix))


def parse(filename: str) -> tuple[int, str] | None:
    """``(base_offset, suffix)`` of a segment file name, or None for anything else."""
    stem, dot, rest = filename.partition(".")
    if len(stem) != 20 or not stem.isdigit() or not dot:
        return None
    return int(stem), "." + rest


def segment_bases(directory: str) -> list[int]:
    """Sorted base offsets of the ``.log`` files in a partition directory."""
    out = []
    for f in os.listdir(directory):
        p = parse(f)
        if p is not None and p[1] == LOG:
            out.append(p[0])
    out.sort()
    return out


def partition_dir(data_dir: str, topic: str, partition: int) -> str:
    return os.path.join(data_dir, "topics", topic, f"partition-{partition}")


def delete_segment(directory: str, base: int) -> int:
    """Unlink a segment's files in DELETE_ORDER (missing ones are fine; a link is unlinked,
    never followed); returns the ``.log``'s size. The caller fsyncs the directory."""
    size = 0
    for suffix in DELETE_ORDER:
        p = path(directory, base, suffix)
        try:
            if suffix == LOG:
                size = os.lstat(p).st_size
            os.unlink(p)
        except FileNotFoundError:
            pass
    return size


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
