"""Several partitions streamed as column batches (``Engine.stream``, ``rivven consume``): a
chunk of each in turn, from resolved start positions up to the ends at the call, or on as
records arrive."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..format.records import ColumnBatch
from ..storage.finder import LogFinder
from ..storage.log import PartitionLog
from ..storage.reader import Reach
from ..txn import isolation
from .positions import resolve
from .read_path import offsets, read_columns


def stream_topics(find: LogFinder, topic: str | Sequence[str],
                  partitions: Sequence[int] | None, start: Any, max_records: int | None,
                  follow: bool, on_idle: Callable[[], None] | None,
                  idle_timeout_ms: int | None, end: Any, isolation_level: str
                  ) -> Iterator[ColumnBatch]:
    """``Engine.stream``: the topics' (and ``partitions``') logs, ``start`` and ``end``
    (``Position``s) resolved in each now, then ``stream``."""
    names = [topic] if isinstance(topic, str) else list(dict.fromkeys(topic))
    if not names:
        raise InvalidArgument("no topic to read: name at least one")
    if idle_timeout_ms is not None and idle_timeout_ms < 0:
        raise InvalidArgument(f"idle_timeout_ms must be >= 0, not {idle_timeout_ms}")
    committed = isolation.check_level(isolation_level)
    metas = [find.topic(n) for n in names]
    logs = [find.log(m, p) for m in metas for p in (partitions or range(m.partitions))]
    starts = [resolve(log, start, committed) for log in logs]
    stops = None if end is None else [resolve(log, end, committed) for log in logs]
    return stream(logs, starts, max_records, follow, on_idle=on_idle,
                  idle_timeout_s=None if idle_timeout_ms is None else idle_timeout_ms / 1000,
                  stops=stops, committed=committed)
def stream(logs: list[PartitionLog], starts: list[int], max_records: int | None = None,
           follow: bool = False, chunk: int = 5000, poll_s: float = 0.1,
           on_idle: Callable[[], None] | None = None, idle_timeout_s: float | None = None,
           stops: list[int] | None = None, committed: bool = False) -> Iterator[ColumnBatch]:
    """Column batches of the partitions ``logs`` (of one topic or several) from ``starts`` on,
    a chunk of each in turn, up to the end offsets at the start, or up to ``stops``
    (exclusive) when given (with ``follow`` and no ``stops``: on, as records are appended,
    waiting ``poll_s`` between looks and calling ``on_idle`` first, until ``idle_timeout_s``
    pass without a record), at most ``max_records``."""
    pos = list(starts)
    stop: list[int | None]
    # partitions read up to the log end at the start, which a damaged end may lie past
    # (a read that reaches it fails: engine.storage.reader)
    to_end: list[bool] = [False] * len(logs)
    if stops is not None:
        follow = False  # (a stop ends the stream: nothing to wait for)
        stop = list(stops)
    else:
        stop = [None if follow else offsets(log, committed)[1] for log in logs]
        to_end = [not follow] * len(logs)
    left = max_records
    last_record = time.monotonic()
    while True:
        progressed = False
        for i, log in enumerate(logs):
            limit = stop[i]
            if limit is not None and pos[i] >= limit:
                if to_end[i]:
                    to_end[i] = False
                    for _ in log.batches(pos[i], 0):  # (nothing: raises at a damaged end)
                        break
                continue
            want = chunk if left is None else min(chunk, left)
            if limit is not None:
                want = min(want, limit - pos[i])
            reach = Reach()
            for cols in read_columns(log, pos[i], want, committed, reach):
                batch = _trim(log.topic, log.partition, cols, pos[i], limit, left)
                if not batch.keys:
                    continue
                yield batch
                pos[i] = batch.offsets[-1] + 1
                progressed = True
                if left is not None:
                    left -= len(batch.keys)
                    if left <= 0:
                        return
            if pos[i] == reach.start:  # step over trailing markers: no rescans while following
                pos[i] = reach.end
        if progressed:
            last_record = time.monotonic()
            continue
        if not follow:
            return
        if idle_timeout_s is not None and time.monotonic() - last_record >= idle_timeout_s:
            return
        if on_idle is not None:
            on_idle()
        time.sleep(poll_s if idle_timeout_s is None else
                   max(0.0, min(poll_s, last_record + idle_timeout_s - time.monotonic())))


def _trim(topic: str, partition: int, cols: tuple, start: int, limit: int | None,
          left: int | None) -> ColumnBatch:
    """One batch's columns cut to offsets in [start, limit) and to ``left`` records."""
    offs, ts, keys, values, hs = cols
    offs, ts, hs = list(offs), list(ts), list(hs)  # (ts and hs may be repeat objects)
    lo = 0
    while lo < len(offs) and offs[lo] < start:
        lo += 1
    hi = len(offs)
    if limit is not None:
        while hi > lo and offs[hi - 1] >= limit:
            hi -= 1
    if left is not None:
        hi = min(hi, lo + left)
    if lo == 0 and hi == len(offs):
        return ColumnBatch(topic, partition, offs, ts, keys, values, hs)
    return ColumnBatch(topic, partition, offs[lo:hi], ts[lo:hi], keys[lo:hi], values[lo:hi],
                       hs[lo:hi])
