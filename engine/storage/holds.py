"""Partition flocks an engine keeps between appends, until they have been idle a while."""

from __future__ import annotations

import threading
import time
from typing import Any

HOLD_S = 0.05  # longest the append pipeline keeps the partition flock under constant load
IDLE_HOLD_S = 0.02  # longest an idle partition keeps it


class FlockHolds:
    """Partition flocks an engine keeps between appends, until they have been idle a while.

    Taking and dropping a partition's flock costs five syscalls per append (flock twice,
    the liveness and size checks, the next-segment probe) and about 25 us of a 1000-record
    produce; with threads appending to several partitions, each of them a GIL hand-off. So a
    partition whose pipeline goes idle keeps its flock, as a pipeline under load does, and a
    reaper thread drops those kept longer than IDLE_HOLD_S (so a producer calling in a
    loop, or a thread blocked elsewhere, say on another process's flock, never makes another
    process wait longer than that; a pipeline under constant load lets go every HOLD_S).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[Any, float] = {}  # flock kept while idle: since (monotonic)
        self.reaper: threading.Thread | None = None

    def keep(self, log: Any) -> None:
        """(``log``'s mutex held, its pipeline idle, its flock held.) Keep the flock until it
        has been idle IDLE_HOLD_S."""
        with self.lock:
            self.idle.pop(log, None)  # (re-inserted: the dict stays in time order)
            self.idle[log] = time.monotonic()
            if self.reaper is None:
                self.reaper = threading.Thread(target=self._reap, daemon=True,
                                               name="rivven-flock-holds")
                self.reaper.start()

    def _drop(self, logs: list[Any], since: float) -> None:
        busy = [log for log in logs if not log.release_idle()]
        if busy:  # (their mutex was taken: the reaper tries again)
            with self.lock:
                for log in busy:
                    self.idle.setdefault(log, since - IDLE_HOLD_S)  # due at once
                if self.reaper is None:
                    self.reaper = threading.Thread(target=self._reap, daemon=True,
                                                   name="rivven-flock-holds")
                    self.reaper.start()

    def _reap(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                due = [log for log, since in self.idle.items() if now - since >= IDLE_HOLD_S]
                for log in due:
                    del self.idle[log]
                if not self.idle and not due:
                    self.reaper = None
                    return
                wait = min(self.idle.values(), default=now) + IDLE_HOLD_S - now
            if due:
                self._drop(due, now)
            time.sleep(max(wait, 0.001))
