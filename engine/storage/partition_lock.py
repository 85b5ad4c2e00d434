"""A partition's two locks: a mutex for this process's threads, a flock for processes.

``.lock`` in the partition dir carries the flock. flock locks belong to an open file
description, so the threads of one process share it behind ``mutex``; the kernel drops it
when the process dies, so a killed writer never leaves a lock behind. Deleting a topic
unlinks ``.lock`` while holding it, so a writer that finds its lock file unlinked knows the
partition is gone (``check_alive``).

The append pipeline may keep the flock across appends (``hold``/``release``, ``held``);
anything else takes it for one block with ``exclusive()``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator

from ..errors import UnknownTopic
from ..fs.locks import DEFAULT_WAIT, LockWait, acquire, flocked, open_lock_file
from ..segments import filenames


class PartitionLock:
    def __init__(self, directory: str, topic: str, partition: int, writable: bool,
                 wait: LockWait = DEFAULT_WAIT) -> None:
        self.topic = topic
        self.partition = partition
        self.mutex = threading.RLock()
        self.cond = threading.Condition(self.mutex)  # the append pipeline's wake-ups
        self.fd = -1
        self.held = False  # the flock, kept by the append pipeline
        self.since = 0.0  # monotonic time the pipeline took it
        self.path = os.path.join(directory, filenames.LOCK_FILE)
        self.wait = wait  # how long a flock held elsewhere is waited for (lock.timeout.ms)
        self.ino = 0
        self.released = False  # fd closed by the file budget: reopened on the next use
        if writable:
            self._open()

    def _open(self) -> None:
        try:
            fd = open_lock_file(self.path)
        except FileNotFoundError:
            raise UnknownTopic(f"partition {self.partition} of topic {self.topic!r} is gone"
                               ) from None
        ino = os.fstat(fd).st_ino
        if self.ino and ino != self.ino:  # a topic of that name made anew meanwhile
            os.close(fd)
            raise UnknownTopic(f"topic {self.topic!r} was deleted")
        self.fd, self.ino = fd, ino

    def release_fd(self) -> bool:
        """(mutex held.) Close the lock file while the flock is not held (the file budget);
        the next use opens it again. False when the flock is held."""
        if self.held or self.fd < 0:
            return False
        os.close(self.fd)
        self.fd = -1
        self.released = True
        return True

    def _reopen(self) -> None:
        if self.released:
            self._open()
            self.released = False

    def check_alive(self) -> None:
        """(flock held.) Raise UnknownTopic once the topic was deleted (its lock unlinked)."""
        self._reopen()
        if os.fstat(self.fd).st_nlink == 0:
            raise UnknownTopic(f"topic {self.topic!r} was deleted")

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The mutex plus the flock, unless the append pipeline already holds it."""
        with self.mutex:
            if self.fd < 0:
                self._reopen()
            if self.fd < 0:  # closed: the engine forgot it (topic deleted or replaced)
                raise UnknownTopic(f"partition {self.partition} of topic {self.topic!r} was "
                                   "closed (deleted?)")
            if self.held:
                yield
            else:
                with flocked(self.fd, self.path, self.wait):
                    yield

    def hold(self) -> None:
        """(mutex held.) Take the flock and keep it (the append pipeline)."""
        if self.fd < 0:
            self._reopen()
        acquire(self.fd, self.path, self.wait)
        self.held = True
        self.since = time.monotonic()

    def release(self) -> None:
        """(mutex held, nothing in flight.) Drop a flock kept by ``hold``."""
        if self.held:
            self.held = False
            if self.fd >= 0:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.held = False  # closing the fd drops it
        self.released = False  # (for good: the engine forgot the partition)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
