"""Reading a partition: CRC-checked batches from the hot cache, local segments or the cold tier.

Readers take no lock while they read: they take a snapshot of the log's view (segments, log
start and end, the tier manifest) under the mutex, then read files. When a segment vanishes
under them (retention, delete-records, a swap, tiering) they take a new snapshot and go on
from where they were; they stop at the last complete, CRC-valid batch of the active segment.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from ..errors import ColdObjectError, CorruptRecordError, OffsetOutOfRange
from ..format.records import BatchHeader, check_crc
from ..segments.damage import Damage, DamagedRange
from ..segments.segment import PLAIN_ONLY, BatchRef, Segment, TornTail
from ..segments.segment_set import SegmentGone, SegmentSet
from ..segments.tier_manifest import ColdSegment
from .ports import HotCachePort, PartitionCounts
from .tier_view import cold_entry

MAX_RETRIES = 10  # new snapshots in a row before a vanished segment is an error
MAX_OFFSET = 1 << 63


class View(NamedTuple):
    """What a reader sees of the log at one moment."""

    start: int
    end: int
    bases: list[int]
    active: Segment
    tier: list[ColdSegment]
    tier_bases: list[int]


class ReadSource(Protocol):
    """What a read needs of the partition it reads (PartitionLog): views of it taken under
    its mutex, its segments and cold copies, the hot cache (keyed by this object) and the
    counts."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def hot(self) -> HotCachePort | None: ...
    @property
    def counts(self) -> PartitionCounts: ...
    @property
    def tier_error(self) -> Exception | None: ...

    def view(self) -> View:
        """The view now (brought up to date)."""

    def reload_view(self) -> View:
        """A view read afresh: after a segment vanished under a reader."""

    def sealed(self, base: int) -> Segment: ...
    def cold_segment(self, entry: ColdSegment) -> Segment: ...


def out_of_range(source: ReadSource, offset: int, start: int, end: int) -> OffsetOutOfRange:
    return OffsetOutOfRange(
        f"offset {offset} is out of range for {source.topic}-{source.partition}: valid "
        f"offsets are {start}..{end} (end = next offset to be written)", start, end)


