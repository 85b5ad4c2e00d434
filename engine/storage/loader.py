"""Opening a partition: a writer's first look mends what a crash left, a reader only looks.

Handed the partition's directory, its lock, its (empty) segment set and tier view, the loader
fills the two views and returns what the log keeps itself (``LoadedLog``, as Kafka's
``LogLoader`` returns ``LoadedLogOffsets``); it never sees the log. A writer, holding the
partition lock, finishes or discards what a crash cut short, in the numbered passes of
``load``; nothing it does needs the WAL, which is replayed afterwards (engine.wal.replay)
into the mended segments.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..fs import durable
from ..segments import checkpoint, swap
from ..segments.segment_set import SegmentSet
from . import log_start
from .partition_lock import PartitionLock
from .tier_view import TierView


@dataclass(frozen=True)
class LoadedLog:
    """What opening a partition found: the log start persisted in ``.checkpoint`` (0 when
    none vouches for one) and the identity (``checkpoint.stamp``) of the file it was read
    from, None when there was none. The segments are in the segment set, the cold ones in
    the tier view."""

    log_start: int
    checkpoint_stamp: tuple[int, int, int] | None


def load(directory: str, segs: SegmentSet, lock: PartitionLock, tier: TierView, store: str,
         writable: bool) -> LoadedLog:
    """Open the partition at ``directory`` into ``segs`` and ``tier`` (``store``: the topic's
    remote.storage.uri); a writer (``writable``) mends it first, under ``lock``."""
    if not writable:
        segs.relist()
        segs.open_active(repair=False)
        return _log_start(directory, segs, tier, store)
    with lock.exclusive():
        lock.check_alive()
        # 1. temp files of an atomic write (checkpoint, manifests) cut short by a crash
        durable.remove_write_debris(directory)
        # 2. a swap (compaction, restore): finished when committed, else its debris removed
        swap.roll_forward(directory)
        # 3. the segments as they are now; indexes whose .log a deletion already removed
        segs.relist()
        segs.drop_orphan_indexes()
        # 4. the active segment: trusted up to the checkpoint, its torn tail cut, indexes
        #    past the checkpoint rebuilt (the WAL replay puts acknowledged batches back)
        try:
            segs.open_active(repair=True)
        except CorruptRecordError:
            # damage a writer may not cut or step over: opened as a reader sees it (reads
            # of the intact batches work), and every change loads it again as a writer,
            # which refuses naming the repair (damage stays local)
            segs.open_active(repair=False)
            segs.active.needs_repair = True
        # 5. the log start, and a deletion below it that a crash cut short
        loaded = _log_start(directory, segs, tier, store)
        segs.delete_below(log_start.first_offset(loaded.log_start, segs, tier))
        return loaded


def _log_start(directory: str, segs: SegmentSet, tier: TierView, store: str) -> LoadedLog:
    """The tier manifest, then the log start persisted in ``.checkpoint``."""
    if tier.refresh(store):
        segs.relist()  # segments came back (restore) or went (tiering)
    stamp = checkpoint.stamp(directory)
    if stamp is None:
        return LoadedLog(0, None)
    # (the log is not open yet: nothing released, nothing cached; a refresh is a resync)
    start = log_start.persisted(directory, segs, 0, lambda: segs.refresh(repair=False))
    return LoadedLog(start, stamp)
