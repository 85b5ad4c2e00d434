"""Writing a transaction's COMMIT or ABORT marker into one partition, once.

A marker goes through the partition's normal append path (``PartitionLog.append``: WAL,
group commit, segment), so it is durable when ``write`` returns and replayed like any batch.

``still_open`` says whether a partition still has a producer's transaction open, so that
finishing a prepared transaction twice (recovery run again after a crash, by two processes
one after the other) writes no marker twice. INTERIM (branch i15-coord): it scans the
partition's batch headers from the offset the partition joined the transaction; at merge it
asks the partition's producer state (``ProducerState.open_transactions()``) instead.
"""

from __future__ import annotations

from .. import clock
from ..format.control import encode_marker
from ..format.records import MAGIC_PRODUCER
from ..storage.log import PartitionLog


def still_open(log: PartitionLog, producer_id: int, marker_epoch: int, since: int) -> bool:
    """Has ``log`` transactional data of ``producer_id`` (of an epoch below
    ``marker_epoch``) at or after ``since`` that no marker of that producer follows?"""
    start, end = log.offsets()
    offset = max(since, start)
    found = False
    while offset < end:
        moved = False
        for ref in log.batches(offset):
            h = ref.header
            offset = h.base_offset + h.last_offset_delta + 1
            moved = True
            if h.magic != MAGIC_PRODUCER or h.producer_id != producer_id:
                continue
            if h.is_control:
                found = False  # a marker ends what came before it
            elif h.is_transactional and h.producer_epoch < marker_epoch:
                found = True
        if not moved:
            break
    return found


def write(log: PartitionLog, producer_id: int, marker_epoch: int, commit: bool) -> int:
    """Append the marker; returns its offset once durable."""
    return log.append(encode_marker(producer_id, marker_epoch, commit, clock.now_ms()))
