"""What a PartitionLog is handed by the layers above it, as protocols: storage never imports
the hot cache (engine.tiering), the cold cache, the producer state (engine.txn) or the meter;
the engine passes them in (engine.storage.partitions)."""

from __future__ import annotations

from typing import Any, Protocol

from ..format.records import BatchHeader
from ..segments.segment import BatchRef, Segment
from ..segments.tier_manifest import ColdSegment


class HotCachePort(Protocol):
    """Recent batches kept in memory (engine.tiering.hot.HotCache), keyed by log."""

    def add(self, key: Any, base: int, next_offset: int, position: int, buf: Any,
            owned: bool = False) -> None: ...
    def get(self, key: Any, offset: int, end: int, max_bytes: int) -> list[BatchRef]: ...
    def clear(self, key: Any) -> None: ...


class ProducerHook(Protocol):
    """The producer state of the partition (engine.txn.hook.PartitionProducers), handed in
    by the layer that opens logs: storage never imports engine.txn. The append pipeline and
    checkpoints call it with the partition's mutex and flock held (docs/TRANSACTIONS.md)."""

    def caught_up(self, end: int) -> None:
        """The flock was just taken and the view brought up to date: the log ends at
        ``end``. Apply what other processes appended since the state last looked."""

    def check(self, header: BatchHeader, buf: Any) -> int | None:
        """Before offsets are assigned to the format-2 batch ``buf`` (its ``header``, base
        offset not yet set): raise ProducerFenced, OutOfOrderSequence or InvalidTxnState
        when it may not be appended (nothing is written); return the base offset of the
        batch it duplicates (nothing is written, that offset is the answer); else None."""

    def applied(self, header: BatchHeader, buf: Any, base: int) -> None:
        """The batch checked last was logged at ``base`` (its WAL record written)."""

    def discarded(self) -> None:
        """Batches applied were not written after all (a failed write or fsync): forget
        the state, it is rebuilt from the log when next needed."""

    def checkpointed(self, end: int) -> None:
        """A checkpoint made the log durable up to ``end``: take a snapshot."""


class WalStreamPort(Protocol):
    """This process's WAL stream (engine.wal.stream.WalStream), handed to a log with its
    first append: storage never imports engine.wal. The append pipeline logs each batch in
    it, waits for its fsync, and listens (``after_wal_sync``) to write durable batches."""

    listeners: set[Any]
    direct_written: int  # bytes appended straight to segments (they call for checkpoints)

    def append_batch(self, topic_id: bytes, partition: int, topic: str,
                     batch: bytes | bytearray, records: int = 0) -> int:
        """Log one batch (offsets assigned); returns the stream position past its record."""

    def durable(self, position: int) -> bool:
        """Is the stream fsynced up to ``position``?"""

    def sync(self, position: int) -> None:
        """Return once the stream is fsynced up to ``position`` (group commit)."""


class ColdSegments(Protocol):
    """Local copies of cold segments (engine.tiering.cache.ColdCache)."""

    def segment(self, entry: ColdSegment) -> Segment: ...
    def forget(self, obj: str) -> None: ...


class Count(Protocol):
    def inc(self, n: float = 1) -> None: ...


class PartitionCounts(Protocol):
    """What a log counts as it works (engine.counters.meter.PartitionMeter): handed in, as
    storage never imports the meter."""

    rolls: Count
    crc_errors: Count
    hot_hits: Count
    hot_misses: Count

    def appended(self, records: int, nbytes: int) -> None: ...
    def read(self, records: int, nbytes: int) -> None: ...
    def cut(self, nbytes: int) -> None: ...


class _Uncounted:
    """The counts of a log nobody meters (tools, Spark tasks, metrics.enabled=false)."""

    def inc(self, n: float = 1) -> None:
        pass

    def appended(self, records: int, nbytes: int) -> None:
        pass

    def read(self, records: int, nbytes: int) -> None:
        pass

    def cut(self, nbytes: int) -> None:
        pass


UNCOUNTED: Any = _Uncounted()
UNCOUNTED.rolls = UNCOUNTED.crc_errors = UNCOUNTED.hot_hits = UNCOUNTED.hot_misses = UNCOUNTED
