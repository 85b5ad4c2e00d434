"""Offsets of a partition: its start and end (the last stable offset for read_committed), the
first offset at a time, and the offset a ``Position`` names ("beginning", "end", N, "@TIME").
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InvalidArgument
from ..format.decode import body_of, decode_columns, layout
from ..format.records import ATTR_CONTROL
from ..segments.damage import Damage
from ..segments.segment import Segment
from ..storage.log import PartitionLog
from ..txn import isolation
from .read_path import offsets, where
from .results import OffsetsRow

POSITION_KINDS = ("beginning", "end", "offset", "from_end", "from_start", "timestamp")


class Position(NamedTuple):
    """Where to read from: ``beginning``, ``end``, ``offset`` N (clamped into the log),
    ``from_end`` N (N records before the end), ``from_start`` N (N records after the log
    start: rpk's ``+N``) or ``timestamp`` T (the first offset at or after T ms; the end when
    there is none)."""

    kind: str
    value: int = 0



# ---------------------------------------------------------------- offsets
def offset_for_time(log: PartitionLog, timestamp: int, committed: bool = False) -> int | None:
    """The first offset whose record timestamp is >= ``timestamp`` (None if none is), cold
    segments included; ``committed``: only below the last stable offset (read_committed)."""
    found = _offset_for_time(log, timestamp)
    if committed and found is not None and found >= isolation.stable_end(log):
        return None
    return found


def _offset_for_time(log: PartitionLog, timestamp: int) -> int | None:
    start = log.offsets()[0]
    for entry in log.cold_entries():
        if entry.max_timestamp >= timestamp and entry.next_offset > start:
            found = _first_at(log, log.cold_segment(entry), timestamp, start)
            if found is not None:
                return found
    for seg in log.all_segments():
        if log.segment_max_timestamp(seg) < timestamp:
            continue
        found = _first_at(log, seg, timestamp, start)
        if found is not None:
            return found
    return None


def _first_at(log: PartitionLog, seg: Segment, timestamp: int, start: int) -> int | None:
    """(In one segment.) The first offset >= ``start`` with a timestamp >= ``timestamp``."""
    # (a damaged batch's timestamps are unknown: the first intact record at the time is it)
    for ref in seg.iter_batches(seg.position_for_time(timestamp), seg.size, damaged=_skip):
        h = ref.header
        if h.max_timestamp < timestamp or h.last_offset < start or h.attributes & ATTR_CONTROL:
            continue
        at = where(ref)
        body = body_of(ref.buf, ref.start, h, at, log.opener)
        offsets, tss, *_ = decode_columns(body, h, layout(body, h, at), at)
        for off, t in zip(offsets, tss):
            if t >= timestamp and off >= start:
                return off
    return None


def _skip(d: Damage) -> None:
    pass


def resolve(log: PartitionLog, position: Position, committed: bool = False) -> int:
    """The offset ``position`` names in this partition, inside [log start, log end]
    (``committed``: the end is the last stable offset)."""
    return locate(log, position, committed)[0]


def locate(log: PartitionLog, position: Position, committed: bool = False) -> tuple[int, bool]:
    """``resolve``, and whether the position lies past the end of the log: an offset (or
    log start + N) above the end offset, or a time no record is at or after (both resolve
    to the end offset)."""
    kind, value = position
    if kind not in POSITION_KINDS:
        raise InvalidArgument(f"unknown position {kind!r}: use one of {', '.join(POSITION_KINDS)}")
    if kind != "beginning" and kind != "end" and (not isinstance(value, int) or value < 0):
        raise InvalidArgument(f"position {kind} needs a non-negative integer, not {value!r}")
    start, end = offsets(log, committed)
    if kind == "beginning":
        return start, False
    if kind == "end":
        return end, False
    if kind == "timestamp":
        off = offset_for_time(log, value, committed)
        return (end, True) if off is None else (max(off, start), False)
    if kind == "from_end":
        return max(start, end - value), False
    want = start + value if kind == "from_start" else value
    return min(max(want, start), end), want > end


def list_offsets(logs: list[PartitionLog], at: Position | None = None, committed: bool = False
                 ) -> list[OffsetsRow]:
    """Per partition: start and end offset (``committed``: the last stable offset is the
    end), and with ``at`` the offset it names, whether ``at`` lies past the end
    (``past_end``) and, for a time, the timestamp."""
    rows = []
    for log in logs:
        start, end = offsets(log, committed)
        row: OffsetsRow = {"partition": log.partition, "start_offset": start,
                           "end_offset": end}
        if at is not None:
            row["offset"], row["past_end"] = locate(log, at, committed)
            if at.kind == "timestamp":
                row["timestamp"] = at.value
        rows.append(row)
    return rows


def offsets_before(logs: list[PartitionLog], before: Position, clamp: bool
                   ) -> dict[int, int]:
    """Where delete-records moves each log start: an ``offset`` (with ``clamp``, no further
    than a partition's end), or any other position as ``resolve`` reads it (``end``: every
    record, as Kafka's offset -1; ``from_end`` N: all but the last N; a ``timestamp``: the
    first offset at or after it)."""
    if before.kind == "offset" and not clamp:
        return {log.partition: before.value for log in logs}
    return {log.partition: resolve(log, before) for log in logs}
