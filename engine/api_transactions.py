"""``Engine``'s producers and transactions: a part of the façade (engine/engine.py), kept
apart so each file stays one subject. Each method checks what it must and delegates to
engine.produce (the producers) or engine.txn (the coordinator, the admin tools)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import clock
from .errors import InvalidArgument, ProducerFenced
from .fetch import positions
from .fs.locks import LockWait
from .produce import idempotent
from .produce.path import ProducePath
from .produce.transactional import PreparedTransaction, TransactionalProducer
from .storage.catalog import TopicMeta
from .storage.log import PartitionLog
from .txn import admin as txn_admin
from .txn import pids
from .txn.coordinator import DEFAULT_TIMEOUT_MS, Coordinator
from .txn.decisions import Decisions
from .wal.owner import WalOwner


class TransactionsApi:
    """Mixed into ``Engine``; what it uses of the engine is declared here."""

    path: str
    lock_wait: LockWait
    _txn: Coordinator
    _decisions: Decisions
    _producer: ProducePath
    _wal: WalOwner
    _txn_producers: set[TransactionalProducer]
    _writable: Callable[[], None]
    _log: Callable[..., PartitionLog]
    _logs: Callable[..., list[PartitionLog]]
    _partition: Callable[[str, int], PartitionLog]
    topic: Callable[..., TopicMeta]

    def producer(self, transactional_id: str | None = None, *,
                 transaction_timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 producer_id: int | None = None, epoch: int = 0,
                 sequences: Mapping[tuple[str, int], int] | None = None,
                 decision_key: str | None = None, retries: int = 0, retry_backoff_ms: int = 100
                 ) -> idempotent.IdempotentProducer | TransactionalProducer:
        """A producer. With ``transactional_id``: a TransactionalProducer (``begin``,
        ``produce``, ``send_offsets``, ``commit``/``abort``), fencing every older producer of
        that id in any process; a transaction open longer than ``transaction_timeout_ms`` is
        aborted (docs/TRANSACTIONS.md).

        Without: an idempotent producer, a new producer id (never shared by two producers of
        any processes), epoch 0. Its ``produce``/``produce_batch`` answer as this engine's,
        and a call that failed ambiguously is retried with ``retry_last()`` and stored once
        (engine.produce.idempotent). ``producer_id`` (and ``epoch``) take up an id used before,
        e.g. by a process that died before it saw its answer: each partition's producer state
        says which sequence comes next, or ``sequences`` ``{(topic, partition): next
        sequence}`` says it (to send the very batches again: their records are then stored
        once). ``retries``/``retry_backoff_ms``: its retry policy (engine.produce.idempotent).

        ``decision_key`` (a transactional producer whose prepared transactions are committed
        with ``commit_prepared`` under that key): the key's pending decision is finished
        first and the id taken up under its lock, so taking it up (which aborts the
        transaction it holds) never aborts one a decision is committing."""
        self._writable()
        if transactional_id is not None:
            if retries:
                raise InvalidArgument("retries apply to an idempotent producer (no transactional_id)")
            if producer_id is not None or sequences:
                raise InvalidArgument("a transactional producer takes its producer id from its "
                                      "transactional id: give one or the other")

            def make() -> TransactionalProducer:
                return TransactionalProducer(
                    self._txn, self._producer, self._log, transactional_id,
                    transaction_timeout_ms, self._wal.maybe_checkpoint,
                    self._txn_producers.discard)

            if decision_key is None:
                tp = make()
            else:
                with self._decisions.holding(decision_key):
                    tp = make()
            self._txn_producers.add(tp)
            return tp
        if producer_id is None:
            if sequences:
                raise InvalidArgument("sequences belong to a producer id: give producer_id too")
            producer_id = pids.allocate(self.path, self.lock_wait)
            resume = False
        else:
            resume = True
        return idempotent.IdempotentProducer(self._producer, producer_id, epoch, sequences, resume,
                                   after=self._wal.maybe_checkpoint, retries=retries,
                                   retry_backoff_ms=retry_backoff_ms)

    def complete_transaction(self, prepared: PreparedTransaction | Sequence[Any],
                             commit: bool = True) -> None:
        """Phase two of a two-phase commit: commit (or abort) a transaction its producer
        prepared (``TransactionalProducer.prepare``), in this process or any other; durable
        when this returns. Idempotent: completing it again the same way is a no-op. A
        commit raises ProducerFenced when the transaction is gone (aborted, or its id taken
        over by a newer producer, which aborts it); an abort of such a one is a no-op."""
        self._writable()
        tid, pid, epoch = PreparedTransaction(*prepared)
        if type(tid) is not str or type(pid) is not int or type(epoch) is not int:
            raise InvalidArgument(f"a prepared transaction is (transactional_id, producer_id, "
                                  f"epoch), not {tuple(prepared)!r}")
        try:
            self._txn.end(tid, pid, epoch, commit, retry=True)
        except ProducerFenced:
            if commit:
                raise
        finally:
            self._wal.maybe_checkpoint()

    def commit_prepared(self, key: str, prepared: Sequence[Any],
                        sequence: int | None = None) -> bool:
        """Commit several prepared transactions (``TransactionalProducer.prepare``, any
        processes) as one, under the decision ``key``: all of their records become visible,
        durably when this returns; a crash part way is finished by the next producer of the
        key, commit under it, or writable open (engine.txn.decisions). With ``sequence`` (a
        batch number): when it is not above the last committed under the key, this is a
        replay and the transactions are aborted instead; returns False then."""
        self._writable()
        try:
            with self._decisions.holding(key) as d:
                return d.commit(prepared, sequence)  # type: ignore[union-attr]
        finally:
            self._wal.maybe_checkpoint()

    def abort_prepared(self, key: str, prepared: Sequence[Any]) -> None:
        """Abort prepared transactions (a failed batch of writers), under the key's lock."""
        self._writable()
        with self._decisions.holding(key) as d:
            d.abort(prepared)  # type: ignore[union-attr]

    def decision(self, key: str) -> dict[str, Any]:
        """A decision key's state: ``key, committed`` (the last sequence committed, or
        None) and ``pending`` (None, or the decision a crash left unfinished)."""
        return self._decisions.read(self._decisions.check_key(key))

    def transactions(self, all: bool = False, recover: bool = False) -> list[dict[str, Any]]:
        """The transactional ids with an open or prepared transaction (``all``: every id):
        ``transactional_id, producer_id, epoch, state, partitions, offsets, fences,
        timeout_ms, started_ms, age_ms, updated_ms`` (engine.txn.coordinator.row). With
        ``recover``, prepared transactions are finished and timed-out ones aborted first."""
        if recover:
            self.recover_transactions()
        return self._txn.transactions(all)

    def transactional_ids(self) -> list[str]:
        """Every transactional id with a state, sorted: names alone, no state read."""
        return self._txn.store.ids()

    def describe_transaction(self, transactional_id: str) -> dict[str, Any]:
        """One transactional id's state (a row of ``transactions``)."""
        return self._txn.describe(transactional_id)

    def recover_transactions(self) -> list[dict[str, Any]]:
        """What a writable open does: finish prepared transactions, abort the timed-out
        ones (ids another process works on are left to it). One row per id acted on:
        ``transactional_id, action, state, error``."""
        self._writable()
        return self._txn.recover()

    def abort_transaction(self, transactional_id: str) -> dict[str, Any]:
        """Abort the id's open transaction now, timed out or not (its producer is fenced),
        or finish a prepared one as decided (``rivven txn abort``); waits for a process
        working on the id. Returns ``transactional_id, state`` (before) and ``action``
        (aborted, committed; None: nothing was open)."""
        self._writable()
        return self._txn.abort(transactional_id)

    def describe_producers(self, topic: str, partitions: Sequence[int] | None = None
                           ) -> list[dict[str, Any]]:
        """The producer state of ``topic``'s partitions (or of ``partitions``): one row per
        producer id a partition knows, ``topic, partition, producer_id, epoch,
        last_sequence, last_offset, last_timestamp, last_seen_ms, txn_start_offset`` (None:
        not known, no open transaction) — Kafka's ``describeProducers`` (``rivven txn
        producers``; engine.txn.admin)."""
        return txn_admin.producer_rows(self._logs(topic, partitions))

    def find_hanging_transactions(self, topic: str | None = None,
                                  partitions: Sequence[int] | None = None
                                  ) -> list[dict[str, Any]]:
        """Transactions open in a partition (of ``topic``, default every topic) that no
        transactional id's state has open there, or open longer than their id's timeout
        (KIP-664's ``find-hanging``; engine.txn.admin): ``topic, partition, producer_id,
        epoch, start_offset, last_seen_ms, transactional_id, state, timeout_ms, age_ms,
        reason`` (unknown-producer, not-in-transaction, timed-out)."""
        if partitions is not None and topic is None:
            raise InvalidArgument("partitions belong to a topic: give the topic too")
        return txn_admin.find_hanging(self._logs(topic, partitions),
                                      lambda: self._txn.transactions(True), clock.now_ms())

    def abort_hanging_transaction(self, topic: str, partition: int, start_offset: int
                                  ) -> dict[str, Any]:
        """Abort the hanging transaction that starts at ``start_offset`` in a partition and
        that no transactional id will end (``find_hanging_transactions`` reason
        unknown-producer or not-in-transaction): an ABORT marker, as Kafka's
        ``kafka-transactions.sh abort --start-offset``. Returns its hanging row with
        ``marker_offset``. A timed-out transaction is aborted through its id
        (``abort_transaction``)."""
        self._writable()
        positions.check_offset(start_offset)
        log = self._partition(topic, partition)
        if log.wal is None:
            self._wal.attach(log)
        return txn_admin.abort_hanging(log, start_offset, lambda: self._txn.transactions(True),
                                       clock.now_ms())
