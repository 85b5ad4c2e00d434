"""The names of a partition directory's files, and the order segment files come and go in.

Segment files are named by their 20-digit zero-padded base offset, so that ``ls`` sorts them
by offset. A segment is its ``.log``: the ``.log`` is installed last and deleted first
(``INSTALL_ORDER``/``DELETE_ORDER``), so indexes without their ``.log`` are debris a writer
removes, never a segment.
"""

from __future__ import annotations

import os

LOG, INDEX, TIMEINDEX = ".log", ".index", ".timeindex"
TXNINDEX = ".txnindex"  # only beside a segment with an aborted transaction (txn_index.py)
SEGMENT_FILES = (LOG, INDEX, TIMEINDEX)  # the files every segment has
OPTIONAL_FILES = (TXNINDEX,)  # files a segment may have
INSTALL_ORDER = (INDEX, TIMEINDEX, TXNINDEX, LOG)  # indexes first: a .log is the segment
DELETE_ORDER = (LOG, INDEX, TIMEINDEX, TXNINDEX)  # .log first, for the same reason
CLEANED, SWAP = ".cleaned", ".swap"
LOCK_FILE = ".lock"
CHECKPOINT = ".checkpoint"
DURABLE_END = ".end"  # the durable end readers stop at (durable_end.py)
SNAPSHOT = ".snapshot"  # producer state at an offset (snapshot_files.py), not a segment


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


