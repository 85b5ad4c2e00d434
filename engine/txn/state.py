"""``ProducerState``: what one partition knows of the producers that write to it, and the
checks a format-2 batch must pass before it is appended (docs/TRANSACTIONS.md, "Producer
state of a partition"). Pure: no I/O; ``engine.txn.hook`` loads, feeds and snapshots it.

Per producer id: its epoch, the last ``MAX_BATCHES`` batches (sequences and offsets: a retry
of one of them is a duplicate), the open transaction's first offset and epoch, and the offset
and time of its last batch (for expiry). ``end`` is the offset up to which every batch of the
log has been applied.

Batches read back from the log (a load, batches of other processes) go through ``apply``
alone: the log is the truth, its batches are never refused. ``check`` runs only for a batch
about to be appended.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from ..errors import InvalidTxnState, OutOfOrderSequence, ProducerFenced
from ..format.control import ABORT
from ..format.records import SEQ_MASK, BatchHeader
from ..segments.txn_index import AbortedTxn

MAX_BATCHES = 5  # batches per producer remembered for duplicates (Kafka's too)
NONE = -1  # no open transaction (txn_first_offset, txn_epoch)


class BatchMeta(NamedTuple):
    """One of a producer's last batches in this partition."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class ProducerEntry:
    """The state of one producer id in one partition."""

    __slots__ = ("epoch", "batches", "txn_first_offset", "txn_epoch", "last_offset",
                 "last_timestamp")

    def __init__(self, epoch: int, batches: list[BatchMeta] | None = None,
                 txn_first_offset: int = NONE, txn_epoch: int = NONE, last_offset: int = NONE,
                 last_timestamp: int = NONE) -> None:
        self.epoch = epoch
        self.batches = batches if batches is not None else []  # oldest first
        self.txn_first_offset = txn_first_offset
        self.txn_epoch = txn_epoch
        self.last_offset = last_offset  # of its last batch or marker here
        self.last_timestamp = last_timestamp  # when last seen (expiry): see apply

    @property
    def last_seq(self) -> int:
        """The sequence of its last record here, -1 when none is known at this epoch."""
        return self.batches[-1].last_seq if self.batches else -1

    def __repr__(self) -> str:
        return (f"ProducerEntry(epoch={self.epoch}, batches={self.batches}, "
                f"txn_first_offset={self.txn_first_offset}, txn_epoch={self.txn_epoch}, "
                f"last_offset={self.last_offset}, last_timestamp={self.last_timestamp})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerEntry) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)


class ProducerState:
    """The producer state of one partition (not thread-safe: the caller holds the
    partition's mutex)."""

    def __init__(self, name: str = "", end: int = 0) -> None:
        self.name = name  # "topic-partition", for messages
        self.end = end  # every batch below this offset has been applied
        self.producers: dict[int, ProducerEntry] = {}
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction

    # ---------------------------------------------------------------- the checks
    def check(self, h: BatchHeader, marker: int | None = None) -> int | None:
        """May the format-2 batch ``h`` (``marker``: its type, for a control batch) be
        appended? Raises ProducerFenced, OutOfOrderSequence or InvalidTxnState when not;
        returns the base offset of the batch it repeats (a duplicate: write nothing), else
        None."""
        pid, epoch = h.producer_id, h.producer_epoch
        e = self.producers.get(pid)
        if e is None:
            # never seen here, or expired: any sequence (Kafka's rule since KIP-360)
            return None
        if epoch < e.epoch:
            raise ProducerFenced(
                f"producer {pid} epoch {epoch} was fenced in {self.name}: epoch {e.epoch} "
                "took over; this producer can no longer write (open a new one)")
        if h.is_control:
            # a marker carries the epoch after its transaction's data (KIP-890, rivven's own
            # producers) or the data's own (Kafka's classic rule, Kafka clients through
            # rivven serve): both end it; one below the data's never does
            if e.txn_first_offset != NONE and epoch < e.txn_epoch:
                raise InvalidTxnState(
                    f"a marker of producer {pid} with epoch {epoch} cannot end its transaction "
                    f"in {self.name} (data epoch {e.txn_epoch}): a marker carries the "
                    "transaction's epoch or the one after it")
            return None
        if e.txn_first_offset != NONE and (not h.is_transactional or epoch != e.txn_epoch):
            raise InvalidTxnState(
                f"producer {pid} has a transaction open in {self.name} since offset "
                f"{e.txn_first_offset} (epoch {e.txn_epoch}): a "
                f"{'transactional' if h.is_transactional else 'non-transactional'} batch with "
                f"epoch {epoch} cannot be appended until it is committed or aborted")
        first = h.base_sequence
        if epoch > e.epoch:
            if first != 0:
                raise OutOfOrderSequence(
                    f"producer {pid} starts epoch {epoch} in {self.name} at sequence {first}; "
                    "a new epoch starts at sequence 0")
            return None
        last = h.last_sequence
        for b in e.batches:
            if b.first_seq == first and b.last_seq == last:
                return b.first_offset
        expected = (e.last_seq + 1) & SEQ_MASK
        if first != expected:
            raise OutOfOrderSequence(
                f"producer {pid} epoch {epoch} sent sequence {first} to {self.name}, expected "
                f"{expected}: a batch was lost or reordered before it (nothing was written)")
        return None

    # ---------------------------------------------------------------- applying batches
    def apply(self, h: BatchHeader, base: int, marker: int | None = None, now_ms: int = -1
              ) -> AbortedTxn | None:
        """Account the format-2 batch ``h`` now at offsets from ``base`` (``marker``: its
        type, for a control batch), taken in at ``now_ms``. Returns the aborted transaction an
        ABORT marker ended."""
        pid, epoch = h.producer_id, h.producer_epoch
        last_offset = base + h.last_offset_delta
        if last_offset + 1 > self.end:
            self.end = last_offset + 1
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        elif epoch > e.epoch:  # a new epoch: its sequences start again
            e.epoch = epoch
            e.batches = []
        e.last_offset = last_offset
        # seen last: its batch's time or, if later, when the state took the batch in (records
        # with old timestamps, a backfill, must not expire their producer at once)
        e.last_timestamp = max(e.last_timestamp, h.max_timestamp, now_ms)
        if h.is_control:
            first = e.txn_first_offset
            if first == NONE:
                return None  # nothing open here: a marker with nothing to end
            e.txn_first_offset = e.txn_epoch = NONE
            del self.open[pid]
            if marker == ABORT:
                return AbortedTxn(pid, first, last_offset, self.last_stable_offset(self.end))
            return None
        batches = e.batches
        if len(batches) >= MAX_BATCHES:
            del batches[0]
        batches.append(BatchMeta(h.base_sequence, h.last_sequence, base, last_offset,
                                 h.max_timestamp))
        if h.is_transactional and e.txn_first_offset == NONE:
            e.txn_first_offset = base
            e.txn_epoch = epoch
            self.open[pid] = base
        return None

    def advance(self, end: int) -> None:
        """Batches up to ``end`` held no producer's (format 1)."""
        if end > self.end:
            self.end = end

    # ---------------------------------------------------------------- reading it
    def last_stable_offset(self, log_end: int) -> int:
        """The first offset of the oldest open transaction, else ``log_end`` (read_committed
        reads stop before it)."""
        if not self.open:
            return log_end
        return min(min(self.open.values()), log_end)

    def open_transactions(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (first offset, epoch) of each transaction open here."""
        return {pid: (first, self.producers[pid].txn_epoch) for pid, first in self.open.items()}

    def last_sequence(self, producer_id: int, epoch: int) -> int | None:
        """The last sequence ``producer_id`` wrote here at ``epoch`` (-1: none yet at it),
        None when it is unknown here or at another epoch."""
        e = self.producers.get(producer_id)
        if e is None or e.epoch != epoch:
            return None
        return e.last_seq

    def entries(self) -> Iterator[tuple[int, ProducerEntry]]:
        """(producer id, entry) in producer id order."""
        for pid in sorted(self.producers):
            yield pid, self.producers[pid]

    # ---------------------------------------------------------------- expiry
    def expire(self, now_ms: int, expiration_ms: int, log_start: int) -> list[int]:
        """Drop the producers without an open transaction last seen ``expiration_ms`` or
        more before ``now_ms``, or whose last batch lies below ``log_start``; returns their
        ids."""
        gone = [pid for pid, e in self.producers.items()
                if e.txn_first_offset == NONE
                and (now_ms - e.last_timestamp >= expiration_ms or e.last_offset < log_start)]
        for pid in gone:
            del self.producers[pid]
        return gone

    def add(self, producer_id: int, entry: ProducerEntry) -> None:
        """Put an entry read from a snapshot."""
        self.producers[producer_id] = entry
        if entry.txn_first_offset != NONE:
            self.open[producer_id] = entry.txn_first_offset
