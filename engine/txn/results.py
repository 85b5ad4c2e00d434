"""What ``Engine.txn`` returns: typed rows (dicts at run time: ``rivven txn ... --json``
prints them as they are, so a key here is a key of the JSON)."""

from __future__ import annotations

from typing import Any, TypedDict, final


@final  # (so that ``"error" in row`` tells it from a DamagedTransaction)
class TransactionRow(TypedDict):
    """A transactional id's state (engine.txn.coordinator.row)."""

    transactional_id: str
    producer_id: int
    epoch: int
    state: str  # Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort
    partitions: list[list[Any]]  # [[topic, partition], ...]
    offsets: dict[str, list[list[Any]]]  # {group: [[topic, partition, offset], ...]}
    fences: dict[str, str]  # {group: member id}
    timeout_ms: int
    started_ms: int  # 0: no transaction
    age_ms: int | None  # None: no transaction
    updated_ms: int
    prepared: bool  # held for a two-phase commit: never timed out


@final
class DamagedTransaction(TypedDict):
    """A transactional id whose state file is damaged (a row of ``list``)."""

    transactional_id: str
    state: str  # "Damaged"
    error: str


class RecoveredTransaction(TypedDict, total=False):
    transactional_id: str
    state: str | None  # before
    action: str  # committed, aborted, busy, failed
    error: str | None


class AfterCrash(TypedDict, total=False):
    """What a writable open finishes of the transactions a crash left (after the WAL replay)."""

    decisions: list[DecisionRecovered]  # two-phase commits finished (when there were any)
    transactions: list[RecoveredTransaction]  # prepared ones finished, timed-out ones aborted


class AbortedTransaction(TypedDict):
    transactional_id: str
    state: str  # before
    action: str | None  # aborted, committed; None: nothing was open


class PendingDecision(TypedDict):
    sequence: int | None
    transactions: list[list[Any]]  # [[transactional id, producer id, epoch], ...]


class DecisionState(TypedDict):
    key: str
    committed: int | None  # the last sequence committed under the key
    pending: PendingDecision | None  # a decision a crash left unfinished
    ended: list[str]  # jobs whose end is recorded (their writers can no longer prepare)
    aborts: dict[str, int]  # {micro-batch id: aborts recorded} (a writer that began before one
    #                         of them can no longer prepare)


class DecisionRecovered(TypedDict):
    key: str
    action: str  # committed, busy, failed
    error: str | None


class ProducerRow(TypedDict):
    """A producer id a partition's state knows (Kafka's describeProducers)."""

    topic: str
    partition: int
    producer_id: int
    epoch: int
    last_sequence: int | None
    last_offset: int | None
    last_timestamp: int | None
    last_seen_ms: int | None
    txn_start_offset: int | None


class HangingTransaction(TypedDict, total=False):
    topic: str
    partition: int
    producer_id: int
    epoch: int
    start_offset: int
    last_seen_ms: int | None
    transactional_id: str | None
    state: str | None
    timeout_ms: int | None
    age_ms: int | None
    reason: str  # unknown-producer, not-in-transaction, timed-out
    marker_offset: int  # abort_hanging: where its ABORT marker went