def batches(log: ReadSource, offset: int, max_bytes: int = 1 << 20, sealed_crc: bool = True
            ) -> Iterator[BatchRef]:
    """CRC-checked batches holding ``offset`` and after, about ``max_bytes`` in all
    (``sealed_crc=False``: not an encrypted batch's, whose tag the caller checks)."""
    view = log.view()
    start, end, bases, active = view.start, view.end, view.bases, view.active
    tier, tier_bases = view.tier, view.tier_bases
    if offset < start or offset > end:
        raise out_of_range(log, offset, start, end)
    sent = 0
    hot = log.hot
    if hot is not None and active.base <= offset < end:
        refs = hot.get(log, offset, end, max_bytes)
        (log.counts.hot_hits if refs else log.counts.hot_misses).inc()
        for ref in refs:
            yield ref
            sent += ref.header.size
            offset = ref.header.next_offset
    retries = 0
    while offset < end and sent < max_bytes:
        i = bisect_right(bases, offset) - 1
        seg: Segment
        try:
            if i < 0:  # below the local segments: tiered to the cold store
                entry = cold_entry(tier, tier_bases, offset)
                if entry is None:
                    if log.tier_error is not None:
                        raise log.tier_error
                    raise SegmentGone(f"offset {offset} of {log.topic}-{log.partition} is "
                                      "neither local nor in the tier manifest")
                try:
                    seg = log.cold_segment(entry)
                except ColdObjectError:
                    # restored or deleted by retention since we read the manifest? then the
                    # next look finds the offsets elsewhere; else the object is gone
                    view = log.reload_view()
                    start, bases, tier, tier_bases = view.start, view.bases, view.tier, \
                        view.tier_bases
                    if any(e.object == entry.object for e in tier) or retries > MAX_RETRIES:
                        raise
                    retries += 1
                    if offset < start:
                        raise out_of_range(log, offset, start, end) from None
                    continue
                nxt = entry.next_offset
            else:
                seg = active if bases[i] == active.base else log.sealed(bases[i])
                nxt = bases[i + 1] if i + 1 < len(bases) else end
        except SegmentGone:
            # deleted by retention, delete-records, a compaction swap or tiering
            view = log.reload_view()
            start, bases, tier, tier_bases = view.start, view.bases, view.tier, view.tier_bases
            if offset < start:
                raise out_of_range(log, offset, start, end) from None
            retries += 1
            if retries > MAX_RETRIES:
                raise
            continue
        # a sealed segment's batches end before the log end (one past it would move the
        # reader beyond the log; they may pass the next segment's base for a moment while a
        # compaction swap installs); the active one grows while we read
        limit = MAX_OFFSET if seg is active else end
        step_over = StepOver(log, seg, offset, None if seg is active else nxt)
        pos, at = seg.start_for(offset)
        try:
            for ref in seg.iter_batches(pos, seg.size, True if sealed_crc else PLAIN_ONLY,
                                        damaged=step_over, expect=at):
                if ref.header.next_offset <= offset:
                    continue
                if ref.header.next_offset > limit:
                    raise CorruptRecordError(
                        f"batch at offsets {ref.header.base_offset}..{ref.header.last_offset} "
                        f"in {seg.path} at position {ref.position} runs past the log end "
                        f"{limit}; run 'rivven segment verify'", seg.path, ref.position)
                yield ref
                sent += ref.header.size
                offset = step_over.offset = ref.header.next_offset
                if sent >= max_bytes:
                    return
        except DamagedRange:
            raise
        except CorruptRecordError:
            log.counts.crc_errors.inc()
            raise
        except TornTail as t:
            if seg is active:
                return  # a batch still being written by another process
            log.counts.crc_errors.inc()
            raise CorruptRecordError(
                f"sealed segment {seg.path} ends with an incomplete batch at position "
                f"{t.position}; run 'rivven segment recover'", seg.path, t.position) from None
        if seg.tail_damage is not None and (seg is not active or offset >= end):
            step_over(seg.tail_damage)  # (a view stops before a damaged end: reached it)
        if seg is active:
            return
        offset = max(offset, nxt)
    if offset >= end and active.tail_damage is not None:
        log.counts.crc_errors.inc()
        raise damaged_range(log, active, active.tail_damage, None)


class StepOver:
    """What a read does with a damaged batch of ``seg``: one wholly below the ``offset`` it
    reads from is stepped over; one it reaches fails, naming its offsets and the way past
    (damage stays local). ``following``: the next segment's base offset (``seg`` sealed)."""

    __slots__ = ("log", "seg", "offset", "following")

    def __init__(self, log: ReadSource, seg: Segment, offset: int, following: int | None
                 ) -> None:
        self.log, self.seg, self.offset, self.following = log, seg, offset, following

    def __call__(self, d: Damage) -> None:
        if d.next_offset is None or self.offset < d.next_offset:
            self.log.counts.crc_errors.inc()
            raise damaged_range(self.log, self.seg, d, self.following)


def damaged_range(log: ReadSource, seg: Segment | str, d: Damage, following: int | None
                  ) -> DamagedRange:
    """The error of a read that reached the damaged batch ``d`` of ``seg`` (or of the file
    at that path): its offsets and the ways past it (``following``: the next segment's base
    offset, when ``seg`` is sealed and nothing intact follows the damage in it)."""
    path = seg if isinstance(seg, str) else seg.path
    nxt = d.next_offset if d.next_offset is not None else following
    name, topic, p = f"{log.topic}-{log.partition}", log.topic, log.partition
    if nxt is None:
        return DamagedRange(
            f"offsets from {d.first} of {name} cannot be read: {d.reason}; it is the end of "
            "the log (nothing intact follows it, and appends are refused): 'rivven segment "
            f"recover {topic} --truncate-corrupt' cuts it", path, d.position, d.first, None)
    return DamagedRange(
        f"offsets {d.first}..{nxt - 1} of {name} cannot be read: {d.reason}; to go past "
        f"them read from offset {nxt} ('rivven consume {topic} -p {p} -o {nxt}'), delete "
        f"them and all before with 'rivven delete-records {topic} -p {p} --before {nxt}', or "
        f"cut out only them with 'rivven segment recover {topic} --truncate-corrupt'",
        path, d.position, d.first, nxt)


