"""The engine's file budget: open descriptors bounded by a setting, not by partition count.

Every partition an engine opens holds descriptors: its lock file and its active segment
(the log and two indexes), plus up to SEALED_KEPT sealed segments a reader walked through.
A process producing to ten thousand partitions in turn would hold forty thousand. The budget
keeps the partitions in least-recently-used order; once the descriptors of those holding
files pass ``files.max.open``, the least recently used ones let go of their files
(PartitionLog.release_files) until the total is back under nine tenths of it. A partition
keeps its state in memory and opens its files again on its next use (about ten syscalls).

Bounded, not exact: a reader in the middle of a segment keeps that segment's descriptors
until it is done, and a partition reused through a log object held elsewhere counts again at
its next ``touch``.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Protocol

HEADROOM = 256  # descriptors left to everything else (sockets, the WAL, Spark, the metrics)
MIN_FILES = 16


class HoldsFiles(Protocol):
    def files(self) -> int: ...
    def release_files(self) -> bool: ...


def effective_limit(setting: int) -> int:
    """``files.max.open``, raised to the hard RLIMIT_NOFILE where the soft one is lower (as
    Go's runtime and Kafka's start scripts do) and capped by what the process may open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = setting + HEADROOM
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
                soft = new
            except (ValueError, OSError):
                pass
    if soft == resource.RLIM_INFINITY:
        return setting
    return max(MIN_FILES, min(setting, soft - HEADROOM))


class FileBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lru: OrderedDict[HoldsFiles, int] = OrderedDict()  # log -> files when counted
        self.total = 0  # descriptors of the logs in ``lru``, as last counted
        self.releases = 0  # logs released so far (the tests and benchmarks read it)
        self._mutex = threading.Lock()

    def touch(self, log: HoldsFiles) -> None:
        """``log`` is about to be used (it may open its files again): most recently used."""
        lru = self.lru
        with self._mutex:  # (an OrderedDict moved under an iteration raises)
            if log in lru:
                lru.move_to_end(log)
                return
            n = log.files() or 5  # (released: it opens its lock, active segment and end next)
            self.total += n - lru.get(log, 0)
            lru[log] = n
            lru.move_to_end(log)
            if self.total > self.limit:
                self._shrink(log)

    def forget(self, log: HoldsFiles) -> None:
        with self._mutex:
            self.total -= self.lru.pop(log, 0)

    def _shrink(self, keep: HoldsFiles) -> None:
        """(mutex held.) Recount, then release least recently used logs down to 90%."""
        lru = self.lru
        self.total = 0
        for log in list(lru):
            lru[log] = n = log.files()
            self.total += n
        goal = self.limit * 9 // 10
        for log in list(lru):
            if self.total <= goal:
                break
            if log is keep:
                continue
            if log.release_files():  # (busy ones stay: their turn comes next time)
                self.total -= lru.pop(log)
                self.releases += 1
