"""The hot tier: batches this process wrote recently, kept in memory for tailing readers.

One byte budget (``hot.max.bytes``) for the whole engine, oldest batches evicted first. Each
partition keeps a contiguous run of its newest batches of the active segment; a gap (another
process appended in between), a roll or a shrinking file starts the run afresh. Readers get
the very bytes that went to the segment, so a hit and a miss return the same records.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Hashable

from ..format.records import read_header
from ..segments.segment import BatchRef


class _Run:
    __slots__ = ("bases", "items", "head", "bytes", "live")

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.items: list[tuple[int, int, bytes | bytearray]] = []  # (next offset, file position, bytes)
        self.head = 0  # entries before it are evicted (compacted away lazily)
        self.bytes = 0
        self.live = True

    def popleft(self) -> int:
        n = len(self.items[self.head][2])
        self.items[self.head] = (0, 0, b"")
        self.head += 1
        self.bytes -= n
        if self.head > 1024 and self.head * 2 > len(self.bases):
            del self.bases[:self.head]
            del self.items[:self.head]
            self.head = 0
        return n


class HotCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._runs: dict[Hashable, _Run] = {}
        # one item per batch added, oldest first: the run it went to (a cleared run's items
        # are skipped, and dropped in bulk once they outnumber the live ones)
        self._order: deque[_Run] = deque()
        self._live = 0  # batches held by live runs
        self.bytes = 0
        self.hits: dict[Hashable, int] = {}
        self.misses: dict[Hashable, int] = {}

    def add(self, key: Hashable, base: int, next_offset: int, position: int,
            buf: bytes | bytearray, owned: bool = False) -> None:
        """Keep a batch just written. ``owned``: ``buf`` is the produce's own buffer, never
        changed again (a retry encodes into a copy: engine.produce.idempotent), kept as is; any
        other buffer (a WAL replay's reused read buffer) is copied."""
        n = len(buf)
        if n > self.max_bytes:
            return
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                run = self._runs[key] = _Run()
            elif run.head < len(run.items) and run.items[-1][0] != base:
                self._clear(key)
                run = self._runs[key] = _Run()
            run.bases.append(base)
            # (a copy of 100 KB costs about what the append's two writes cost)
            run.items.append((next_offset, position, buf if owned else bytes(buf)))
            run.bytes += n
            self.bytes += n
            self._live += 1
            self._order.append(run)
            while self.bytes > self.max_bytes and self._order:
                r = self._order.popleft()
                if r.live and r.head < len(r.items):
                    self.bytes -= r.popleft()
                    self._live -= 1
            if len(self._order) > 2 * self._live + 1024:
                self._order = deque(r for r in self._order if r.live)

    def clear(self, key: Hashable) -> None:
        with self._lock:
            self._clear(key)

    def _clear(self, key: Hashable) -> None:
        run = self._runs.pop(key, None)
        if run is not None:
            run.live = False
            self.bytes -= run.bytes
            self._live -= len(run.items) - run.head

    def get(self, key: Hashable, offset: int, end: int, max_bytes: int) -> list[BatchRef]:
        """Batches holding ``offset`` and after (below ``end``), or [] on a miss."""
        with self._lock:
            run = self._runs.get(key)
            i = -1
            if run is not None and run.head < len(run.items):
                i = bisect_right(run.bases, offset, run.head) - 1
            # (before the oldest cached batch, or past the newest)
            if run is None or i < run.head or run.items[i][0] <= offset:
                self.misses[key] = self.misses.get(key, 0) + 1
                return []
            picked = []
            total = 0
            for j in range(i, len(run.items)):
                nxt, pos, buf = run.items[j]
                if nxt > end or total >= max_bytes:
                    break
                picked.append((pos, buf))
                total += len(buf)
            self.hits[key] = self.hits.get(key, 0) + 1
        # (a bytearray the cache owns: BatchRef.buf is only read, segments/segment.py types it bytes)
        return [BatchRef(pos, read_header(buf, 0, f" in the hot cache at position {pos}"),
                         buf, 0)  # type: ignore[arg-type]
                for pos, buf in picked]

    def partition_stats(self, key: Hashable) -> dict[str, int]:
        with self._lock:
            run = self._runs.get(key)
            return {"bytes": run.bytes if run else 0, "hits": self.hits.get(key, 0),
                    "misses": self.misses.get(key, 0)}
