"""The transaction coordinator: transactional ids, fencing, epochs, markers, timeouts, recovery.

Every change of a transactional id's state happens under its lock (engine.txn.txn_store),
re-reading the state first, so any number of processes may use, recover and list the same
ids. A partition joins a transaction durably before its data is written there, and a
transaction is PrepareCommit or PrepareAbort before its first marker (durably so when it
commits group offsets; otherwise its first durable marker decides it as well: ``_decided``).
Whoever next holds the lock finishes a prepared transaction the way it was decided, and an
Ongoing one whose markers say how it ended that way (docs/TRANSACTIONS.md, "What a
transaction costs").

Epochs (KIP-890): a producer writes a transaction's data with epoch e; the transaction ends
with markers of epoch e + 1, and the producer goes on with e + 1 (sequences from 0), so a
late write or marker of transaction k can never apply to transaction k + 1. A data epoch is
at most MAX_EPOCH - 1 (its markers need one more): past that the id takes a new producer id
with epoch 0. ``init`` bumps the epoch too, fencing every older instance of the id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .. import clock
from ..counters.meter import Meter
from ..errors import (
    DamagedMetadata,
    InvalidArgument,
    InvalidProducerIdMapping,
    InvalidTxnState,
    ProducerFenced,
    RivvenError,
)
from ..failpoint import failpoint
from ..format.control import COMMIT
from ..format.records import MAX_EPOCH
from ..fs.locks import DEFAULT_WAIT, LockWait
from ..groups import membership
from ..groups.offset_store import OffsetStore
from ..storage.log import PartitionLog
from . import markers, pids
from .results import (
    AbortedTransaction,
    DamagedTransaction,
    RecoveredTransaction,
    TransactionRow,
)
from .txn_store import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    MAX_TIMEOUT_MS,
    ONGOING,
    OPEN,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARED,
    TxnPartition,
    TxnState,
    TxnStore,
    check_id,
)

DEFAULT_TIMEOUT_MS = 60000  # transaction.timeout.ms, Kafka's producer default

# the writable log of a partition of a transaction (WAL attached), or None when its topic is
# gone (deleted, or created again under its name: another topic id)
LogFor = Callable[[TxnPartition], "PartitionLog | None"]
Check = Callable[[TxnState], None]


def check_timeout(timeout_ms: Any) -> int:
    if type(timeout_ms) is not int or not 1 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise InvalidArgument(f"transaction.timeout.ms must be an integer from 1 to "
                              f"{MAX_TIMEOUT_MS}, not {timeout_ms!r}")
    return timeout_ms


class Coordinator:
    """The transactional ids of one data dir (thread-safe: every call takes the id's lock)."""

    def __init__(self, data_dir: str, log_for: LogFor, sync_offsets: bool = True,
                 lock_wait: LockWait = DEFAULT_WAIT, meter: Meter | None = None) -> None:
        self.data_dir = data_dir
        self.store = TxnStore(data_dir, lock_wait)
        m = meter if meter is not None else Meter(None, enabled=False)
        self.ended = {True: m.get("rivven_transactions_committed_total"),
                      False: m.get("rivven_transactions_aborted_total")}
        self.log_for = log_for
        self.sync_offsets = sync_offsets
        self.lock_wait = lock_wait

    # ---------------------------------------------------------------- a producer's calls
    def init(self, tid: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, classic: bool = False,
             expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """A new instance of ``tid``: its open transaction finished (a prepared one as
        decided, an ongoing one aborted), the epoch bumped (fencing every older instance, in
        any process). Returns ``(producer_id, epoch)``.

        ``classic``: the instance follows Kafka's classic epoch rule (``end_classic``).
        ``expected`` (classic: Kafka's InitProducerId v3+ with the producer's own id and
        epoch, after an error its transaction was aborted for): only that instance, or the
        id's first, is bumped; a retry of that bump gets the epoch it gave; anyone else is
        fenced (ProducerFenced, InvalidProducerIdMapping), and so is an instance asking
        with its transaction still open, which is aborted."""
        check_id(tid)
        check_timeout(timeout_ms)
        with self.store.locked(tid):
            st = self.store.read(tid)
            now = clock.now_ms()
            last = -1
            if st is None:
                st = TxnState(tid, pids.allocate(self.data_dir), 0)
            else:
                if expected is not None and expected[0] != st.producer_id:
                    raise InvalidProducerIdMapping(
                        f"transactional id {tid!r} has producer id {st.producer_id}, not "
                        f"{expected[0]}: this producer was replaced; create a new one")
                if expected is not None and expected[1] != st.epoch:
                    if st.classic and expected[1] == st.last_epoch and st.state not in OPEN:
                        return st.producer_id, st.epoch  # the bump retried: already done
                    raise self._fenced(tid, *expected, st)
                if st.state in OPEN:
                    self._finish(st)
                    if expected is not None:  # (Kafka answers so once the abort is done)
                        raise self._fenced(tid, *expected, st)
                if expected is not None:
                    last = st.epoch
                st.producer_id, st.epoch = self._usable(st.producer_id, st.epoch + 1)
                if st.epoch == 0:
                    last = -1  # (a new producer id: nothing to retry against)
            st.state, st.completed = EMPTY, None
            self._clear(st)
            st.classic, st.last_epoch = classic, last if classic else -1
            st.timeout_ms, st.updated_ms = timeout_ms, now
            self.store.write(st)
            return st.producer_id, st.epoch

    def add_partitions(self, tid: str, pid: int, epoch: int, parts: list[TxnPartition]
                       ) -> None:
        """Make ``parts`` durably part of the instance's transaction (starting one) before
        any data is written there."""
        with self.store.locked(tid):
            st = self._not_held(self._live(tid, pid, epoch))
            have = {(p.topic, p.partition, p.topic_id) for p in st.partitions}
            new = [p for p in parts if (p.topic, p.partition, p.topic_id) not in have]
            if not new and st.state == ONGOING:
                return
            self._start(st)
            st.partitions.extend(new)
            self.store.write(st)

    def send_offsets(self, tid: str, pid: int, epoch: int, group: str,
                     offsets: dict[tuple[str, int], int], member: str | None) -> None:
        """Store group offsets to commit with the transaction (durably; later ones of the
        same partition win); ``member``: the consumer fencing them (KIP-447)."""
        with self.store.locked(tid):
            st = self._not_held(self._live(tid, pid, epoch))
            self._start(st)
            st.offsets.setdefault(group, {}).update(offsets)
            if member is not None:
                st.fences[group] = member
            # not fdatasynced: offsets only matter once a commit is decided, and the Prepare
            # state's fdatasync makes this frame durable with it (lost before: the
            # transaction is aborted anyway)
            self.store.write(st, sync=False)

    def end(self, tid: str, pid: int, epoch: int, commit: bool, check: Check | None = None,
            retry: bool = False, written: set[tuple[str, int]] | None = None
            ) -> tuple[int, int]:
        """Commit or abort the instance's transaction: durable when this returns. ``check``
        (the consumer fences) runs under the lock before anything is decided. ``retry``: the
        instance's last end of this kind failed; one it prepared is finished as decided.
        ``written``: the partitions the instance appended to (every one it counted before
        its append), when it knows: partitions joined ahead and never written leave the
        transaction at its Prepare, and get no marker. Returns the ``(producer_id, epoch)``
        to go on with."""
        with self.store.locked(tid):
            st = self.store.read(tid)
            ended = (pid, epoch + 1)
            if st is not None and (st.producer_id, st.epoch) == ended and st.state in PREPARED:
                if (st.state == PREPARE_COMMIT) == commit and retry:
                    return self._complete(st, fresh=False)  # this instance's own end, cut short
                if st.state == PREPARE_COMMIT:
                    raise InvalidTxnState(f"the commit of transactional id {tid!r} is prepared: "
                                          "it can only be completed; call commit() again")
            if st is not None and retry and st.completed == ended and st.state == (
                    COMPLETE_COMMIT if commit else COMPLETE_ABORT):
                return st.producer_id, st.epoch  # finished meanwhile by a recovery
            st = self._live(tid, pid, epoch, st)
            if st.state != ONGOING:
                return pid, epoch  # nothing was added to the transaction: nothing to end
            if check is not None:
                check(st)
            if written is not None:
                st.partitions = [p for p in st.partitions if (p.topic, p.partition) in written]
            self._prepare(st, commit, sync=commit and any(st.offsets.values()))
            return self._complete(st, fresh=True)

    def hold(self, tid: str, pid: int, epoch: int) -> bool:
        """Phase one of a two-phase commit: the instance's transaction, every record of it
        written, waits (durably, never timed out) for ``end`` by whoever holds its
        ``(pid, epoch)`` — any process — or for an abort. False when it has nothing to
        hold (nothing was written in it: ending it is a no-op)."""
        with self.store.locked(tid):
            st = self._live(tid, pid, epoch)
            if st.state != ONGOING:
                return False
            st.held = True
            st.updated_ms = clock.now_ms()
            self.store.write(st)  # (fdatasynced: a lost hold could time the data out)
            return True

    # ---------------------------------------------------------------- Kafka clients' calls
    # (instances made with ``init(classic=True)``: Kafka's InitProducerId through rivven serve)
    def add_group(self, tid: str, pid: int, epoch: int, group: str) -> None:
        """Kafka's AddOffsetsToTxn: ``group``'s offsets may be committed with the instance's
        transaction (starting one: durably so)."""
        with self.store.locked(tid):
            st = self._not_held(self._live(tid, pid, epoch))
            if st.state == ONGOING and group in st.offsets:
                return
            starting = st.state != ONGOING
            self._start(st)
            st.offsets.setdefault(group, {})
            self.store.write(st, sync=starting)

    def commit_offsets(self, tid: str, pid: int, epoch: int, group: str,
                       offsets: dict[tuple[str, int], int], member: str | None) -> None:
        """Kafka's TxnOffsetCommit: ``offsets`` of ``group`` (added first: ``add_group``,
        else InvalidTxnState) committed with the transaction if it commits; ``member`` (the
        consumer's member id) is shown with them. Not fdatasynced: the end's Prepare is."""
        with self.store.locked(tid):
            st = self._not_held(self._live(tid, pid, epoch))
            if st.state != ONGOING or group not in st.offsets:
                raise InvalidTxnState(
                    f"group {group!r} was not added to the transaction of transactional id "
                    f"{tid!r} (AddOffsetsToTxn first): its offsets cannot be committed with it")
            st.offsets[group].update(offsets)
            if member:
                st.fences[group] = member
            st.updated_ms = clock.now_ms()
            self.store.write(st, sync=False)

    def end_classic(self, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int]:
        """Kafka's EndTxn (before KIP-890's v5): commit or abort the instance's transaction,
        durable when this returns. A classic instance's markers carry its epoch and it goes
        on with it (its Prepare state is fdatasynced first: no marker decides its end). The
        same end again is a no-op (a retry); Empty, or the other end of a completed one, is
        InvalidTxnState. Returns the ``(producer_id, epoch)`` to go on with."""
        what = "commit" if commit else "abort"
        with self.store.locked(tid):
            st = self.store.read(tid)
            if st is None or st.producer_id != pid:
                raise InvalidProducerIdMapping(str(self._fenced(tid, pid, epoch, st)))
            if st.epoch != epoch:
                raise self._fenced(tid, pid, epoch, st)
            if st.state in PREPARED or st.state in (COMPLETE_COMMIT, COMPLETE_ABORT):
                if (st.state in (PREPARE_COMMIT, COMPLETE_COMMIT)) != commit:
                    raise InvalidTxnState(
                        f"the transaction of transactional id {tid!r} is {st.state}: it "
                        f"cannot {what}")
                if st.state in PREPARED:  # (its end cut short by a crash: finished now)
                    return self._complete(st, fresh=False)
                return pid, epoch  # (this end retried: it was done)
            if st.state == EMPTY:
                raise InvalidTxnState(f"transactional id {tid!r} has no transaction to {what}: "
                                      "nothing was added to one")
            st = self._not_held(self._live(tid, pid, epoch, st))
            self._prepare(st, commit, sync=True, bump=not st.classic)
            return self._complete(st, fresh=True)

    @contextlib.contextmanager
    def writing(self, tid: str, pid: int, epoch: int, topic: str, partition: int,
                topic_id: str) -> Iterator[None]:
        """Hold the id's lock while the instance's transactional batch is appended to a
        partition, once it is known to be in its ongoing transaction (else
        InvalidTxnState; ProducerFenced, InvalidProducerIdMapping): no end can come between
        the check and the append, so no batch ever lands after its transaction's marker
        (KIP-890's verification)."""
        with self.store.locked(tid):
            st = self._live(tid, pid, epoch)
            if st.state != ONGOING or not any(
                    (p.topic, p.partition, p.topic_id) == (topic, partition, topic_id)
                    for p in st.partitions):
                raise InvalidTxnState(
                    f"{topic}-{partition} was not added to the transaction of transactional id "
                    f"{tid!r} (AddPartitionsToTxn first): its batch was not written")
            yield

    def pending_offsets(self, group: str) -> dict[tuple[str, int], str]:
        """``{(topic, partition): transactional id}``: the offsets of ``group`` an open
        transaction holds (committed if it commits): Kafka's unstable offsets (KIP-447)."""
        out: dict[tuple[str, int], str] = {}
        for tid in self.store.ids():
            try:
                st = self.store.read(tid)
            except DamagedMetadata:
                continue  # (reported by recovery and listings)
            if st is not None and st.state in OPEN:
                for tp in st.offsets.get(group, {}):
                    out[tp] = tid
        return out

    # ---------------------------------------------------------------- the state machine
    def _live(self, tid: str, pid: int, epoch: int, st: TxnState | None = None) -> TxnState:
        """(Lock held.) The id's state, if ``(pid, epoch)`` is still its instance and its
        transaction has not timed out (then it is aborted here); else ProducerFenced
        (InvalidProducerIdMapping when the producer id is not the id's). A classic
        instance's Prepare state (its end cut short by a crash) is completed first."""
        if st is None:
            st = self.store.read(tid)
        if st is None or st.producer_id != pid:
            raise InvalidProducerIdMapping(str(self._fenced(tid, pid, epoch, st)))
        if st.epoch != epoch:
            raise self._fenced(tid, pid, epoch, st)
        if st.classic and st.state in PREPARED:
            self._complete(st, fresh=False)
        if self._expired(st, clock.now_ms()):
            self._prepare(st, commit=False, sync=False)
            self._complete(st, fresh=True)
            raise ProducerFenced(
                f"the transaction of transactional id {tid!r} ran longer than its "
                f"transaction.timeout.ms ({st.timeout_ms} ms) and was aborted; create a new "
                "producer, or give it a longer transaction_timeout_ms")
        return st

    @staticmethod
    def _fenced(tid: str, pid: int, epoch: int, st: TxnState | None) -> ProducerFenced:
        now = "none" if st is None else f"producer id {st.producer_id} epoch {st.epoch}"
        return ProducerFenced(
            f"transactional id {tid!r} was taken over by a newer producer (now {now}; this "
            f"one has producer id {pid} epoch {epoch}): nothing more of this producer is "
            "written or committed; create a new one with eng.producer(transactional_id=...)")

    @staticmethod
    def _not_held(st: TxnState) -> TxnState:
        if st.held:
            raise InvalidTxnState(f"the transaction of transactional id "
                                  f"{st.transactional_id!r} is prepared: nothing more joins "
                                  "it; complete or abort it")
        return st

    @staticmethod
    def _expired(st: TxnState, now: int) -> bool:
        return st.state == ONGOING and not st.held and now - st.started_ms > st.timeout_ms

    @staticmethod
    def _start(st: TxnState) -> None:
        """A transaction begins with its first partition or offsets."""
        if st.state != ONGOING:
            _reset(st)
            st.state, st.completed = ONGOING, None
            st.started_ms = clock.now_ms()
        st.updated_ms = clock.now_ms()

    @staticmethod
    def _clear(st: TxnState) -> None:
        _reset(st)
        st.started_ms = 0

    def _usable(self, pid: int, epoch: int) -> tuple[int, int]:
        """``(pid, epoch)`` for new data, or a new producer id when the epoch leaves no room
        for the markers' bump."""
        if epoch >= MAX_EPOCH:
            return pids.allocate(self.data_dir), 0
        return pid, epoch

    def _prepare(self, st: TxnState, commit: bool, sync: bool, bump: bool = True) -> None:
        """(Lock held, Ongoing.) The decision, before any marker: the markers' epoch is the
        data's + 1 (``bump``; a classic instance's own end keeps the data's: then ``sync``).
        Durable first (``sync``) only for a commit of group offsets: any other
        end is decided by its first durable marker too (``_decided``), so a machine crash
        that takes an unsynced Prepare leaves either no marker (the transaction is still
        Ongoing, and is aborted: its end was never acknowledged) or markers that say how it
        ended. A commit's offsets are in the state alone: they must be durable before a
        marker can decide it."""
        st.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        st.held = False
        if bump:
            st.epoch += 1
        st.updated_ms = clock.now_ms()
        self.store.write(st, sync=sync)
        failpoint("txn.after_prepare")

    def _complete(self, st: TxnState, fresh: bool) -> tuple[int, int]:
        """(Lock held, Prepare*.) The markers, the group offsets (commit), then Complete*.
        ``fresh``: just prepared by this call, so no partition has its marker yet; else
        (finishing one prepared earlier) a partition gets one only where the transaction
        is still open there.

        Complete is fdatasynced only after a commit of group offsets. Otherwise its loss (a
        machine crash before the id's next change, whose fdatasync covers it) leaves the
        Prepare state, or Ongoing with the markers deciding it (``_prepare``), which the next
        recovery completes again writing nothing: every marker is durable and still_open
        finds none missing. Offsets committed again could undo newer ones another producer
        or consumer of the group committed meanwhile, so a commit with offsets is durably
        Complete before it returns."""
        commit = st.state == PREPARE_COMMIT
        logs = []
        for p in st.partitions:
            log = self.log_for(p)
            if log is None:
                continue  # the topic is gone, and the transaction's data with it
            if fresh or markers.still_open(log, st.producer_id, st.epoch, st.classic):
                logs.append(log)
        if logs:
            markers.write(logs, st.producer_id, st.epoch, commit)
            failpoint("txn.after_marker")
        offsets = commit and any(st.offsets.values())
        if offsets:
            for group, offs in st.offsets.items():
                if not offs:
                    continue  # (a group added to a Kafka client's transaction, no offsets)
                OffsetStore(membership.group_dir(self.data_dir, group), self.sync_offsets,
                            self.lock_wait).commit(offs)
            failpoint("txn.after_offsets")
        st.completed = (st.producer_id, st.epoch)
        st.producer_id, st.epoch = self._usable(st.producer_id, st.epoch)
        st.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        st.last_epoch = -1
        self._clear(st)
        st.updated_ms = clock.now_ms()
        self.store.write(st, sync=offsets)
        self.ended[commit].inc()
        failpoint("txn.after_complete")
        return st.producer_id, st.epoch

    def _finish(self, st: TxnState) -> str:
        """(Lock held, an open transaction.) Finish it: a prepared one as decided, an ongoing
        one aborted (its producer fenced by the bump), unless a marker of its end shows it
        was decided (its Prepare lost to a machine crash): then as that marker says.
        Returns what was done."""
        if st.state == ONGOING:
            decided = self._decided(st)
            self._prepare(st, commit=decided == COMMIT, sync=False)
            # a decided end's markers are written only where still missing (its producer
            # died with the machine: there is nobody to fence); else every partition gets
            # one, which also refuses the old instance's late writes there
            self._complete(st, fresh=decided is None)
            return "committed" if decided == COMMIT else "aborted"
        committed = st.state == PREPARE_COMMIT
        self._complete(st, fresh=False)
        return "committed" if committed else "aborted"

    # ---------------------------------------------------------------- recovery
    def recover(self, ids: list[str] | None = None) -> list[RecoveredTransaction]:
        """Finish the prepared transactions and abort the timed-out ongoing ones of ``ids``
        (default: every id). An id another process is working on (its lock held) is left to
        it. One row per id acted on, found damaged or busy: ``transactional_id, state``
        (before), ``action`` (committed, aborted, busy, failed) and ``error``; nothing is
        raised for one id's trouble."""
        rows: list[RecoveredTransaction] = []
        for tid in self.store.ids() if ids is None else ids:
            row: RecoveredTransaction = {"transactional_id": tid}
            try:
                st = self.store.read(tid)  # (a look without the lock: most ids are idle)
                if st is None or not self._due(st):
                    continue
                with self.store.locked(tid, wait=False) as got:
                    if not got:
                        rows.append({"transactional_id": tid, "state": st.state,
                                     "action": "busy", "error": None})
                        continue
                    st = self.store.read(tid)
                    if st is None or not self._due(st):
                        continue
                    was = st.state
                    # (in this order: the JSON's keys are action, state, error)
                    row["action"] = self._finish(st)
                    row["state"] = was
                    row["error"] = None
            except (RivvenError, OSError) as e:
                row["state"] = row.get("state")
                row["action"] = "failed"
                row["error"] = str(e)
            rows.append(row)
        return rows

    def abort(self, tid: str) -> AbortedTransaction:
        """Abort the id's ongoing transaction now, timed out or not (fencing its producer),
        or finish a prepared one as decided; waits for a process working on the id.
        Returns ``transactional_id, state`` (before), ``action`` (None: nothing was open)."""
        check_id(tid)
        with self.store.locked(tid):
            st = self.store.read(tid)
            if st is None:
                raise InvalidArgument(f"no transactional id {tid!r} in this data dir; "
                                      "eng.txn.list_transactions(all=True) lists them")
            was = st.state
            return {"transactional_id": tid, "state": was,
                    "action": self._finish(st) if was in OPEN else None}

    def _due(self, st: TxnState) -> bool:
        """Prepared, timed out, or decided by its markers: an Ongoing state last changed
        before the machine booted belongs to a producer that died with it, and if its end
        had begun (a marker in a partition), the crash took the Prepare state."""
        if st.state in PREPARED or self._expired(st, clock.now_ms()):
            return True
        return (st.state == ONGOING and st.updated_ms < clock.boot_ms()
                and self._decided(st) is not None)

    def _decided(self, st: TxnState) -> int | None:
        """(An Ongoing state.) COMMIT or ABORT when a partition of the transaction holds a
        marker of its end (the producer's, with the epoch after its data's), else None.
        Never for a classic instance: its markers carry the data's epoch, so its last
        transaction's look the same, and its own end is durably prepared first."""
        if st.classic:
            return None
        for p in st.partitions:
            log = self.log_for(p)
            if log is not None:
                kind = markers.ended(log, st.producer_id, st.epoch + 1)
                if kind is not None:
                    return kind
        return None

    def settle_group(self, group: str) -> None:
        """Finish every prepared commit holding offsets of ``group`` (waiting for an id
        another process is finishing): called before a consumer reads the group's committed
        offsets for a partition it just took over, so it never starts from offsets a
        committed transaction has moved on (KIP-447's stable offsets)."""
        for tid in self.store.ids():
            try:
                st = self.store.read(tid)
            except DamagedMetadata:
                continue  # (reported by recovery and listings; nothing to act on)
            if st is None or st.state != PREPARE_COMMIT or group not in st.offsets:
                continue
            with self.store.locked(tid):
                st = self.store.read(tid)
                if st is not None and st.state == PREPARE_COMMIT:
                    self._complete(st, fresh=False)

    # ---------------------------------------------------------------- listing
    def transactions(self, all_ids: bool = False
                     ) -> list[TransactionRow | DamagedTransaction]:
        """One row per transactional id with an open or prepared transaction (``all_ids``:
        every id): see ``row``. A damaged state file is a row with ``state`` "Damaged"."""
        now = clock.now_ms()
        out: list[TransactionRow | DamagedTransaction] = []
        for tid in self.store.ids():
            try:
                st = self.store.read(tid)
            except DamagedMetadata as e:
                out.append({"transactional_id": tid, "state": "Damaged", "error": str(e)})
                continue
            if st is not None and (all_ids or st.state in OPEN):
                out.append(row(st, now))
        return out

    def describe(self, tid: str) -> TransactionRow:
        check_id(tid)
        st = self.store.read(tid)
        if st is None:
            raise InvalidArgument(f"no transactional id {tid!r} in this data dir; "
                                  "eng.txn.list_transactions(all=True) lists them")
        return row(st, clock.now_ms())


def _reset(st: TxnState) -> None:
    st.partitions, st.offsets, st.fences, st.held = [], {}, {}, False


def row(st: TxnState, now: int) -> TransactionRow:
    """A transactional id as data: ``transactional_id, producer_id, epoch, state,
    partitions`` ([[topic, partition], ...]), ``offsets`` ({group: [[topic, partition,
    offset], ...]}), ``fences`` ({group: member id}), ``timeout_ms, started_ms`` (0: no
    transaction), ``age_ms`` (None: no transaction), ``updated_ms``, ``prepared`` (held for
    a two-phase commit: never timed out)."""
    return {"transactional_id": st.transactional_id, "producer_id": st.producer_id,
            "epoch": st.epoch, "state": st.state,
            "partitions": [[p.topic, p.partition] for p in st.partitions],
            "offsets": {g: [[t, p, o] for (t, p), o in sorted(offs.items())]
                        for g, offs in sorted(st.offsets.items())},
            "fences": dict(st.fences), "timeout_ms": st.timeout_ms,
            "started_ms": st.started_ms,
            "age_ms": max(0, now - st.started_ms) if st.started_ms else None,
            "updated_ms": st.updated_ms, "prepared": st.held}
