"""Opening a partition: a writer's first look mends what a crash left, a reader only looks.

A writer, holding the partition lock, finishes or discards what a crash cut short, in the
numbered passes of ``load``; nothing it does needs the WAL, which is replayed afterwards
(engine.wal.replay) into the mended segments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fs import durable
from ..segments import swap

if TYPE_CHECKING:
    from .log import PartitionLog


def load(log: PartitionLog) -> None:
    if not log.writable:
        log.segs.relist()
        log.segs.open_active(repair=False)
        log.read_log_start()
        return
    with log.lock.exclusive():
        log.lock.check_alive()
        # 1. temp files of an atomic write (checkpoint, manifests) cut short by a crash
        durable.remove_write_debris(log.dir)
        # 2. a swap (compaction, restore): finished when committed, else its debris removed
        swap.roll_forward(log.dir)
        # 3. the segments as they are now; indexes whose .log a deletion already removed
        log.segs.relist()
        log.segs.drop_orphan_indexes()
        # 4. the active segment: trusted up to the checkpoint, its torn tail cut, indexes
        #    past the checkpoint rebuilt (the WAL replay puts acknowledged batches back)
        log.segs.open_active(repair=True)
        # 5. the log start, and a deletion below it that a crash cut short
        log.read_log_start()
        log.segs.delete_below(log.start_offset())
