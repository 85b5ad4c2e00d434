"""A partition's log start offset: persisted in ``.checkpoint``, checked before it is used.

Whoever moves the log start (retention, delete-records) writes it in the partition's
``.checkpoint`` before deleting anything below it; every process picks it up from there (the
loader when it opens the partition, the log whenever the file's identity changes). A
checkpoint that contradicts the segments is never acted on (engine.segments.checkpoint): a
log start past the log end would delete every sealed segment.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import DamagedMetadata
from ..segments import checkpoint
from ..segments.segment_set import SegmentSet
from .tier_view import TierView


def persisted(directory: str, segs: SegmentSet, known: int, resync: Callable[[], object]
              ) -> int:
    """The log start once ``.checkpoint`` (just seen changed) is read: the one it records
    when it is intact, agrees with the segments and lies past ``known``, else ``known``.
    Segments whose files changed are picked up on the way. ``resync`` brings the view of the
    segments up to date when the file seems to disagree with it (another process appended,
    rolled and checkpointed since)."""
    point = checked(directory, segs, resync)
    start = known
    if point is not None and point["log_start_offset"] > known:
        start = point["log_start_offset"]
        if len(segs.bases) > 1 and segs.bases[1] <= start:
            segs.relist()  # whole segments below it are (being) deleted
    segs.drop_replaced()
    return start


def checked(directory: str, segs: SegmentSet, resync: Callable[[], object]) -> dict | None:
    """``.checkpoint`` when it is intact and agrees with the log, else None (the segment set
    notes why: engine.segments.checkpoint). Never acted on unchecked."""
    try:
        point = checkpoint.read_checkpoint(directory)
        if point is None:
            return None
        try:
            checkpoint.check(directory, point, segs.bases, segs.active.file_size(), _end(segs))
        except DamagedMetadata:
            # a reader's view may lag what another process appended, rolled and then
            # checkpointed (the file is written after the bytes it vouches for)
            resync()
            checkpoint.check(directory, point, segs.bases, segs.active.file_size(), _end(segs))
        return point
    except DamagedMetadata as e:
        segs.ignored(e)
        return None


def _end(segs: SegmentSet) -> int | None:
    """The log end a checkpoint must not pass; None when a damaged end hides it (a reader's
    view stops before the damage: the checkpoint may vouch for the batches in it)."""
    act = segs.active
    return None if act.tail_damage is not None else act.next_offset


def first_offset(persisted_start: int, segs: SegmentSet, tier: TierView) -> int:
    """The log start offset: the persisted one, or the first offset a segment (local, or
    cold in the tier manifest) still holds when that is later; never past the log end."""
    first = segs.bases[0]
    entries = tier.entries
    if entries and entries[0].base_offset < first:
        first = entries[0].base_offset
    elif tier.error is not None:
        # a damaged manifest may hold offsets below the local segments: keep the persisted
        # start (a checkpoint must never move it past them; reads there raise the damage)
        first = min(first, persisted_start)
    return min(max(persisted_start, first), segs.active.next_offset)