def damaged_body(log: ReadSource, ref: BatchRef, e: CorruptRecordError) -> DamagedRange:
    """The error of a read whose batch ``ref`` is whole (its CRC matches, or it is an
    encrypted one, checked by its tag) but cannot be opened or laid out: ``e`` with its
    offsets and the ways past it."""
    h = ref.header
    return damaged_range(log, ref.path or "the hot cache", Damage(
        ref.position, ref.position + h.size, h.base_offset, h.next_offset, str(e)), None)


class Reach:
    """Where a scan got to. ``start``: just past the last batch it returned (its first offset
    when it returned none); ``end``: past the markers (and, read_committed, the aborted
    batches) it stepped over after that. Offsets in [start, end) hold nothing a reader sees,
    so a consumer that has read up to ``start`` stands at ``end``, as Kafka's consumer steps
    over control batches."""

    __slots__ = ("start", "end")

    def __init__(self, offset: int = 0) -> None:
        self.start = self.end = offset


def headers(segs: SegmentSet, start: int, end: int,
            body: Callable[[BatchHeader], bool] = lambda h: False
            ) -> Iterator[tuple[BatchHeader, bytes | None]]:
    """(mutex held.) The headers of the local batches (of the segments ``segs``) holding
    offsets ``start`` to ``end`` (exclusive), in offset order, read without their bodies; with
    the batch's bytes, CRC checked, when ``body(header)`` says so (a control batch's marker
    type). ``start`` must not lie below the local segments. For the producer state
    (engine.txn): a prefix of the log the view already checked, so only headers are read."""
    bases = segs.bases
    if start < bases[0] and start < end:
        raise SegmentGone(f"offset {start} of {segs.topic}-{segs.partition} is below the local "
                          f"segments (they start at {bases[0]})")
    last = -1
    for i in range(max(bisect_right(bases, start) - 1, 0), len(bases)):
        if start >= end:
            return
        seg = segs.active if bases[i] == segs.active.base else segs.sealed(bases[i])
        pos, at = seg.start_for(start) if seg.base <= start else (0, seg.base)
        while pos >= 0:  # (again after a damaged batch, from the intact one after it)
            resume = -1
            try:
                for position, h in seg.iter_headers(pos, seg.size, damaged=_step_over, expect=at):
                    if h.last_offset <= last:
                        # segments overlap while a compaction swap installs (or in the view of
                        # a process that missed one a crash cut short): offsets already seen,
                        # as readers skip them
                        continue
                    if h.base_offset >= end:
                        return
                    buf = None
                    if body(h) and h.next_offset > start:
                        buf = os.pread(seg.fd, h.size, position)
                        if len(buf) < h.size:
                            raise TornTail(position, "file shorter than expected")
                        try:
                            check_crc(buf, 0, h, seg.where(position))
                        except CorruptRecordError as e:
                            d = seg.damage_at(position, seg.size, at, str(e))
                            if d.next_offset is not None:
                                resume, at = d.end, d.next_offset
                            break
                    at = h.next_offset
                    last = h.last_offset
                    if h.next_offset <= start:
                        continue
                    yield h, buf
                    start = h.next_offset
            except TornTail as t:
                raise CorruptRecordError(
                    f"{seg.path} ends with an incomplete batch at position {t.position} inside "
                    "the checked part of the log; run 'rivven segment verify'", seg.path,
                    t.position) from None
            pos = resume


def _step_over(d: Damage) -> None:
    """(``headers``.) A damaged batch's header cannot be trusted: the producer state goes on
    without it, as reads step over it."""
