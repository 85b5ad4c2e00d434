"""``IdempotentProducer``: an idempotent producer (``Engine.producer()``).

It has a producer id of its own (engine.txn.pids: never shared by two producers of any
processes), epoch 0, and per partition the sequence of the next record. Its batches are
format 2: the partition's producer state (engine.txn.state) stores a batch once, however
often it is sent, and refuses one that does not follow the last (``OutOfOrderSequence``) or
comes from an older epoch (``ProducerFenced``). So a call that failed ambiguously — an fsync
error, an exception after the WAL write, a process killed before the answer came — is
retried with ``retry_last()`` (or, in a new process, by producing the same records with the
same producer id, epoch and sequences) and stored once.

A call's batches and their sequences are fixed before the first is sent; a failed call keeps
them: ``retry_last()`` sends those not yet acknowledged, in order, as they were (a duplicate
answers with its original offsets). Until that succeeds the producer takes no new call —
its sequences are spent, the next batch would not follow (use a new producer to give up on
them). Calls of one producer run one at a time (its sequences are one order per partition);
use several producers to write in parallel.

``retries`` makes that retry the producer's own policy (Kafka's producer settings
``retries`` and ``retry.backoff.ms``): a call that fails with a StorageError is sent again,
its unacknowledged batches as they were, up to ``retries`` times, ``retry_backoff_ms`` apart,
before the error is raised. The default, 0, raises at once and leaves ``retry_last()`` to
the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument, InvalidTxnState, StorageError, UnknownPartition, UnknownTopic
from ..failpoint import failpoint
from ..format.records import MAX_EPOCH, SEQ_MASK, EncodedBatch, Record
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog
from ..txn.hook import producers_of
from .path import ProducePath, encode, subset
from .request import ProduceRequest


class _Sent:
    """One batch of a call: where it goes, which records of the call it holds, its offset
    once stored."""

    __slots__ = ("meta", "partition", "batch", "indices", "base", "tried")

    def __init__(self, meta: TopicMeta, partition: int, batch: EncodedBatch,
                 indices: Sequence[int]) -> None:
        self.meta = meta
        self.partition = partition
        self.batch = batch
        self.indices = indices
        self.base: int | None = None
        self.tried = False


class _Call:
    def __init__(self, sent: list[_Sent], count: int, seqs: dict[tuple[str, int], int]) -> None:
        self.sent = sent
        self.count = count
        self.seqs_before = seqs  # each partition's next sequence before the call

    def pending(self) -> bool:
        return any(s.base is None for s in self.sent)

    def acks(self) -> list[tuple[int, int]]:
        sent = self.sent
        if len(sent) == 1 and sent[0].indices == range(self.count):
            s = sent[0]
            assert s.base is not None  # (acknowledged)
            return list(zip([s.partition] * self.count, range(s.base, s.base + self.count)))
        acks: list[Any] = [None] * self.count
        for s in sent:
            for k, i in enumerate(s.indices):
                acks[i] = (s.partition, s.base + k)  # type: ignore[operator]
        return acks


class IdempotentProducer:
    """An idempotent producer: ``produce``/``produce_batch`` as ``Engine``'s, stored once
    however often a call is retried (``retry_last``, or the ``retries`` policy).
    Thread-safe; calls run one at a time. ``retried``: calls the policy sent again."""

    def __init__(self, path: ProducePath, producer_id: int, epoch: int = 0,
                 sequences: Mapping[tuple[str, int], int] | None = None, resume: bool = False,
                 after: Callable[[], None] | None = None, retries: int = 0,
                 retry_backoff_ms: int = 100) -> None:
        if not isinstance(producer_id, int) or producer_id < 0:
            raise InvalidArgument(f"producer_id must be an integer >= 0, not {producer_id!r}")
        if not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
            raise InvalidArgument(f"epoch must be an integer in 0..{MAX_EPOCH}, not {epoch!r}")
        for name, n in (("retries", retries), ("retry_backoff_ms", retry_backoff_ms)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise InvalidArgument(f"{name} must be an integer >= 0, not {n!r}")
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.retried = 0
        self._path = path
        self.producer_id = producer_id
        self.epoch = epoch
        self._seq: dict[tuple[str, int], int] = {}
        for (topic, partition), seq in (sequences or {}).items():
            if not isinstance(seq, int) or not 0 <= seq <= SEQ_MASK:
                raise InvalidArgument(f"sequence of {topic}-{partition} must be an integer in "
                                      f"0..{SEQ_MASK}, not {seq!r}")
            self._seq[(topic, partition)] = seq
        self._resume = resume  # an id used before: a partition's state says where it stands
        self._after = after
        self._last: _Call | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"IdempotentProducer(producer_id={self.producer_id}, epoch={self.epoch})"

    # ---------------------------------------------------------------- the API
    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None,
                compression: str | None = None) -> list[tuple[int, int]]:
        """Append records as ``Engine.produce`` does; one ``(partition, offset)`` per record
        once durable."""
        recs = records if isinstance(records, list) else list(records)
        if not recs:
            return []
        return self._call(ProduceRequest.of_records(topic, recs, partition, compression))

    def produce_batch(self, topic: str, values: Sequence[bytes | None],
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                      timestamps: Sequence[int | None] | int | None = None,
                      partition: int | None = None,
                      partitions: Sequence[int | None] | None = None,
                      compression: str | None = None) -> list[tuple[int, int]]:
        """Columnar produce, as ``Engine.produce_batch``."""
        if not len(values):
            return []
        return self._call(ProduceRequest.of(topic, values, keys, headers, timestamps,
                                            partition, partitions, compression))

    def retry_last(self) -> list[tuple[int, int]]:
        """Send the last call's batches not yet acknowledged again, as they were (same
        sequences); return the call's acknowledgements. A batch stored before is not stored
        again: its original offsets come back."""
        with self._lock:
            call = self._last
            if call is None:
                raise InvalidArgument("nothing to retry: this producer has made no call yet")
            acks = self._send(call)
        if self._after is not None:
            self._after()
        return acks

    def next_sequence(self, topic: str, partition: int) -> int | None:
        """The sequence of the next record to ``topic``-``partition`` (None: not known yet,
        found when it is first written to)."""
        return self._seq.get((topic, partition))

    # ---------------------------------------------------------------- calls
    def _call(self, req: ProduceRequest) -> list[tuple[int, int]]:
        with self._lock:
            last = self._last
            if last is not None and last.pending():
                raise InvalidTxnState(
                    f"the last call of producer {self.producer_id} failed and was not retried: "
                    "call retry_last() until it succeeds, or use a new producer to give its "
                    "records up (their sequences are spent)")
            meta, cached = self._path.topic_meta(req.topic)
            call = self._last = self._plan(meta, req)
            try:
                acks = self._send_retrying(call)
            except (UnknownTopic, UnknownPartition):
                if not cached or any(s.base is not None for s in call.sent):
                    raise
                # the cached catalog entry was stale (the topic recreated, partitions added)
                # and nothing was logged: plan again on fresh metadata
                self._seq.update(call.seqs_before)
                fresh = self._path.topic_meta(req.topic, fresh=True)[0]
                if fresh is meta:
                    raise
                call = self._last = self._plan(fresh, req)
                acks = self._send_retrying(call)
        if self._after is not None:
            self._after()
        return acks

    def _send_retrying(self, call: _Call) -> list[tuple[int, int]]:
        """``_send``, and again after a StorageError (an fsync or a write that failed: stored
        or not?) up to ``retries`` times: what was stored is not stored twice."""
        for again in range(self.retries + 1):
            if again:
                self.retried += 1
                time.sleep(self.retry_backoff_ms / 1000)
            try:
                return self._send(call)
            except StorageError as e:
                if again < self.retries:
                    continue
                if not again:
                    raise
                raise StorageError(
                    f"{e} (the call was sent {again + 1} times, as idempotent producer "
                    f"{self.producer_id}: its records may be stored in part; those of the "
                    "calls before it are)") from e
        raise AssertionError("unreachable")  # (the last try returns or raises)

    def _plan(self, meta: TopicMeta, req: ProduceRequest) -> _Call:
        """The call's batches, sequenced; nothing is spent when the request is refused."""
        path = self._path
        codec, cfg, groups = path.plan(meta, req)
        sent: list[_Sent] = []
        before: dict[tuple[str, int], int] = {}
        after: dict[tuple[str, int], int] = {}
        fields = (self.producer_id, self.epoch)
        for p, idx in groups.items():
            log = path.log_for(meta, p)
            if idx is None:
                keys, values, headers, ts = req.keys, req.values, req.headers, req.timestamps
            else:
                keys, values, headers, ts = subset(req, idx)
            key = (meta.name, p)
            seq = before[key] = self._next(key, log)
            for a, enc in encode(meta.name, keys, values, headers, ts, codec, cfg,
                                 (*fields, seq)):
                n = enc.count
                sent.append(_Sent(meta, p, enc, range(a, a + n) if idx is None
                                  else idx[a:a + n]))
            after[key] = (seq + len(values)) & SEQ_MASK
        self._seq.update(after)
        return _Call(sent, len(req.values), before)

    def _next(self, key: tuple[str, int], log: PartitionLog) -> int:
        seq = self._seq.get(key)
        if seq is not None:
            return seq
        if self._resume:  # where this id stands in the partition (a new epoch: at 0)
            hook = producers_of(log)
            last = hook.last_sequence(self.producer_id, self.epoch) if hook else None
            if last is not None:
                return (last + 1) & SEQ_MASK
        return 0

    def _send(self, call: _Call) -> list[tuple[int, int]]:
        path = self._path
        for s in call.sent:
            if s.base is not None:
                continue
            log = path.log_for(s.meta, s.partition)
            # a retry sends a copy: the first buffer may be held by a failed append or the
            # hot cache, and appending assigns offsets into it
            batch = s.batch.copy() if s.tried else s.batch
            s.tried = True
            s.base = path.append_encoded(log, batch)
            failpoint("producer.after_append")  # (crash tests: stored, not yet acknowledged)
        return call.acks()
