"""The part of ``Engine`` that appends: ``produce`` (Records), ``produce_batch`` (columns) and
``produce_arrow`` (a pyarrow Table), each counted per topic and followed by the WAL's
checkpoint check. Mixed into ``Engine``; the attributes below are the engine's own."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .counters.meter import Meter
from .errors import RivvenError
from .format.records import Record
from .produce.path import ProducePath, ProduceRequest
from .wal.owner import WalOwner


class ProduceApi:
    meter: Meter
    _producer: ProducePath
    _wal: WalOwner
    _produce_counts: dict[str, tuple[Any, Any]]

    if TYPE_CHECKING:
        def _writable(self) -> None: ...

    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None,
                compression: str | None = None) -> list[tuple[int, int]]:
        """Append records; returns one ``(partition, offset)`` per record once durable."""
        recs = records if isinstance(records, list) else list(records)
        if not recs:
            return []
        self._writable()
        calls, errors = self._counts_of(topic)
        calls.inc()
        try:
            acks = self._producer.produce(ProduceRequest.of_records(topic, recs, partition,
                                                                    compression))
        except RivvenError:
            errors.inc()
            raise
        self._wal.maybe_checkpoint()
        return acks

    def _counts_of(self, topic: str) -> tuple[Any, Any]:
        """A topic's produce calls and errors counters (made once)."""
        c = self._produce_counts.get(topic)
        if c is None:
            c = self._produce_counts[topic] = (
                self.meter.get("rivven_produce_requests_total", topic=topic),
                self.meter.get("rivven_produce_errors_total", topic=topic))
        return c

    def produce_batch(self, topic: str, values: Sequence[bytes | None],
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                      timestamps: Sequence[int | None] | int | None = None,
                      partition: int | None = None,
                      partitions: Sequence[int | None] | None = None,
                      compression: str | None = None) -> list[tuple[int, int]]:
        """Columnar produce: the fast path behind ``produce`` (no Record objects needed)."""
        self._writable()
        if not len(values):
            return []
        calls, errors = self._counts_of(topic)
        calls.inc()
        try:
            acks = self._producer.produce(ProduceRequest.of(
                topic, values, keys, headers, timestamps, partition, partitions, compression))
        except RivvenError:
            errors.inc()
            raise
        self._wal.maybe_checkpoint()
        return acks

    def produce_arrow(self, topic: str, table: Any, partition: int | None = None,
                      compression: str | None = None) -> list[tuple[int, int, int]]:
        """Append the rows of a pyarrow Table or RecordBatch: columns ``value`` (binary or
        string) and optionally ``key``, ``timestamp``, ``headers``, ``partition``, as
        engine.produce.arrow describes; keyed rows go where ``produce`` puts them.
        Returns ``(partition, base offset, records)`` per batch stored once durable: the
        rows of each partition, in table order, hold consecutive offsets."""
        self._writable()
        calls, errors = self._counts_of(topic)
        calls.inc()
        try:
            out = self._producer.produce_arrow(topic, table, partition, compression)
        except RivvenError:
            errors.inc()
            raise
        self._wal.maybe_checkpoint()
        return out
