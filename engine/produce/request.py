"""What a produce call asks, as columns (``ProduceRequest``: its arguments checked, defaults
filled in), and how its records split into batches under ``max.message.bytes``: sizes summed
and cuts found in C-level passes, no Python step per record."""

from __future__ import annotations

import bisect
import gc
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .. import clock
from ..errors import InvalidArgument, RecordTooLarge, plural
from ..format import native
from ..format.records import HEADER_SIZE, Record
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog

BATCH_OVERHEAD = HEADER_SIZE + 64  # a batch's header and padding, when splitting
RECORD_OVERHEAD = 24  # a record's offsets and lengths in the columns
HEADER_OVERHEAD = 12


class Stamp(Protocol):
    """The producer fields of a request's batches (a transactional producer's; format 2)."""

    def joining(self, meta: TopicMeta, partitions: list[int]) -> None:
        """Before any batch is appended: the partitions the request writes to."""

    def fields(self, log: PartitionLog) -> dict[str, int]:
        """``producer_id, producer_epoch, base_sequence, flags`` of the next batch to
        ``log`` (encode_batch's arguments)."""

    def appending(self, log: PartitionLog, count: int) -> None:
        """A batch of ``count`` records with those fields is being appended to ``log``."""


@dataclass
class ProduceRequest:
    """One produce call, columnar. ``timestamps`` is one int for all records or one each."""

    topic: str
    values: Sequence[bytes | None]
    keys: Sequence[bytes | None]
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None
    timestamps: int | list[int]
    partition: int | None = None  # every record to this partition
    partitions: Sequence[int | None] | None = None  # or one per record (None: partitioner's)
    compression: str | None = None
    stored: int = 0  # batches stored so far: a retry after the first would duplicate them
    stamp: Stamp | None = None  # producer fields for the batches (None: format 1)

    @classmethod
    def of(cls, topic: str, values: Sequence[bytes | None],
           keys: Sequence[bytes | None] | None = None,
           headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
           timestamps: Sequence[int | None] | int | None = None,
           partition: int | None = None, partitions: Sequence[int | None] | None = None,
           compression: str | None = None) -> ProduceRequest:
        """A request with its arguments checked and defaults filled in."""
        n = len(values)
        if keys is None:
            keys = [None] * n
        if len(keys) != n:
            raise InvalidArgument("keys and values must have the same length")
        if headers is not None and not any(headers):
            headers = None
        return cls(topic, values, keys, headers, checked_timestamps(timestamps, n), partition,
                   partitions, compression)

    @classmethod
    def of_records(cls, topic: str, records: list[Any], partition: int | None,
                   compression: str | None) -> ProduceRequest:
        """A request from Records (or tuples of Record's fields), transposed to columns."""
        cols = native.record_columns(records)  # (plain Records: keys and values, in C)
        if cols is not None:
            return cls.of(topic, cols[1], cols[0], None, None, partition, None, compression)
        paused = gc.isenabled()  # transposing allocates many tuples; no cycles are made
        if paused:
            gc.disable()
        try:
            cols = list(zip(*records))
            if len(cols) != 6:
                records = [r if isinstance(r, Record) else Record(*r) for r in records]
                cols = list(zip(*records))
            keys, values, headers, timestamps, _, parts = cols
            return cls.of(topic, values, keys, headers, timestamps, partition, parts,
                          compression)
        finally:
            if paused:
                gc.enable()


_INT_TYPES = {int, bool}


def checked_timestamps(timestamps: Any, n: int) -> int | list[int]:
    """One timestamp for all (None: now) or one per record, each checked (None: now)."""
    if timestamps is None or isinstance(timestamps, int):
        return clock.now_ms() if timestamps is None else timestamps
    if len(timestamps) != n:
        raise InvalidArgument("timestamps and values must have the same length")
    nones = timestamps.count(None) if hasattr(timestamps, "count") else 0
    if nones == n:
        return clock.now_ms()
    if nones:
        now = clock.now_ms()
        timestamps = [now if t is None else t for t in timestamps]
    stamps = list(timestamps)
    if not set(map(type, stamps)) <= _INT_TYPES or min(stamps) < 0 or max(stamps) >= 1 << 62:
        if not all(isinstance(t, int) and 0 <= t < 1 << 62 for t in stamps):
            raise InvalidArgument("record timestamps must be non-negative integers (ms since "
                                  "epoch)")
    return stamps



def too_large(index: int, message: str) -> RecordTooLarge:
    """RecordTooLarge naming record ``index`` (rivven produce turns it into its line)."""
    err = RecordTooLarge(message)
    err.index = index  # type: ignore[attr-defined]  # which record (rivven produce names its line)
    return err


def split_batches(keys: Sequence, values: Sequence, headers: Sequence | None, limit: int, topic: str
           ) -> list[tuple[int, int]]:
    """Record index ranges whose batches should each stay under ``limit`` bytes: the sizes
    summed in C (map, accumulate), the cuts found by bisection, no Python step per record
    (but for headers)."""
    n = len(values)
    sizes = list(map(operator.add, lengths(keys), lengths(values)))
    if headers is not None:
        sizes = [r + sum(HEADER_OVERHEAD + len(hk) + (len(hv) if hv is not None else 0)
                         for hk, hv in h) for r, h in zip(sizes, headers)]
    biggest = max(sizes, default=0)
    if BATCH_OVERHEAD + RECORD_OVERHEAD + biggest > limit:
        i = sizes.index(biggest)
        rec = RECORD_OVERHEAD + biggest
        raise too_large(i, f"record {i} is about {plural(rec, 'byte')}, over "
                         f"max.message.bytes={limit} of topic {topic!r}; raise it with "
                         f"'rivven topic alter-config {topic} --set max.message.bytes=N'")
    ends = list(itertools.accumulate(map(operator.add, sizes,
                                         itertools.repeat(RECORD_OVERHEAD))))
    if not ends or BATCH_OVERHEAD + ends[-1] <= limit:
        return [(0, n)]
    chunks = []
    start, base = 0, 0
    room = limit - BATCH_OVERHEAD
    while start < n:
        stop = max(bisect.bisect_right(ends, base + room, start), start + 1)
        chunks.append((start, stop))
        start, base = stop, ends[stop - 1]
    return chunks


def distinct_partitions(partitions: Sequence[int | None]) -> set[int] | None:
    """The partitions a column names, None when one is not given (or not hashable: the
    per-record path names it)."""
    try:
        distinct = set(partitions)
    except TypeError:
        return None
    return None if None in distinct else distinct  # type: ignore[return-value]


def lengths(xs: Sequence) -> list[int]:
    """Each one's length, 0 for None."""
    try:
        return list(map(len, xs))
    except TypeError:  # (a None among them)
        return [len(x) if x is not None else 0 for x in xs]
