"""Short-lived OS locks (flock) on exactly what a mutation changes.

flock locks belong to an open file description, so threads of one process must also hold a
``threading.Lock``; the kernel drops the flock when a process dies, so a killed writer never
leaves a lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


def open_lock_file(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


@contextmanager
def flocked(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def lock_path(path: str) -> Iterator[int]:
    """Take an exclusive lock on ``path`` (created if missing) for the duration of the block."""
    fd = open_lock_file(path)
    try:
        with flocked(fd):
            yield fd
    finally:
        os.close(fd)


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
