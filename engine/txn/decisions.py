"""Several prepared transactions committed as one: the coordinator side of a two-phase commit.

A writer of many transactions — the Spark sink, one per task — prepares each
(``TransactionalProducer.prepare``); the coordinator then commits them together under a
*decision key*. It first writes the decision to the key's file (which transactions, under
which sequence number), fdatasynced, and only then completes each transaction. A crash part
way leaves the decision on disk, and whoever next takes the key — a producer of the key, the
coordinator, a writable ``Engine.open`` — completes it before anything else: all of the
transactions become visible, never some.

With a sequence number (the Spark sink's micro-batch id), a commit not above the last one
committed under the key is a replay: its transactions are aborted instead, so a batch that
runs again after a crash becomes visible once.

A producer of the key takes up its transactional id under the key's lock, after finishing a
pending decision (``Engine.producer(..., decision_key=K)``): taking up an id aborts the
transaction it holds, and under the lock that can never be one a decision is committing.

A job (the Spark sink's ``save()``: its tasks prepare, its driver commits or aborts) names
itself: a commit or abort with ``job=J`` records J as ended under the key *before* it
completes anything, and a writer that prepares for J (``TransactionalProducer.prepare(job=J)``)
does so under the key's lock, aborting its transaction instead when J has ended. So a task
that finishes after its job failed (Spark does not wait for the other tasks of a failed job)
can never leave a prepared transaction nobody will decide: either it prepared before the end
was recorded (and the job's end, which looks afterwards, settles it) or it aborts itself.

A streaming query's micro-batch cannot be recorded ended so: a restarted query runs the
same batch id again. An abort with ``batch=B`` counts itself under the key (``aborts``,
durably, before it aborts anything), and a writer of B reads that count when it begins
(``Decisions.batch_seen``: a ``BatchSeen``) and prepares with it
(``TransactionalProducer.prepare(batch=...)``) under the key's lock, aborting its
transaction instead when the count has grown: B was aborted after the writer began. A
writer of B's run after a restart begins after the abort, sees the count with it, and
prepares. (No clock, no run id: the order of the count's reads and writes is enough.)

File ``txn/decisions/<encoded key>.json`` (sealed JSON, written atomically):
``{"key": K, "committed": N or null, "pending": null or {"sequence": N or null,
"transactions": [[transactional id, producer id, epoch], ...]}, "ended": [job, ...], "aborts":
{"<batch>": count, ...}}`` (the last MAX_ENDED jobs ended, the MAX_ABORTS highest batch ids
aborted; a file written before jobs or aborts were recorded has no ``ended`` or ``aborts``);
lock: the same name with ``.lock``.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, cast

from ..errors import DamagedMetadata, InvalidArgument, ProducerFenced, RivvenError, plural
from ..failpoint import failpoint
from ..fs import durable, guard, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, acquire, open_lock_file, try_lock
from .coordinator import Coordinator
from .results import DecisionRecovered, DecisionState
from .txn_store import TXN_DIR, check_id

DIR = "decisions"
WHAT = "transaction decision"
FIX = ("restore it from a backup, or end its transactions by hand: rivven txn list shows "
       "them prepared, rivven txn abort ends one")
MAX_KEY_BYTES = 180
MAX_ENDED = 64  # jobs ended kept per key (a job's late tasks come before many more jobs end)
MAX_JOB_CHARS = 100
MAX_ABORTS = 64  # micro-batch ids whose aborts are counted, per key (the highest kept)
Prepared = tuple[str, int, int]


class PreparedTransaction(NamedTuple):
    """A transaction its producer wrote and prepared (``TransactionalProducer.prepare``):
    what ``Engine.complete_transaction`` needs, in any process (picklable, JSON-able)."""

    transactional_id: str
    producer_id: int
    epoch: int


class BatchSeen(NamedTuple):
    """A writer of micro-batch ``batch`` that began when ``aborts`` aborts of it were
    recorded under its key (``Decisions.batch_seen``; ``prepare(batch=...)`` checks it)."""

    batch: int
    aborts: int


def check_batch(batch: Any) -> int:
    """A micro-batch id (``abort_prepared``/``batch_seen``'s ``batch``), checked."""
    if type(batch) is not int or not 0 <= batch <= jsondoc.MAX_INT:
        raise InvalidArgument(f"a batch id is an integer 0 to {jsondoc.MAX_INT}, not {batch!r}")
    return batch


def check_job(job: Any) -> str:
    """A job's name (``commit_prepared``/``abort_prepared``/``prepare``'s ``job``), checked."""
    if type(job) is not str or not job or len(job) > MAX_JOB_CHARS or not job.isprintable():
        raise InvalidArgument(f"a job is a printable string of 1 to {MAX_JOB_CHARS} "
                              f"characters, not {job!r}")
    return job


def check_prepared(items: Sequence[Any]) -> list[Prepared]:
    """Each item as ``(transactional_id, producer_id, epoch)``, checked (InvalidArgument)."""
    out = []
    for p in items:
        t = tuple(p)
        if len(t) != 3 or type(t[0]) is not str or type(t[1]) is not int or type(t[2]) is not int:
            raise InvalidArgument(f"a prepared transaction is (transactional_id, producer_id, "
                                  f"epoch), not {t!r}")
        check_id(t[0])
        out.append((t[0], t[1], t[2]))
    return out


class Decision:
    """One key, its lock held (``Decisions.holding``)."""

    def __init__(self, owner: Decisions, key: str, doc: DecisionState) -> None:
        self.owner, self.key, self.doc = owner, key, doc

    @property
    def committed(self) -> int | None:
        """The sequence number of the last commit under the key (None: none had one)."""
        return self.doc["committed"]

    def ended(self, job: str) -> bool:
        """Whether ``job``'s end (a commit or an abort) is recorded under the key."""
        return check_job(job) in self.doc["ended"]

    def abort_count(self, batch: int) -> int:
        """How many aborts of micro-batch ``batch`` are recorded under the key."""
        return self.doc["aborts"].get(str(check_batch(batch)), 0)

    def aborted_since(self, seen: BatchSeen) -> bool:
        """Whether ``seen.batch`` was aborted after its writer began (``Decisions.batch_seen``)."""
        return self.abort_count(seen.batch) > seen.aborts

    def _count_abort(self, batch: int | None) -> bool:
        """Count an abort of ``batch`` (in the document; written by the caller), keeping the
        MAX_ABORTS highest batch ids; False: no batch."""
        if batch is None:
            return False
        counts = dict(self.doc["aborts"])
        counts[str(batch)] = min(self.abort_count(batch) + 1, jsondoc.MAX_INT)
        kept = sorted(counts, key=int)[-MAX_ABORTS:]
        self.doc["aborts"] = {b: counts[b] for b in kept}
        return True

    def _end(self, job: str | None) -> bool:
        """Record ``job`` ended (in the document; written by the caller); False: no change."""
        if job is None or self.ended(job):
            return False
        self.doc["ended"] = [*self.doc["ended"], job][-MAX_ENDED:]
        return True

    def commit(self, prepared: Sequence[Any], sequence: int | None = None,
               job: str | None = None) -> bool:
        """Commit ``prepared`` as one, durably when this returns; False (and every one of
        them aborted) when ``sequence`` is not above the last committed under the key.
        ``job``: recorded ended with the decision (a writer of it can no longer prepare)."""
        txns = check_prepared(prepared)
        if sequence is not None:
            if type(sequence) is not int or sequence < 0:
                raise InvalidArgument(f"sequence must be a non-negative integer, not "
                                      f"{sequence!r}")
            if self.committed is not None and sequence <= self.committed:
                self.abort(txns, job)
                return False
        self._end(job)
        self.doc["pending"] = {"sequence": sequence, "transactions": [list(t) for t in txns]}
        self.owner.write(self.key, self.doc)  # the decision: from here on it commits
        failpoint("decision.after_decide")
        self.owner.finish(self.key, self.doc)
        return True

    def abort(self, prepared: Sequence[Any], job: str | None = None,
              batch: int | None = None) -> None:
        """Abort ``prepared`` (one already gone is skipped); ``job`` is recorded ended and an
        abort of micro-batch ``batch`` counted first (durably), so a writer of either that
        prepares later aborts itself."""
        txns = check_prepared(prepared)
        if batch is not None:
            check_batch(batch)
        ended = self._end(job)
        if self._count_abort(batch) or ended:
            self.owner.write(self.key, self.doc)
            failpoint("decision.after_job_ended")
        for tid, pid, epoch in txns:
            try:
                self.owner.coordinator.end(tid, pid, epoch, False, retry=True)
            except ProducerFenced:
                pass  # aborted already, or its id taken over (which aborted it)


class DecisionFiles:
    """The decision keys of one data dir, read (no lock, no Engine: a Spark task reads its
    micro-batch's aborts first thing, before it opens one)."""

    def __init__(self, data_dir: str) -> None:
        self.dir = os.path.join(data_dir, TXN_DIR, DIR)

    def path(self, key: str) -> str:
        return os.path.join(self.dir, urllib.parse.quote(key, safe="") + ".json")

    @staticmethod
    def check_key(key: Any) -> str:
        if type(key) is not str or not key or len(urllib.parse.quote(key, safe="")) > \
                MAX_KEY_BYTES or not key.isprintable():
            raise InvalidArgument(f"a decision key is a printable string of at most "
                                  f"{plural(MAX_KEY_BYTES, 'byte')} once encoded, not {key!r}")
        return key

    def read(self, key: str) -> DecisionState:
        path = self.path(key)
        raw = jsondoc.read(path, WHAT, limit=64 << 20, fix=FIX)
        if raw is None:
            return {"key": key, "committed": None, "pending": None, "ended": [], "aborts": {}}
        doc = jsondoc.unseal(raw, path, WHAT, FIX)
        doc.setdefault("ended", [])  # (a file written before jobs were recorded)
        doc.setdefault("aborts", {})  # (... or before aborts of micro-batches were)
        self._check(doc, key, path)
        return cast(DecisionState, doc)  # (its shape checked just now)

    def batch_seen(self, key: str, batch: int) -> BatchSeen:
        """(A writer of micro-batch ``batch`` as it begins, before it reads its input.) The
        aborts of it recorded under ``key`` so far, for ``prepare(batch=...)``. Read without
        the lock: the file is replaced whole, and an abort after this read is one the
        prepare sees."""
        check_batch(batch)
        return BatchSeen(batch, self.read(self.check_key(key))["aborts"].get(str(batch), 0))

    @staticmethod
    def _check(doc: Any, key: str, path: str) -> None:
        def bad(reason: str) -> DamagedMetadata:
            return jsondoc.damaged(path, WHAT, reason, FIX)

        if set(doc) != {"key", "committed", "pending", "ended", "aborts"} or doc["key"] != key:
            raise bad(f"keys {sorted(doc)} / key {jsondoc.shown(doc.get('key'))}, expected "
                      f"key, committed, pending, ended, aborts of {key!r}")
        a = doc["aborts"]
        if type(a) is not dict or len(a) > MAX_ABORTS:
            raise bad(f"aborts is not a map of at most {MAX_ABORTS} batch ids")
        for b, n in a.items():
            if not (len(b) <= 19 and b.isascii() and b.isdigit() and str(int(b)) == b
                    and int(b) <= jsondoc.MAX_INT):
                raise bad(f"aborts: batch id {jsondoc.shown(b)} is not a decimal integer "
                          f"0 to {jsondoc.MAX_INT}")
            if type(n) is not int or not 1 <= n <= jsondoc.MAX_INT:
                raise bad(f"aborts: batch {b}'s count is {jsondoc.shown(n)}")
        e = doc["ended"]
        if type(e) is not list or len(e) > MAX_ENDED:
            raise bad(f"ended is not a list of at most {MAX_ENDED} jobs")
        for job in e:
            try:
                check_job(job)
            except InvalidArgument as err:
                raise bad(f"ended: {err}") from None
        c = doc["committed"]
        if c is not None and (type(c) is not int or not 0 <= c <= jsondoc.MAX_INT):
            raise bad(f"committed is {jsondoc.shown(c)}")
        p = doc["pending"]
        if p is None:
            return
        if type(p) is not dict or set(p) != {"sequence", "transactions"}:
            raise bad(f"pending is {jsondoc.shown(p)}")
        s = p["sequence"]
        if s is not None and (type(s) is not int or not 0 <= s <= jsondoc.MAX_INT):
            raise bad(f"pending sequence is {jsondoc.shown(s)}")
        t = p["transactions"]
        if type(t) is not list or len(t) > 1_000_000:
            raise bad("pending transactions is not a list")
        try:
            check_prepared(t)
        except InvalidArgument as e:
            raise bad(str(e)) from None


class Decisions(DecisionFiles):
    """The decision keys of one data dir, read and written."""

    def __init__(self, data_dir: str, coordinator: Coordinator,
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        super().__init__(data_dir)
        self.coordinator = coordinator
        self.lock_wait = lock_wait

    @contextlib.contextmanager
    def holding(self, key: str, wait: bool = True) -> Iterator[Decision | None]:
        """The key, its lock held for the block and its pending decision finished first
        (None, nothing done, with ``wait=False`` when another holds it)."""
        self.check_key(key)
        for d in (os.path.dirname(self.dir), self.dir):
            if guard.make_dir(d):
                durable.fsync_dir(os.path.dirname(d))
        lock = self.path(key)[:-len(".json")] + ".lock"
        fd = open_lock_file(lock)
        try:
            if wait:
                acquire(fd, lock, self.lock_wait)
            elif not try_lock(fd):
                yield None
                return
            doc = self.read(key)
            if doc["pending"] is not None:
                self.finish(key, doc)
            yield Decision(self, key, doc)
        finally:
            os.close(fd)

    def write(self, key: str, doc: DecisionState) -> None:
        durable.write_atomic(self.path(key), jsondoc.seal(doc))

    def finish(self, key: str, doc: DecisionState) -> None:
        """(Lock held.) Complete every transaction of the pending decision (each idempotent),
        then record it committed."""
        pending = doc["pending"]
        assert pending is not None  # (the callers finish a decision that is pending)
        for tid, pid, epoch in pending["transactions"]:
            try:
                self.coordinator.end(tid, pid, epoch, True, retry=True)
            except ProducerFenced as e:
                raise RivvenError(
                    f"decision {key!r}: transaction {tid!r} (producer id {pid}, epoch {epoch}) "
                    f"was to commit but is gone ({e}); something aborted a prepared "
                    "transaction of a decision (rivven txn abort?): its records are lost, the "
                    "others of the decision committed") from None
            failpoint("decision.after_complete_one")
        if pending["sequence"] is not None:
            doc["committed"] = pending["sequence"]
        doc["pending"] = None
        self.write(key, doc)

    def recover(self) -> list[DecisionRecovered]:
        """Finish every pending decision no other process is working on: one row per key
        acted on (``key, action`` committed, busy or failed, ``error``)."""
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(".json"))
        except FileNotFoundError:
            return []
        rows: list[DecisionRecovered] = []
        for n in names:
            key = urllib.parse.unquote(n[:-len(".json")])
            try:
                if self.read(key)["pending"] is None:
                    continue  # (a look without the lock: most keys are settled)
                with self.holding(key, wait=False) as got:
                    rows.append({"key": key, "action": "committed" if got else "busy",
                                 "error": None})
            except (RivvenError, OSError) as e:
                rows.append({"key": key, "action": "failed", "error": str(e)})
        return rows
