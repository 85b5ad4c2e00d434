"""``Transactions`` (``Engine.txn``): the transactions of a data dir seen from outside their
producers — list, describe, recover, abort, two-phase completion under decision keys, and the
producer state of partitions with the transactions hanging in them (``rivven txn``).

The producers themselves (``Engine.producer``) are engine.produce's; this is what
administers and finishes their transactions, in this process or after another one died.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import clock
from ..errors import (
    InvalidArgument,
    InvalidProducerIdMapping,
    ProducerFenced,
    UnknownPartition,
)
from ..groups import membership
from ..groups.offset_store import check_commit
from ..storage.finder import LogFinder
from . import hanging
from .coordinator import Coordinator
from .decisions import BatchSeen, Decisions, check_prepared
from .results import (
    AbortedTransaction,
    AfterCrash,
    DamagedTransaction,
    DecisionState,
    HangingTransaction,
    ProducerRow,
    RecoveredTransaction,
    TransactionRow,
)
from .txn_store import TxnPartition, check_id


def _nothing() -> None:
    pass


class Transactions:
    """``coordinator`` keeps the transactional ids' states, ``decisions`` the two-phase
    commits under a key; partitions come from ``find``. ``writable()`` raises when the engine
    is read-only; ``after_write()`` runs after each write (the WAL's checkpoint check)."""

    def __init__(self, coordinator: Coordinator, decisions: Decisions, find: LogFinder,
                 writable: Callable[[], None] = _nothing,
                 after_write: Callable[[], None] = _nothing) -> None:
        self.coordinator = coordinator
        self.decisions = decisions
        self.find = find
        self.writable = writable
        self.after_write = after_write

    def allocate_producer_ids(self, count: int = 1) -> int:
        """Take ``count`` new producer ids for good (durable first); returns the first. What
        Kafka's InitProducerId hands an idempotent producer (``rivven serve`` takes a block
        at a time, as a Kafka broker does)."""
        from . import pids

        self.writable()
        return pids.allocate(self.coordinator.data_dir, self.coordinator.lock_wait, count)

    # ---------------------------------------------------------------- Kafka clients
    # What rivven serve's transaction APIs call (engine.kafka.api_txn): Kafka's coordinator
    # semantics with its classic epoch rule (docs/TRANSACTIONS.md, "Kafka's classic epochs").
    def init_producer(self, transactional_id: str, timeout_ms: int,
                      expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """Kafka's InitProducerId with a transactional id: ``(producer_id, epoch)`` of a new
        instance (its open transaction finished, every older instance fenced), which keeps
        its epoch across its transactions (Kafka's classic rule). ``expected``: the
        producer's own ``(producer_id, epoch)`` (v3+, a bump after an aborted transaction):
        else it is fenced (ProducerFenced, InvalidProducerIdMapping)."""
        self.writable()
        try:
            return self.coordinator.init(transactional_id, timeout_ms, classic=True,
                                         expected=expected)
        finally:
            self.after_write()

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Sequence[tuple[str, int]]) -> None:
        """Kafka's AddPartitionsToTxn: the partitions join the instance's transaction
        (starting one), durably, before its batches may be written there
        (UnknownTopic, UnknownPartition: nothing joins)."""
        self.writable()
        _known(transactional_id)
        parts = []
        for topic, partition in partitions:
            meta = self.find.topic(topic)
            if not 0 <= partition < meta.partitions:
                raise UnknownPartition(f"topic {topic!r} has no partition {partition} "
                                       f"(it has {meta.partitions})")
            parts.append(TxnPartition(topic, partition, meta.id,
                                      self.find.log(meta, partition).end_offset()))
        self.coordinator.add_partitions(transactional_id, producer_id, epoch, parts)

    def add_group(self, transactional_id: str, producer_id: int, epoch: int,
                  group: str) -> None:
        """Kafka's AddOffsetsToTxn: ``group``'s offsets may be committed with the
        transaction (starting one)."""
        self.writable()
        _known(transactional_id)
        membership.check_group_name(group, new=True)
        self.coordinator.add_group(transactional_id, producer_id, epoch, group)

    def commit_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                       group: str, offsets: dict[tuple[str, int], int],
                       member_id: str | None = None) -> None:
        """Kafka's TxnOffsetCommit: ``{(topic, partition): offset}`` of ``group`` (added
        with ``add_group`` first, else InvalidTxnState), committed if the transaction
        commits. The member's generation is the group coordinator's to check."""
        self.writable()
        _known(transactional_id)
        check_commit(offsets, "", [])
        self.coordinator.commit_offsets(transactional_id, producer_id, epoch, group,
                                        {tp: int(o) for tp, o in offsets.items()}, member_id)

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                        commit: bool) -> tuple[int, int]:
        """Kafka's EndTxn (before v5): commit or abort, durable when this returns; the same
        end retried is a no-op. Returns the ``(producer_id, epoch)`` to go on with."""
        self.writable()
        _known(transactional_id)
        try:
            return self.coordinator.end_classic(transactional_id, producer_id, epoch, commit)
        finally:
            self.after_write()

    @contextlib.contextmanager
    def writing(self, transactional_id: str, producer_id: int, epoch: int, topic: str,
                partition: int) -> Iterator[None]:
        """Around the append of a Kafka client's transactional batch: the partition is in
        the instance's ongoing transaction (else InvalidTxnState; ProducerFenced,
        InvalidProducerIdMapping), and no end of it can come before the append is done."""
        _known(transactional_id)
        meta = self.find.topic(topic)
        with self.coordinator.writing(transactional_id, producer_id, epoch, topic, partition,
                                      meta.id):
            yield

    def pending_offsets(self, group: str) -> dict[tuple[str, int], str]:
        """``{(topic, partition): transactional id}``: ``group``'s offsets an open
        transaction holds (Kafka's OffsetFetch answers UNSTABLE_OFFSET_COMMIT for them when
        asked for stable offsets, KIP-447)."""
        return self.coordinator.pending_offsets(group)

    # ---------------------------------------------------------------- the ids' states
    def list_transactions(self, all: bool = False, recover: bool = False
                          ) -> list[TransactionRow | DamagedTransaction]:
        """The transactional ids with an open or prepared transaction (``all``: every id):
        ``transactional_id, producer_id, epoch, state, partitions, offsets, fences,
        timeout_ms, started_ms, age_ms, updated_ms`` (a damaged state file: ``state``
        "Damaged" and ``error``). With ``recover``, prepared transactions are finished and
        timed-out ones aborted first."""
        if recover:
            self.recover()
        return self.coordinator.transactions(all)

    def ids(self) -> list[str]:
        """Every transactional id with a state, sorted: names alone, no state read."""
        return self.coordinator.store.ids()

    def describe(self, transactional_id: str) -> TransactionRow:
        """One transactional id's state (a row of ``list``)."""
        return self.coordinator.describe(transactional_id)

    def recover(self) -> list[RecoveredTransaction]:
        """What a writable open does: finish prepared transactions, abort the timed-out ones
        (ids another process works on are left to it). One row per id acted on:
        ``transactional_id, action, state, error``."""
        self.writable()
        return self.coordinator.recover()

    def after_crash(self) -> AfterCrash:
        """What a writable open runs after the WAL replay: the two-phase commits a crash cut
        short finished (``decisions``, when there were any), then ``transactions``: prepared
        ones finished, timed-out ones aborted (``recover``)."""
        out: AfterCrash = {}
        decided = self.decisions.recover()
        if decided:
            out["decisions"] = decided
        out["transactions"] = self.coordinator.recover()
        return out

    def abort(self, transactional_id: str) -> AbortedTransaction:
        """Abort the id's open transaction now, timed out or not (its producer is fenced), or
        finish a prepared one as decided (``rivven txn abort``); waits for a process working
        on the id. Returns ``transactional_id, state`` (before) and ``action`` (aborted,
        committed; None: nothing was open)."""
        self.writable()
        return self.coordinator.abort(transactional_id)

    # ---------------------------------------------------------------- two-phase commits
    def complete(self, prepared: Sequence[Any], commit: bool = True) -> None:
        """Phase two of a two-phase commit: commit (or abort) a transaction its producer
        prepared (``TransactionalProducer.prepare``: ``(transactional_id, producer_id,
        epoch)``), in this process or any other; durable when this returns. Idempotent:
        completing it again the same way is a no-op. A commit raises ProducerFenced when the
        transaction is gone (aborted, or its id taken over by a newer producer, which aborts
        it); an abort of such a one is a no-op."""
        self.writable()
        ((tid, pid, epoch),) = check_prepared([prepared])
        try:
            self.coordinator.end(tid, pid, epoch, commit, retry=True)
        except ProducerFenced:
            if commit:
                raise
        finally:
            self.after_write()

    def commit_prepared(self, key: str, prepared: Sequence[Any],
                        sequence: int | None = None, job: str | None = None) -> bool:
        """Commit several prepared transactions (any processes) as one, under the decision
        ``key``: all of their records become visible, durably when this returns; a crash
        part way is finished by the next producer of the key, commit under it, or writable
        open (engine.txn.decisions). With ``sequence`` (a batch number): when it is not
        above the last committed under the key, this is a replay and the transactions are
        aborted instead; returns False then. ``job`` (the writers' ``prepare(job=...)``):
        recorded ended with the decision, so a writer of the job that prepares afterwards
        (a straggling task attempt) aborts its transaction instead."""
        self.writable()
        try:
            with self.decisions.holding(key) as d:
                return d.commit(prepared, sequence, job)  # type: ignore[union-attr]
        finally:
            self.after_write()

    def abort_prepared(self, key: str, prepared: Sequence[Any], job: str | None = None,
                       batch: int | None = None) -> None:
        """Abort prepared transactions (a failed batch of writers), under the key's lock;
        ``job`` is recorded ended first, so a writer of it that prepares afterwards (a task
        that finishes after its job failed) aborts its transaction instead. ``batch`` (a
        micro-batch id, run again after a restart): this abort of it is counted first, so a
        writer of it that began before (``batch_seen``) and prepares afterwards aborts its
        transaction instead."""
        self.writable()
        with self.decisions.holding(key) as d:
            d.abort(prepared, job, batch)  # type: ignore[union-attr]

    def batch_seen(self, key: str, batch: int) -> BatchSeen:
        """(A writer of micro-batch ``batch`` under ``key``, as it begins.) The aborts of it
        recorded so far: ``prepare(batch=...)`` aborts instead when there are more by then."""
        return self.decisions.batch_seen(key, batch)

    def decision(self, key: str) -> DecisionState:
        """A decision key's state: ``key, committed`` (the last sequence committed, or None),
        ``pending`` (None, or the decision a crash left unfinished), ``ended`` (the jobs
        whose end is recorded, the last 64) and ``aborts`` (``{batch id: aborts recorded}``,
        the 64 highest batch ids aborted)."""
        return self.decisions.read(self.decisions.check_key(key))

    # ---------------------------------------------------------------- partitions
    def producers(self, topic: str, partitions: Sequence[int] | None = None
                  ) -> list[ProducerRow]:
        """The producer state of ``topic``'s partitions (or of ``partitions``): one row per
        producer id a partition knows, ``topic, partition, producer_id, epoch,
        last_sequence, last_offset, last_timestamp, last_seen_ms, txn_start_offset`` (None:
        not known, no open transaction) — Kafka's ``describeProducers`` (``rivven txn
        producers``)."""
        return hanging.producer_rows(self.find.logs(topic, partitions))

    def find_hanging(self, topic: str | None = None, partitions: Sequence[int] | None = None
                     ) -> list[HangingTransaction]:
        """Transactions open in a partition (of ``topic``, default every topic) that no
        transactional id's state has open there, or open longer than their id's timeout
        (KIP-664's ``find-hanging``; engine.txn.hanging): ``topic, partition, producer_id,
        epoch, start_offset, last_seen_ms, transactional_id, state, timeout_ms, age_ms,
        reason`` (unknown-producer, not-in-transaction, timed-out)."""
        if partitions is not None and topic is None:
            raise InvalidArgument("partitions belong to a topic: give the topic too")
        return hanging.find_hanging(self.find.logs(topic, partitions),
                                  lambda: self.coordinator.transactions(True), clock.now_ms())

    def abort_hanging(self, topic: str, partition: int, start_offset: int
                      ) -> HangingTransaction:
        """Abort the hanging transaction that starts at ``start_offset`` in a partition and
        that no transactional id will end (``find_hanging`` reason unknown-producer or
        not-in-transaction): an ABORT marker, as Kafka's ``kafka-transactions.sh abort
        --start-offset``. Returns its hanging row with ``marker_offset``. A timed-out
        transaction is aborted through its id (``abort``)."""
        self.writable()
        if not isinstance(start_offset, int) or start_offset < 0:
            raise InvalidArgument(f"offset must be a non-negative integer, not {start_offset!r}")
        return hanging.abort_hanging(self.find.writer(topic, partition), start_offset,
                                   lambda: self.coordinator.transactions(True), clock.now_ms())


def _known(transactional_id: str) -> None:
    """An id that cannot have a state (not a name rivven stores) has no producer id:
    InvalidProducerIdMapping, as for an id never initialised."""
    try:
        check_id(transactional_id)
    except InvalidArgument as e:
        raise InvalidProducerIdMapping(f"no transactional id {transactional_id!r} ({e})") \
            from None
