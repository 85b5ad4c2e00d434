"""Opening encrypted batches ahead of the reader, on worker threads.

The AEAD call releases the GIL, so while the reader lays out and converts one batch (CRC,
columns, Arrow arrays: Python work), the next ones decrypt on other cores, and a big
encrypted read runs at about the speed of a plain one. A batch too small to be worth a
hand-off (under ``AHEAD_MIN_BYTES``) is opened inline when the reader reaches it.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..format.decode import Opener
from ..format.records import BatchHeader
from ..storage.segment import BatchRef

AHEAD_MIN_BYTES = 16 << 10
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_mutex = threading.Lock()


def workers() -> int:
    """Threads that decrypt for readers: the cores the reader's own thread leaves (1-4)."""
    return min(4, max(1, (os.cpu_count() or 1) - 1))


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _mutex:
        if _pool is None or _pool_pid != os.getpid():  # (a forked child has no threads)
            _pool = ThreadPoolExecutor(workers(), thread_name_prefix="rivven-open")
            _pool_pid = os.getpid()
        return _pool


class _Opened:
    """An opener that hands back one batch's body, opened ahead (or its error)."""

    __slots__ = ("future",)

    def __init__(self, future: Future) -> None:
        self.future = future

    def __call__(self, buf: Any, pos: int, h: BatchHeader, where: str = "") -> Any:
        return self.future.result()


def opened_ahead(refs: Iterable[BatchRef], opener: Opener, where: Callable[[BatchRef], str]
                 ) -> Iterator[tuple[BatchRef, Opener]]:
    """``(batch, its opener)`` for each of ``refs``, the big encrypted ones submitted to the
    workers as soon as they are read (``workers()`` batches ahead of the caller)."""
    pool = _executor()
    depth = workers()
    queue: deque[tuple[BatchRef, Opener]] = deque()
    try:
        for ref in refs:
            h = ref.header
            if h.is_encrypted and h.stored_length >= AHEAD_MIN_BYTES:
                queue.append((ref, _Opened(pool.submit(opener, ref.buf, ref.start, h,
                                                       where(ref)))))
            else:
                queue.append((ref, opener))
            if len(queue) > depth:
                yield queue.popleft()
        while queue:
            yield queue.popleft()
    finally:
        for _, o in queue:  # (the caller stopped early)
            if isinstance(o, _Opened):
                o.future.cancel()
