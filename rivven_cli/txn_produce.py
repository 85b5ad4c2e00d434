"""``rivven produce --idempotent`` and ``--transactional-id``: the senders that store through a
producer of the engine instead of the engine itself (docs/TRANSACTIONS.md).

- Idempotent: ``Engine.producer(retries=...)``; a call that fails with a storage error (an
  fsync or a write that failed: stored or not?) is sent again by the producer (its retry
  policy) — the same batches with the same sequences, so the records are stored once.
- Transactional: ``Engine.producer(transactional_id=...)``; one transaction per input chunk, or
  per ``--txn-size`` records (a transaction then spans chunks, and a chunk may end several).
  A record counts once its transaction commits; ``--print-offsets`` prints offsets then. On a
  signal or a broken pipe the open transaction is aborted (or, when a second signal cut its
  commit short, the commit is finished: its decision may already be durable), so the stop
  report says exactly what was committed.
"""

from __future__ import annotations

from typing import Any

from engine.errors import ProducerFenced, RivvenError, plural
from engine.produce.transactional import COMMIT_FAILED

from . import interrupts
from .common import fail
from .render import human_bytes
from .sender import Sender


class IdempotentSender(Sender):
    """Stores through an idempotent producer whose policy sends a call that failed
    ambiguously again, up to ``retries`` times (at once: no backoff)."""

    def __init__(self, *args: Any, retries: int) -> None:
        super().__init__(*args)
        self.retries = retries

    def start(self, eng: Any) -> None:
        self.target = eng.producer(retries=self.retries, retry_backoff_ms=0)

    def summary(self) -> dict[str, Any]:
        return {"producer_id": self.target.producer_id, "retries": self.target.retried}

    def summary_text(self) -> str:
        n = self.target.retried
        again = f", {plural(n, 'call')} sent again" if n else ""
        return f" as idempotent producer {self.target.producer_id}{again}"


class TransactionalSender(Sender):
    """Stores in transactions of one transactional id; counts what is committed."""

    def __init__(self, *args: Any, transactional_id: str, txn_size: int | None,
                 timeout_ms: int | None) -> None:
        super().__init__(*args)
        self.tid, self.txn_size, self.timeout_ms = transactional_id, txn_size, timeout_ms
        self.transactions = 0  # committed
        self.aborted = 0  # records of the open transaction aborted when the command stopped
        self.unsettled: str | None = None  # why the open transaction could not be ended
        self._reset()

    def _reset(self) -> None:
        self.in_txn = False
        self.open_count = self.open_bytes = 0
        self.sending = 0  # records of a produce under way (cut short by a second signal)
        self.open_acks: list = []

    def start(self, eng: Any) -> None:
        kw = {} if self.timeout_ms is None else {"transaction_timeout_ms": self.timeout_ms}
        self.target = eng.producer(transactional_id=self.tid, **kw)

    # ---------------------------------------------------------------- storing
    def store(self, cols: dict[str, Any], complete: bool, guard: Any) -> None:
        n = len(cols["values"])
        i = 0
        while i < n:
            j = n if self.txn_size is None else min(n, i + self.txn_size - self.open_count)
            part = {k: v[i:j] if isinstance(v, list) else v for k, v in cols.items()}
            with guard.storing():
                try:
                    if not self.in_txn:
                        self.target.begin()
                        self.in_txn = True
                    self.sending = j - i
                    acks = self.target.produce_batch(self.topic, **part,
                                                     partition=self.partition,
                                                     compression=self.compression)
                except interrupts.Stopped:
                    raise
                except RivvenError as e:
                    self._failed(e, i)
                self.sending = 0
                self.open_count += j - i
                self.open_bytes += sum(len(v) for v in part["values"] if v is not None)
                self.open_acks += acks
                full = self.open_count >= self.txn_size if self.txn_size is not None \
                    else j == n and complete
                if full:
                    self._commit_or_fail()
            i = j

    def _failed(self, e: RivvenError, offset: int) -> None:
        """A produce of the open transaction failed: a record it refused goes back to
        ``send`` (which names the line, then ``failed_line``); anything else ends the
        transaction and the command."""
        self.sending = 0  # (what it acknowledged is counted: what it refused is not)
        idx = getattr(e, "index", None)
        if idx is not None:
            # (call_index: what its message counts from; index: the chunk's record)
            e.call_index = idx  # type: ignore[attr-defined]
            e.index = offset + idx  # type: ignore[attr-defined]
            raise e
        self._end_open()
        fail(f"{e}; {self._kept('before the error')}", getattr(e, "exit_code", 1))

    def _commit_or_fail(self) -> None:
        """(Storing.) Commit the open transaction and print its offsets; a failed commit
        ends the command (``_failed``: finished if it was decided, else aborted)."""
        try:
            acks = self._commit()
        except interrupts.Stopped:
            raise
        except RivvenError as e:
            self._failed(e, 0)
        self.printed(acks)

    def _commit(self) -> list:
        self.target.commit()
        acks = self.open_acks
        self.count += self.open_count
        self.nbytes += self.open_bytes
        self.transactions += 1
        self._reset()
        return acks

    def finish(self, guard: Any) -> None:
        if self.in_txn:  # (--txn-size: the last, shorter one)
            with guard.storing():
                self._commit_or_fail()

    def _end_open(self) -> None:
        """End the open transaction after a failure or a stop: abort it — unless its commit
        was under way (a second signal cut it short): then finish it, as its decision may be
        durable already."""
        if not self.in_txn:
            return
        tp, count = self.target, self.open_count + self.sending
        try:
            if tp.state == COMMIT_FAILED:
                acks = self._commit()
                try:
                    self.printed(acks)
                except OSError:
                    pass  # (the reader of stdout is gone)
                return
            tp.abort()
        except ProducerFenced:
            pass  # a newer producer of the id, or the timeout, aborted it
        except RivvenError as e:
            self.unsettled = str(e)
            self.aborted = count
            return
        self.aborted = count
        self._reset()

    def stop(self) -> None:
        self._end_open()

    # ---------------------------------------------------------------- reports
    def _kept(self, when: str = "before it stopped") -> str:
        """What was committed, and what became of the open transaction."""
        text = (f"{plural(self.count, 'record', thousands=True)} ({human_bytes(self.nbytes)}) "
                f"committed to {self.topic} in {plural(self.transactions, 'transaction')} of "
                f"{self.tid} {when}")
        if self.unsettled is not None:
            text += (f"; the open transaction ({plural(self.aborted, 'record')}) could not be "
                     f"ended ({self.unsettled}): 'rivven txn describe {self.tid}' shows it, "
                     f"'rivven txn abort {self.tid}' ends it")
        elif self.aborted:
            text += f"; the open transaction ({plural(self.aborted, 'record')}) was aborted"
        return text

    def stop_report(self) -> tuple[str, dict[str, Any]]:
        return self._kept(), self.summary() | {"aborted": self.aborted,
                                                "unsettled": self.unsettled}

    def failed_line(self, message: str, before: bool) -> None:
        self._end_open()
        fail(f"{message}; {self._kept('before it')}, none after")

    def summary(self) -> dict[str, Any]:
        return {"transactional_id": self.tid, "transactions": self.transactions}

    def summary_text(self) -> str:
        return f" in {plural(self.transactions, 'transaction')} of {self.tid}"
