"""The read path: batches of a partition decoded as Records, columns or a pyarrow Table, and
several partitions streamed (positions: engine.fetch.positions).

Batches come from PartitionLog.batches (hot cache, local segments, cold tier) already
CRC-checked; each is decompressed and laid out once, and only what the caller asks for is
made into Python objects. Control batches (transaction markers) are never returned, at any
isolation level: their offsets are gaps.
"""

from __future__ import annotations

import gc
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any, cast

from ..errors import CorruptRecordError, InvalidArgument
from ..format.arrow import batch_columns
from ..format.arrow import table as arrow_table
from ..format.decode import Layout, body_of, decode_columns, decode_records, layout
from ..format.records import ColumnBatch, Record
from ..segments.segment import BatchRef
from ..storage.finder import LogFinder
from ..storage.log import PartitionLog
from ..storage.reader import Reach
from ..txn import isolation

_offset_of = attrgetter("offset")
class Where:
    """Where a batch is, for an error message: formatted only when one is made (this runs
    for every batch read)."""

    __slots__ = ("ref",)

    def __init__(self, ref: BatchRef) -> None:
        self.ref = ref

    def __str__(self) -> str:
        ref = self.ref
        return f" in {ref.path or 'the hot cache'} at position {ref.position} (offsets " \
               f"{ref.header.base_offset}..{ref.header.last_offset})"


def where(ref: BatchRef) -> Any:
    """``ref``'s place in an error message (a ``Where``: ``str()`` or an f-string makes it)."""
    return Where(ref)


def batches(log: PartitionLog, offset: int, max_records: int, committed: bool = False,
            reach: Reach | None = None) -> Iterator[tuple[BatchRef, Any, Layout]]:
    """``(batch, decompressed body, layout)`` from ``offset`` on, until ``max_records``;
    ``committed`` (read_committed): only up to the last stable offset, without the batches
    of aborted transactions (engine.txn.isolation); ``reach`` learns where the scan got to."""
    seen = 0
    lso, aborted = isolation.view(log, offset) if committed else (0, None)
    if reach is not None:
        reach.start = reach.end = offset
    opener = log.opener
    nbytes = 0
    try:
        # (an encrypted batch's tag, checked when it is opened below, covers every byte its
        # CRC does: its CRC is not checked twice)
        for ref in log.batches(offset, max_bytes=1 << 62, sealed_crc=opener is None):
            h = ref.header
            if committed and h.base_offset >= lso:
                return
            if isolation.hidden(h, aborted):  # (a marker's offset, or an aborted batch's)
                if reach is not None:
                    reach.end = h.next_offset
                continue
            if reach is not None:
                reach.start = reach.end = h.next_offset
            at = where(ref)
            try:
                body = body_of(ref.buf, ref.start, h, at, opener)
            except CorruptRecordError:
                log.counts.crc_errors.inc()  # (an encrypted batch whose tag fails)
                raise
            lay = layout(body, h, at)
            # counted before it is handed out: a caller that has what it wants never
            # resumes this generator
            seen += h.next_offset - max(offset, h.base_offset)
            nbytes += h.size
            yield ref, body, lay
            if seen >= max_records:
                return
    finally:
        if nbytes:  # counted once per call, not per batch
            log.counts.read(seen, nbytes)


def read(log: PartitionLog, offset: int, max_records: int, committed: bool = False
         ) -> list[Record]:
    """Up to ``max_records`` records from ``offset`` on (fewer at the end of the log)."""
    out: list[Record] = []
    # Records hold only bytes/ints/tuples (no cycles): pausing the cyclic GC while a batch
    # of them is made saves ~35% of read time.
    paused = gc.isenabled()
    try:
        if paused:
            gc.disable()
        for ref, body, lay in batches(log, offset, max_records, committed):
            recs = decode_records(body, ref.header, lay, log.partition, where(ref))
            # (a record read has its offset: Record.offset is None only in a produce)
            if recs and cast(int, recs[0].offset) < offset:
                recs = recs[bisect_left(recs, offset, key=_offset_of):]
            if recs:  # (segments overlap for a moment while a compaction swap installs)
                offset = cast(int, recs[-1].offset) + 1
            out.extend(recs)
            if len(out) >= max_records:
                del out[max_records:]
                break
        return out
    finally:
        if paused:
            gc.enable()


def read_columns(log: PartitionLog, offset: int, max_records: int, committed: bool = False,
                 reach: Reach | None = None) -> Iterator[tuple[Any, Any, list, list, Any]]:
    """Per batch ``(offsets, timestamps, keys, values, headers)`` columns from ``offset``."""
    for ref, body, lay in batches(log, offset, max_records, committed, reach):
        yield decode_columns(body, ref.header, lay, where(ref))


def read_arrow(log: PartitionLog, offset: int, max_records: int, committed: bool = False
               ) -> Any:
    """A ``pyarrow.Table`` (offset, timestamp, key, value, headers), zero-copy per batch."""
    parts: list[tuple[int, int, Any]] = []
    count = skip = 0
    for ref, body, lay in batches(log, offset, max_records, committed):
        h = ref.header
        cols = batch_columns(body, h, lay, where(ref))
        if not parts and h.base_offset < offset:
            if cols[0] is None:
                skip = offset - h.base_offset
            else:
                skip = bisect_left(cols[0].to_pylist(), offset - h.base_offset)
        parts.append((h.base_offset, h.record_count, cols))
        count += h.record_count
        if count - skip >= max_records:
            break
    result = arrow_table(parts)
    if skip or count - skip > max_records:
        result = result.slice(skip, max_records)
    return result


def offsets(log: PartitionLog, committed: bool = False) -> tuple[int, int]:
    """(log start, log end) — with ``committed`` the end a read_committed reader sees: the
    last stable offset."""
    start, end = log.offsets()
    return (start, min(end, isolation.stable_end(log))) if committed else (start, end)



def checked(offset: Any, isolation_level: str) -> bool:
    """A read's ``offset`` checked (a non-negative integer) and whether its isolation level
    is read_committed (InvalidArgument for anything else)."""
    check_offset(offset)
    return isolation.check_level(isolation_level)


def check_offset(offset: Any) -> None:
    if not isinstance(offset, int) or offset < 0:
        raise InvalidArgument(f"offset must be a non-negative integer, not {offset!r}")


# ---------------------------------------------------------------- streaming
def stream_topics(find: LogFinder, topic: str | Sequence[str],
                  partitions: Sequence[int] | None, start: Any, max_records: int | None,
                  follow: bool, on_idle: Callable[[], None] | None,
                  idle_timeout_ms: int | None, end: Any, isolation_level: str
                  ) -> Iterator[ColumnBatch]:
    """``Engine.stream``: the topics' (and ``partitions``') logs, ``start`` and ``end``
    (``Position``s) resolved in each now, then ``stream``."""
    from .positions import resolve

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
    if stops is not None:
        follow = False  # (a stop ends the stream: nothing to wait for)
        stop = list(stops)
    else:
        stop = [None if follow else offsets(log, committed)[1] for log in logs]
    left = max_records
    last_record = time.monotonic()
    while True:
        progressed = False
        for i, log in enumerate(logs):
            limit = stop[i]
            if limit is not None and pos[i] >= limit:
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
