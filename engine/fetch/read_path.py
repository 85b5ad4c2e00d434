"""The read path: batches of a partition decoded as Records, columns or a pyarrow Table, and
several partitions streamed (positions: engine.fetch.positions).

Batches come from PartitionLog.batches (hot cache, local segments, cold tier) already
CRC-checked; each is decompressed and laid out once, and only what the caller asks for is
made into Python objects. Control batches (transaction markers) are never returned, at any
isolation level: their offsets are gaps.
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from collections.abc import Iterator
from operator import attrgetter
from typing import Any, cast

from ..errors import CorruptRecordError, DamagedMetadata, InvalidArgument
from ..format.arrow import batch_columns
from ..format.arrow import table as arrow_table
from ..format.decode import Layout, body_of, decode_columns, decode_records, layout
from ..format.records import Record
from ..segments.segment import BatchRef
from ..storage.log import PartitionLog
from ..storage.reader import Reach, damaged_body
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
                lay = layout(body, h, at)
            except DamagedMetadata:
                raise
            except CorruptRecordError as e:
                log.counts.crc_errors.inc()  # (an encrypted batch whose tag fails)
                raise damaged_body(log, ref, e) from None
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
