"""``TransactionalProducer``: writes to several partitions and commits group offsets, all or
nothing (``eng.producer(transactional_id=...)``; docs/TRANSACTIONS.md).

It is the client side of engine.txn.coordinator: it knows its producer id and epoch, the
sequences of its batches per partition, which partitions are in its transaction and which
consumers fence its offsets; every durable decision is the coordinator's. Calls out of order
raise InvalidTxnState and change nothing:

    READY --begin--> IN_TXN --commit/abort--> READY
    IN_TXN --a produce or send_offsets that failed after it began writing--> ABORTABLE
    IN_TXN --commit failed--> COMMIT_FAILED (commit() again finishes it; abort() unless the
                              commit was already decided)
    any --ProducerFenced--> FENCED (for good: make a new producer)

Thread-safe: calls run one at a time (a transaction's batches reach each partition in the
order their sequences say).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConsumerFenced, InvalidArgument, InvalidTxnState, ProducerFenced
from ..format.records import ATTR_TRANSACTIONAL, SEQ_MASK, Record
from ..groups import membership
from ..groups.offset_store import check_commit
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog
from ..txn.coordinator import DEFAULT_TIMEOUT_MS, Coordinator
from ..txn.decisions import BatchSeen, Decisions, PreparedTransaction, check_job
from ..txn.fences import check_consumer
from ..txn.txn_store import TxnPartition
from .path import ProducePath
from .request import ProduceRequest

if TYPE_CHECKING:
    from ..groups.consumer import Consumer

READY, IN_TXN, ABORTABLE, COMMIT_FAILED, ABORT_FAILED, FENCED, CLOSED = (
    "ready", "in transaction", "abortable", "commit failed", "abort failed", "fenced", "closed")
PREPARED = "prepared"  # phase one of a two-phase commit done: the end is another's

TopicPartition = tuple[str, int]


class TransactionalProducer:
    """A producer with a transactional id: ``begin``, ``produce`` (any topics and
    partitions), ``send_offsets``, then ``commit`` or ``abort``. Creating it fences every
    older producer of the same id, in any process."""

    def __init__(self, coordinator: Coordinator, producer: ProducePath,
                 log_for: Callable[[TopicMeta, int], PartitionLog], transactional_id: str,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 after_produce: Callable[[], None] | None = None,
                 on_close: Callable[[TransactionalProducer], None] | None = None,
                 decisions: Decisions | None = None, decision_key: str | None = None) -> None:
        self.coordinator = coordinator
        self._decisions = decisions  # (with decision_key: prepare(job=...) checks the job)
        self.decision_key = decision_key
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = timeout_ms
        self._producer = producer
        self._log_for = log_for
        self._after_produce = after_produce
        self._on_close = on_close
        self._mutex = threading.RLock()
        self.producer_id, self.epoch = coordinator.init(transactional_id, timeout_ms)
        self.state = READY
        self._failure = ""
        # the partitions the last transaction wrote: the next one joins them ahead, with
        # its first partition (the state write a partition joining costs, once for all)
        self._ahead: list[TxnPartition] = []
        self._reset()

    def _reset(self) -> None:
        self._seq: dict[TopicPartition, int] = {}  # (its keys: the partitions written)
        # (keyed by topic id too: a topic created again under its name is another partition)
        self._joined: dict[tuple[str, int, str], TxnPartition] = {}
        self._fences: dict[str, tuple[Consumer, set[TopicPartition]]] = {}
        self._writing = False

    # ---------------------------------------------------------------- the calls
    def begin(self) -> None:
        """Start a transaction (nothing is written until the first produce or offsets)."""
        with self._mutex:
            self._expect(READY, "begin() a new transaction")
            self.state = IN_TXN

    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None,
                compression: str | None = None) -> list[tuple[int, int]]:
        """``eng.produce`` inside the transaction: ``(partition, offset)`` per record, durable
        when this returns, visible to read_committed readers once the transaction commits."""
        recs = records if isinstance(records, list) else list(records)
        with self._mutex:
            self._expect(IN_TXN, "produce")
            if not recs:
                return []
            return self._produce(ProduceRequest.of_records(topic, recs, partition,
                                                           compression))

    def produce_batch(self, topic: str, values: Sequence[bytes | None],
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                      timestamps: Sequence[int | None] | int | None = None,
                      partition: int | None = None,
                      partitions: Sequence[int | None] | None = None,
                      compression: str | None = None) -> list[tuple[int, int]]:
        """``eng.produce_batch`` (columnar) inside the transaction."""
        with self._mutex:
            self._expect(IN_TXN, "produce")
            if not len(values):
                return []
            return self._produce(ProduceRequest.of(topic, values, keys, headers, timestamps,
                                                   partition, partitions, compression))

    def produce_arrow(self, topic: str, table: Any, partition: int | None = None,
                      compression: str | None = None) -> list[tuple[int, int, int]]:
        """``eng.produce_arrow`` (a pyarrow Table, no Python step per row) inside the
        transaction: ``(partition, base offset, records)`` per batch."""
        with self._mutex:
            self._expect(IN_TXN, "produce")
            return self._write(lambda: self._producer.produce_arrow(
                topic, table, partition, compression, stamp=self))

    def send_offsets(self, group: str, offsets: dict[TopicPartition, int],
                     consumer: Consumer | None = None) -> None:
        """Commit ``offsets`` (``{(topic, partition): next offset to read}``) for ``group``
        with this transaction. With ``consumer`` (a member of ``group``), it must hold those
        partitions now and when the transaction commits (KIP-447), else ConsumerFenced."""
        with self._mutex:
            self._expect(IN_TXN, "send_offsets")
            membership.check_group_name(group, new=True)
            if not isinstance(offsets, dict):
                raise InvalidArgument("offsets must be a dict {(topic, partition): offset}")
            if not offsets:
                return
            check_commit(offsets, "", [])
            tps = set(offsets)
            if consumer is not None:
                try:
                    check_consumer(consumer, self.coordinator.data_dir, group, tps)
                except ConsumerFenced as e:  # what it read of them is another member's now
                    self.state, self._failure = ABORTABLE, str(e)
                    raise
            self._call(lambda: self.coordinator.send_offsets(
                self.transactional_id, self.producer_id, self.epoch, group,
                {tp: int(o) for tp, o in offsets.items()},
                consumer.member_id if consumer is not None else None), ABORTABLE)
            if consumer is not None:
                held = self._fences.get(group)
                if held is not None and held[0] is consumer:
                    held[1].update(tps)
                else:
                    self._fences[group] = (consumer, tps)

    def commit(self) -> None:
        """Commit: every record produced and every offset sent in this transaction becomes
        visible at once, durably when this returns. After a failure, ``commit()`` again
        finishes it (or ``abort()``, unless the commit was already decided)."""
        with self._mutex:
            retry = self.state == COMMIT_FAILED
            if not retry:
                self._expect(IN_TXN, "commit")
            self._end(True, retry)

    def abort(self) -> None:
        """Abort: nothing of this transaction becomes visible to read_committed readers, and
        its offsets are not committed."""
        with self._mutex:
            if self.state not in (IN_TXN, ABORTABLE, COMMIT_FAILED, ABORT_FAILED):
                self._expect(IN_TXN, "abort")
            self._end(False, self.state == ABORT_FAILED)

    def prepare(self, job: str | None = None, batch: BatchSeen | None = None
                ) -> PreparedTransaction:
        """Phase one of a two-phase commit: the transaction's records are all written and
        durable; it now waits, never timed out, for ``eng.complete_transaction(prepared,
        commit)`` in this or any process (a coordinator of several writers decides), or
        for an abort (``rivven txn abort``, a new producer of the id). This producer is done
        with it: closing it does not abort it. Consumer-fenced offsets cannot be prepared
        (their fence is checked at the commit, by the producer that holds the consumer).

        ``job`` (a producer made with ``decision_key``): the job the transaction is part of,
        whose end ``commit_prepared``/``abort_prepared`` record under the key. It prepares
        under the key's lock, and when the job has ended already the transaction is aborted
        instead and InvalidTxnState raised: nobody would ever decide it. ``batch`` (the
        same, for a micro-batch that runs again after a restart): what
        ``eng.txn.batch_seen(key, id)`` gave as the writer began; when an abort of the
        batch was recorded since (``abort_prepared(..., batch=id)``), the transaction is
        aborted instead and InvalidTxnState raised."""
        with self._mutex:
            self._expect(IN_TXN, "prepare")
            if self._fences:
                raise InvalidArgument("a transaction with consumer-fenced offsets cannot be "
                                      "prepared: send them without the consumer, or commit()")
            if job is None and batch is None:
                return self._hold()
            if job is not None:
                check_job(job)
            if batch is not None and not isinstance(batch, BatchSeen):
                raise InvalidArgument(f"prepare(batch=...) takes what eng.txn.batch_seen(key, "
                                      f"batch id) gave as the writer began, not {batch!r}")
            if self._decisions is None or self.decision_key is None:
                raise InvalidArgument(f"prepare({'job' if job is not None else 'batch'}=...) "
                                      "needs a producer made with decision_key=K: the end is "
                                      "recorded under K")
            with self._decisions.holding(self.decision_key) as d:
                assert d is not None  # (a waiting hold yields the key)
                why = None
                if job is not None and d.ended(job):
                    why = (f"job {job!r} of decision key {self.decision_key!r} ended before "
                           f"transactional id {self.transactional_id!r} prepared: its "
                           "transaction is aborted (a task that finished after its job)")
                elif batch is not None and d.aborted_since(batch):
                    why = (f"micro-batch {batch.batch} of decision key {self.decision_key!r} "
                           f"was aborted after transactional id {self.transactional_id!r} "
                           "began writing it: its transaction is aborted (a task that "
                           "finished after its micro-batch failed)")
                if why is not None:
                    try:
                        self._end(False, False)
                    except ProducerFenced:
                        pass  # aborted already (the end or the abort's fence did)
                    raise InvalidTxnState(why)
                return self._hold()

    def _hold(self) -> PreparedTransaction:
        self._call(lambda: self.coordinator.hold(self.transactional_id, self.producer_id,
                                                 self.epoch), ABORTABLE)
        self.state = PREPARED
        return PreparedTransaction(self.transactional_id, self.producer_id, self.epoch)

    def close(self) -> None:
        """Abort an open transaction (best effort: else it times out) and let go; a
        prepared one stays prepared."""
        with self._mutex:
            if self.state == CLOSED:
                return
            try:
                if self.state in (IN_TXN, ABORTABLE, ABORT_FAILED):
                    self.abort()
            finally:
                self.state = CLOSED
                if self._on_close is not None:
                    self._on_close(self)

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"TransactionalProducer({self.transactional_id!r}, producer_id="
                f"{self.producer_id}, epoch={self.epoch}, state={self.state!r})")

    # ---------------------------------------------------------------- the produce path
    def joining(self, meta: TopicMeta, partitions: list[int]) -> None:
        """(Stamp.) Partitions new to the transaction join it durably before any data; the
        first to join brings along those the last transaction wrote (most transactions of
        a producer write the same partitions: one state write for all of them)."""
        joined = self._joined
        new = [p for p in partitions if (meta.name, p, meta.id) not in joined]
        if not new:
            return
        parts = [TxnPartition(meta.name, p, meta.id, self._log_for(meta, p).end_offset())
                 for p in new]
        if not joined:
            keys = {(meta.name, p) for p in new}
            parts += [p for p in self._ahead if (p.topic, p.partition) not in keys]
        self.coordinator.add_partitions(self.transactional_id, self.producer_id, self.epoch,
                                        parts)
        joined.update(((p.topic, p.partition, p.topic_id), p) for p in parts)

    def fields(self, log: PartitionLog) -> dict[str, int]:
        """(Stamp.) Format-2 fields of the next batch to ``log``."""
        return {"producer_id": self.producer_id, "producer_epoch": self.epoch,
                "base_sequence": self._seq.get((log.topic, log.partition), 0),
                "flags": ATTR_TRANSACTIONAL}

    def appending(self, log: PartitionLog, count: int) -> None:
        """(Stamp.) The sequences of the next batch follow this one's."""
        self._writing = True
        tp = (log.topic, log.partition)
        self._seq[tp] = (self._seq.get(tp, 0) + count) & SEQ_MASK

    def _produce(self, req: ProduceRequest) -> list[tuple[int, int]]:
        req.stamp = self
        return self._write(lambda: self._producer.produce(req))

    def _write(self, fn: Callable[[], Any]) -> Any:
        """A produce of the transaction: once it began writing, a failure makes the
        transaction abortable (``appending`` says when it began)."""
        self._writing = False
        out = self._call(fn, lambda: ABORTABLE if self._writing else None)
        if self._after_produce is not None:
            self._after_produce()
        return out

    # ---------------------------------------------------------------- states
    def _end(self, commit: bool, retry: bool) -> None:
        fences = list(self._fences.items())

        def check(_: Any) -> None:  # under the id's lock, before the commit is decided
            for group, (consumer, tps) in fences:
                check_consumer(consumer, self.coordinator.data_dir, group, tps)

        failed = COMMIT_FAILED if commit else ABORT_FAILED
        written = set(self._seq)
        self.producer_id, self.epoch = self._call(lambda: self.coordinator.end(
            self.transactional_id, self.producer_id, self.epoch, commit,
            check if commit and fences else None, retry, written), failed)
        self.state = READY
        self._ahead = [p for p in self._joined.values() if (p.topic, p.partition) in written]
        self._reset()

    def _call(self, fn: Callable[[], Any], failed: Any) -> Any:
        """Run a call of the transaction; on an error the state becomes ``failed`` (a
        state, or a callable giving one, None: unchanged), FENCED on ProducerFenced,
        ABORTABLE on ConsumerFenced."""
        try:
            return fn()
        except InvalidTxnState:
            raise  # (refused before anything was done)
        except ConsumerFenced as e:
            self.state, self._failure = ABORTABLE, str(e)
            raise
        except ProducerFenced as e:
            self.state, self._failure = FENCED, str(e)
            raise
        except BaseException as e:
            new = failed() if callable(failed) else failed
            if new is not None:
                self.state, self._failure = new, f"{type(e).__name__}: {e}"
            raise

    def _expect(self, state: str, doing: str) -> None:
        if self.state == state:
            return
        if self.state == FENCED:
            raise ProducerFenced(f"this producer of transactional id {self.transactional_id!r} "
                                 f"was fenced ({self._failure}); create a new one")
        hint = {
            READY: "call begin() first",
            IN_TXN: "a transaction is open: commit() or abort() it first",
            ABORTABLE: f"a call of this transaction failed ({self._failure}): abort() it, "
                       "then begin() again",
            COMMIT_FAILED: f"its commit failed ({self._failure}): call commit() again to "
                           "finish it, or abort()",
            ABORT_FAILED: f"its abort failed ({self._failure}): call abort() again",
            CLOSED: "this producer is closed; create a new one",
            PREPARED: "its transaction is prepared: eng.complete_transaction() ends it; "
                      "create a new producer for the next",
        }[self.state]
        raise InvalidTxnState(f"cannot {doing} now: {hint}")
