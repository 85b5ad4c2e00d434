"""``Producers``: makes the producers an engine hands out (``Engine.producer``) and closes
the transactional ones it made when the engine closes."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..errors import InvalidArgument, RivvenError
from ..fs.locks import LockWait
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog
from ..txn import pids
from ..txn.coordinator import DEFAULT_TIMEOUT_MS, Coordinator
from ..txn.decisions import Decisions
from .idempotent import IdempotentProducer
from .path import ProducePath
from .transactional import TransactionalProducer


def _nothing() -> None:
    pass


class Producers:
    """Producers over ``path`` (the produce path); transactional ones end their
    transactions through ``coordinator`` (and ``decisions``, for a ``decision_key``).
    ``after_write()`` runs after each call that wrote (the WAL's checkpoint check)."""

    def __init__(self, data_dir: str, coordinator: Coordinator, decisions: Decisions,
                 path: ProducePath, log_for: Callable[[TopicMeta, int], PartitionLog],
                 lock_wait: LockWait, after_write: Callable[[], None] = _nothing) -> None:
        self.data_dir = data_dir
        self.coordinator = coordinator
        self.decisions = decisions
        self.path = path
        self.log_for = log_for
        self.lock_wait = lock_wait
        self.after_write = after_write
        self.open: set[TransactionalProducer] = set()

    def make(self, transactional_id: str | None = None,
             transaction_timeout_ms: int = DEFAULT_TIMEOUT_MS, producer_id: int | None = None,
             epoch: int = 0, sequences: Mapping[tuple[str, int], int] | None = None,
             decision_key: str | None = None, retries: int = 0, retry_backoff_ms: int = 100
             ) -> IdempotentProducer | TransactionalProducer:
        """With ``transactional_id``: a TransactionalProducer (``begin``, ``produce``,
        ``send_offsets``, ``commit``/``abort``), fencing every older producer of that id in
        any process; a transaction open longer than ``transaction_timeout_ms`` is aborted
        (docs/TRANSACTIONS.md).

        Without: an idempotent producer, a new producer id (never shared by two producers of
        any processes), epoch 0. Its ``produce``/``produce_batch`` answer as the engine's,
        and a call that failed ambiguously is retried with ``retry_last()`` and stored once
        (engine.produce.idempotent). ``producer_id`` (and ``epoch``) take up an id used
        before, e.g. by a process that died before it saw its answer: each partition's
        producer state says which sequence comes next, or ``sequences`` ``{(topic,
        partition): next sequence}`` says it (to send the very batches again: their records
        are then stored once). ``retries``/``retry_backoff_ms``: its retry policy (Kafka's
        ``retries`` and ``retry.backoff.ms``: engine.produce.idempotent).

        ``decision_key`` (a transactional producer whose prepared transactions are committed
        with ``commit_prepared`` under that key): the key's pending decision is finished
        first and the id taken up under its lock, so taking it up (which aborts the
        transaction it holds) never aborts one a decision is committing."""
        if transactional_id is not None:
            if retries:
                raise InvalidArgument("retries apply to an idempotent producer (no "
                                      "transactional_id)")
            if producer_id is not None or sequences:
                raise InvalidArgument("a transactional producer takes its producer id from its "
                                      "transactional id: give one or the other")

            def make() -> TransactionalProducer:
                return TransactionalProducer(
                    self.coordinator, self.path, self.log_for, transactional_id,
                    transaction_timeout_ms, self.after_write, self.open.discard,
                    self.decisions if decision_key is not None else None, decision_key)

            if decision_key is None:
                tp = make()
            else:
                with self.decisions.holding(decision_key):
                    tp = make()
            self.open.add(tp)
            return tp
        if producer_id is None:
            if sequences:
                raise InvalidArgument("sequences belong to a producer id: give producer_id too")
            producer_id = pids.allocate(self.data_dir, self.lock_wait)
            resume = False
        else:
            resume = True
        return IdempotentProducer(self.path, producer_id, epoch, sequences, resume,
                                  after=self.after_write, retries=retries,
                                  retry_backoff_ms=retry_backoff_ms)

    def close_all(self) -> None:
        """Close every transactional producer still open: an open transaction is aborted
        rather than left to time out."""
        for tp in list(self.open):
            try:
                tp.close()
            except RivvenError:
                pass  # (it times out, or the next open's recovery aborts it)
