"""Writing a transaction's COMMIT or ABORT markers into its partitions, once.

A marker goes through the partition's normal append path (WAL, group commit, segment), so it
is durable when ``write`` returns and replayed like any batch. ``write`` logs the markers of
every partition first and then waits for them (``storage.log.append_each``): one WAL fsync
serves them all, and it is made whatever ``wal.sync`` says (a marker a machine crash took
while the id's Complete state survived would leave its transaction open there for good).

``still_open`` says whether a partition still has a producer's transaction open (its
producer state: ``PartitionProducers.open_transactions``), so that finishing a prepared
transaction twice (recovery run again after a crash, by two processes one after the other)
writes no marker twice. ``ended`` finds the marker a transaction's end left in a partition:
for a transaction whose Prepare a machine crash took, its markers are the decision.
"""

from __future__ import annotations

from .. import clock
from ..errors import StorageError
from ..format.control import encode_marker, marker_type
from ..storage.log import PartitionLog, append_each
from .hook import producers_of


def still_open(log: PartitionLog, producer_id: int, marker_epoch: int, classic: bool = False
               ) -> bool:
    """Has ``log`` an open transaction of ``producer_id`` whose data has an epoch below
    ``marker_epoch`` (``classic``: or at it: Kafka's classic markers carry the data's)?"""
    producers = producers_of(log)
    if producers is None:  # (every log the engine opens for writing has one)
        raise StorageError(f"{log.topic}-{log.partition} was opened without producer state")
    found = producers.open_transactions().get(producer_id)
    return found is not None and (found[1] < marker_epoch or classic and found[1] == marker_epoch)


def ended(log: PartitionLog, producer_id: int, marker_epoch: int) -> int | None:
    """COMMIT or ABORT when ``log`` holds a marker of ``producer_id`` with ``marker_epoch``
    (where the end of that producer's transaction was decided), else None."""
    producers = producers_of(log)
    if producers is None:
        raise StorageError(f"{log.topic}-{log.partition} was opened without producer state")
    at = producers.ended_at(producer_id, marker_epoch)
    if at is None:
        return None
    for ref in log.batches(at, 4096):
        h = ref.header
        if (h.is_control and h.producer_id == producer_id and h.producer_epoch == marker_epoch
                and h.base_offset == at):
            return marker_type(h, ref.buf, ref.start, f" in {log.topic}-{log.partition}")
        break
    return None


def write(logs: list[PartitionLog], producer_id: int, marker_epoch: int, commit: bool
          ) -> list[int]:
    """Append the marker to each of ``logs``; returns their offsets once all are durable."""
    now = clock.now_ms()
    return append_each([(log, encode_marker(producer_id, marker_epoch, commit, now))
                        for log in logs], durable=True)
