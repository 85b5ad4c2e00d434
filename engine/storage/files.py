"""File naming: 20-digit zero-padded base offsets, so that ``ls`` sorts segments by offset."""

from __future__ import annotations

import os

LOG, INDEX, TIMEINDEX = ".log", ".index", ".timeindex"
CLEANED, SWAP, DELETED = ".cleaned", ".swap", ".deleted"
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


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(target: str, data: bytes) -> None:
    """tmp, fsync, rename, fsync dir: a reader sees the old file or the new one, never a mix."""
    tmp = f"{target}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(os.path.dirname(target) or ".")
