"""The durable state of each transactional id: ``<data>/txn/ids/<percent-encoded id>.log``.

An append-only log of CRC-framed records (engine.fs.framelog, the framing of a group's
offsets.log), each a JSON document holding the id's whole state (key by key in
docs/FORMAT.md): the state is the last intact frame. A change appends its state twice (two
identical frames, so that a frame damaged later, the last one included, never brings back
the state before it: a bad last frame is taken for an append cut short) and fdatasyncs them;
``write(sync=False)`` leaves the fdatasync to the id's next change, for a state whose loss a
recovery repairs (engine.txn.coordinator says which). A log grown past COMPACT_MIN and
several times its state is rewritten as that state alone (write, fsync, rename, fsync dir).

Changed only under ``flock(<data>/txn/ids/<percent-encoded id>.lock)``, taken with a bounded
wait (``lock.timeout.ms``) or not at all (``locked(wait=False)``: recovery leaves an id
another process is working on to that process). Every field read back is checked before it
is used; a frame that passes its CRC but fails a check, or a log whose frames cannot be
told apart, is ``DamagedMetadata``, never acted on.

States (Kafka's): Empty -> Ongoing -> PrepareCommit | PrepareAbort -> CompleteCommit |
CompleteAbort -> Ongoing ... A Prepare state is the decision: once it is written the
transaction is finished that way, by whoever holds the lock next (engine.txn.coordinator says
when it must be durable first, and how a decision a machine crash took is found again).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..errors import DamagedMetadata, InvalidArgument
from ..format.records import MAX_EPOCH
from ..fs import durable, framelog, guard, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, acquire, open_lock_file, try_lock
from ..groups import membership
from ..groups.offset_store import is_tp

TXN_DIR = "txn"
IDS_DIR = "ids"
VERSION = 1
SUFFIX, LOCK_SUFFIX = ".log", ".lock"
# a file name is one path component: "<id>.log.tmp.<pid>" (fs.durable.write_atomic) fits
# with a byte to spare (the limit ids had when the state was "<id>.json": kept)
MAX_ID_BYTES = membership.MAX_NAME_BYTES - len(".json.tmp.") - 7
MAX_TIMEOUT_MS = (1 << 31) - 1  # Kafka's transaction.timeout.ms is an int32 too
MAX_STATE_BYTES = 64 << 20  # a frame (one state) at most; a longer length is damage
COMPACT_MIN = 64 << 10  # a log is rewritten as its last state once past this ...
COMPACT_FACTOR = 4  # ... and this many times that state's frame
FRAME_HEAD = framelog.FRAME.size
MAX_SEEN = 10000  # ids whose last state a store keeps

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)
PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)
OPEN = (ONGOING, *PREPARED)  # a transaction not yet finished

_WHAT = "transaction state"
_FIX = ("restore it from a backup; its transaction's partitions and group offsets are listed "
        "in it")
_TOPIC_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class TxnPartition:
    """A partition in a transaction: ``since`` is its log end when it joined (its data and
    marker lie at or after it), ``topic_id`` tells a topic created again under the name."""

    topic: str
    partition: int
    topic_id: str
    since: int


@dataclass
class TxnState:
    """What one transactional id's file holds (docs/FORMAT.md, "txn/ids")."""

    transactional_id: str
    producer_id: int
    epoch: int  # the epoch the live producer writes with; in Prepare*, its markers' epoch
    state: str = EMPTY
    partitions: list[TxnPartition] = field(default_factory=list)
    offsets: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    fences: dict[str, str] = field(default_factory=dict)  # group -> member id (KIP-447)
    timeout_ms: int = 60000
    started_ms: int = 0  # when the open transaction began (0: none)
    updated_ms: int = 0
    # Complete*: the (producer id, markers' epoch) of the transaction it completed, so that
    # the producer retrying an end a recovery finished meanwhile knows it is done
    completed: tuple[int, int] | None = None
    # (Ongoing.) prepared by its producer for a two-phase commit (``prepare()``): it waits
    # for ``complete_transaction``, an abort, or a new instance of the id; never timed out
    held: bool = False
    # Kafka's classic epoch rule (a Kafka client's InitProducerId, engine.kafka): markers carry
    # the data's epoch and the producer keeps it across transactions; only a fence (a new
    # instance, a timeout, an abort by hand) bumps it
    classic: bool = False
    # (classic.) the epoch before the last bump a producer asked for with its own producer id
    # and epoch (InitProducerId v3+): that request retried gets the current epoch (-1: none)
    last_epoch: int = -1
    # where in its log this state was read or written: (inode, end of its frame, file size)
    at: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    def copy(self, at: tuple[int, int, int] | None) -> TxnState:
        """A copy to change freely (``at``: where it was read)."""
        return TxnState(self.transactional_id, self.producer_id, self.epoch, self.state,
                        list(self.partitions),
                        {g: dict(offs) for g, offs in self.offsets.items()},
                        dict(self.fences), self.timeout_ms, self.started_ms, self.updated_ms,
                        self.completed, self.held, self.classic, self.last_epoch, at)

    def to_doc(self) -> dict[str, Any]:
        return {"version": VERSION, "transactional_id": self.transactional_id,
                "producer_id": self.producer_id, "epoch": self.epoch, "state": self.state,
                "partitions": [[p.topic, p.partition, p.topic_id, p.since]
                               for p in self.partitions],
                "offsets": {g: [[t, p, o] for (t, p), o in sorted(offs.items())]
                            for g, offs in sorted(self.offsets.items())},
                "fences": dict(sorted(self.fences.items())),
                "timeout_ms": self.timeout_ms, "started_ms": self.started_ms,
                "updated_ms": self.updated_ms,
                "completed": list(self.completed) if self.completed is not None else None,
                **({"held": True} if self.held else {}),  # (absent: False, as before it)
                **({"classic": True} if self.classic else {}),  # (the same)
                **({"last_epoch": self.last_epoch} if self.last_epoch >= 0 else {})}

    @classmethod
    def from_doc(cls, doc: Any, path: str, tid: str) -> TxnState:
        """The state in a document read from ``path``, every field checked."""
        def bad(reason: str) -> DamagedMetadata:
            return jsondoc.damaged(path, _WHAT, reason, _FIX)

        if type(doc) is not dict:
            raise bad(f"a JSON {type(doc).__name__} where a state belongs")

        def num(key: str, lo: int = 0, hi: int = jsondoc.MAX_INT) -> int:
            return jsondoc.get_int(doc, key, path, _WHAT, lo, hi, _FIX)

        num("version", VERSION, VERSION)
        if jsondoc.get_str(doc, "transactional_id", path, _WHAT, 1000, _FIX) != tid:
            raise bad(f"it names transactional id {jsondoc.shown(doc['transactional_id'])}, "
                      f"not {tid!r} as its file name says")
        state = jsondoc.get_str(doc, "state", path, _WHAT, 20, _FIX)
        if state not in STATES:
            raise bad(f"state is {jsondoc.shown(state)}, not one of {', '.join(STATES)}")
        parts = doc.get("partitions")
        if type(parts) is not list:
            raise bad("partitions is not a list")
        partitions = []
        for row in parts:
            if (type(row) is not list or len(row) != 4 or not is_tp(row[0], row[1])
                    or type(row[2]) is not str or not _TOPIC_ID.fullmatch(row[2])
                    or not _is_int(row[3])):
                raise bad(f"partitions has {jsondoc.shown(row)}, not [topic, partition, "
                          "topic id, offset]")
            partitions.append(TxnPartition(*row))
        offsets: dict[str, dict[tuple[str, int], int]] = {}
        groups = doc.get("offsets")
        if type(groups) is not dict:
            raise bad("offsets is not an object")
        for g, rows in groups.items():
            _check_group(g, bad)
            if type(rows) is not list:
                raise bad(f"offsets of group {jsondoc.shown(g)} is not a list")
            offsets[g] = {}  # (a group added to a Kafka client's transaction: none yet)
            for row in rows:
                if (type(row) is not list or len(row) != 3 or not is_tp(row[0], row[1])
                        or not _is_int(row[2])):
                    raise bad(f"offsets has {jsondoc.shown(row)}, not [topic, partition, "
                              "offset]")
                offsets.setdefault(g, {})[(row[0], row[1])] = row[2]
        fences = doc.get("fences")
        if type(fences) is not dict:
            raise bad("fences is not an object")
        for g, member in fences.items():
            _check_group(g, bad)
            if type(member) is not str or len(member) > 1000:
                raise bad(f"fences has member {jsondoc.shown(member)} for group "
                          f"{jsondoc.shown(g)}")
        done = doc.get("completed")
        if done is not None and (type(done) is not list or len(done) != 2
                                 or not _is_int(done[0]) or type(done[1]) is not int
                                 or not 0 <= done[1] <= MAX_EPOCH):
            raise bad(f"completed is {jsondoc.shown(done)}, not null or [producer id, epoch]")
        held = doc.get("held", False)
        if type(held) is not bool or (held and state != ONGOING):
            raise bad(f"held is {jsondoc.shown(held)} in state {state}: only an Ongoing "
                      "transaction is held")
        classic = doc.get("classic", False)
        if type(classic) is not bool:
            raise bad(f"classic is {jsondoc.shown(classic)}, not true or false")
        last = num("last_epoch", 0, MAX_EPOCH) if "last_epoch" in doc else -1
        return cls(tid, num("producer_id"), num("epoch", 0, MAX_EPOCH), state, partitions,
                   offsets, dict(fences), num("timeout_ms", 1, MAX_TIMEOUT_MS),
                   num("started_ms"), num("updated_ms"),
                   None if done is None else (done[0], done[1]), held, classic, last)


def _is_int(v: object) -> bool:
    return type(v) is int and 0 <= v <= jsondoc.MAX_INT


def _check_group(g: str, bad: Any) -> None:
    try:
        membership.check_group_name(g)
    except InvalidArgument as e:
        raise bad(f"a group name that is not valid ({e})") from None


def check_id(tid: str) -> None:
    """A transactional id that fits its file (InvalidArgument otherwise): the rules of
    group names (engine.groups.membership), control characters refused."""
    membership.check_name(tid, "transactional id", new=True, max_bytes=MAX_ID_BYTES,
                          as_name="a file name")


@dataclass(frozen=True)
class _Seen:
    """An id's state as last read or written: its log's inode, where its frame ends, the
    frame's bytes, and the state (only copies are handed out)."""

    ino: int
    end: int
    frame: bytes
    state: TxnState


class TxnStore:
    """The transactional ids' logs of one data dir."""

    def __init__(self, data_dir: str, lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self.data_dir = data_dir
        self.dir = os.path.join(data_dir, TXN_DIR, IDS_DIR)
        self.lock_wait = lock_wait
        self._made = False  # txn/ids/ exists (made or seen by this store)
        self._seen: dict[str, _Seen] = {}  # the last state read or written of each id
        self._names: dict[str, str] = {}

    def path(self, tid: str) -> str:
        return self._name(tid) + SUFFIX

    def _name(self, tid: str) -> str:
        """``<dir>/<percent-encoded id>``: the id's files are it plus a suffix."""
        name = self._names.get(tid)
        if name is None:
            if len(self._names) >= MAX_SEEN:
                self._names.clear()
            name = self._names[tid] = os.path.join(self.dir, membership.encoded_name(tid))
        return name

    def ids(self) -> list[str]:
        """Every transactional id with a state log, sorted."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            if not n.endswith(SUFFIX):
                continue
            tid = unquote(n[: -len(SUFFIX)])
            try:
                check_id(tid)
            except InvalidArgument:
                continue  # not a name this store writes (made by hand): not an id
            if membership.encoded_name(tid) + SUFFIX == n:
                out.append(tid)
        return sorted(out)

    def read(self, tid: str) -> TxnState | None:
        """The id's state (its log's last intact frame), None when it has none;
        DamagedMetadata when the log is damaged.

        The last state seen of each id is kept, with where its frame ends and its bytes: a
        log whose inode has those bytes there is read on from that point only (the frames
        other processes appended since), or not at all when it ends there."""
        path = self.path(tid)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise jsondoc.damaged(path, _WHAT, "not a regular file", _FIX) from None
            raise

        def damage(pos: int, reason: str) -> DamagedMetadata:
            return jsondoc.damaged(path, _WHAT, f"at byte {pos}: {reason}", _FIX)

        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise jsondoc.damaged(path, _WHAT, "not a regular file", _FIX)
            seen = self._seen.get(tid)
            if seen is not None and not (
                    seen.ino == st.st_ino and seen.end <= st.st_size
                    and os.pread(fd, len(seen.frame), seen.end - len(seen.frame)) == seen.frame):
                seen = None  # rewritten, cut or damaged since: read it all
            if seen is not None and seen.end == st.st_size:
                return seen.state.copy((st.st_ino, seen.end, st.st_size))
            last: list = [None, 0, 0]  # the last intact frame's payload, start and end
            skipped: list[int] = []

            def apply(payload: bytes, pos: int, end: int) -> None:
                last[0], last[1], last[2] = payload, pos, end

            framelog.scan(fd, 0 if seen is None else seen.end, st.st_size, MAX_STATE_BYTES,
                          apply, damage, "state", on_skip=skipped.append)
            payload, start, end = last
            frame = b"" if payload is None else os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        if payload is None:
            if seen is not None:  # nothing new but a torn append: the state seen
                return seen.state.copy((st.st_ino, seen.end, st.st_size))
            if skipped:  # frames, none intact: not what a crash leaves
                raise damage(skipped[0], "no intact state in it")
            return None  # empty, or its first write cut short by a crash: no state yet
        state = TxnState.from_doc(jsondoc.loads(payload, path, _WHAT, _FIX), path, tid)
        if frame[FRAME_HEAD:] == payload:  # (else it changed under this reader: a rewrite)
            self._keep(tid, _Seen(st.st_ino, end, frame, state.copy(None)))
        state.at = (st.st_ino, end, st.st_size)
        return state

    def write(self, st: TxnState, sync: bool = True) -> None:
        """(Lock held.) Append ``st`` to the id's log: durable when this returns, or with
        ``sync=False`` once the next change (or a rewrite) of the id is."""
        tid = st.transactional_id
        path = self.path(tid)
        one = framelog.frame(json.dumps(st.to_doc(), separators=(",", ":")).encode())
        data = one + one  # two copies: one damaged frame never brings back an older state
        try:
            fd = guard.open_file(path, os.O_WRONLY)
            new = False
        except FileNotFoundError:
            self._make_dirs()
            fd = guard.open_file(path, os.O_WRONLY | os.O_CREAT)
            new = True
        s: os.stat_result | None  # the file after the append (None: rewrite it)
        try:
            cur = os.fstat(fd)
            if st.at is not None and st.at[0] == cur.st_ino and st.at[2] == cur.st_size:
                good = st.at[1]  # read (or written) under this lock: nothing changed since
            else:
                now = self.read(tid)
                good = 0 if now is None or now.at is None or now.at[0] != cur.st_ino \
                    else now.at[1]
            if good + len(data) > COMPACT_MIN and good > COMPACT_FACTOR * len(data):
                s = None  # rewritten below, once this fd is closed
            else:
                s = framelog.append(fd, path, data, good, sync,
                                    "write the state of a transactional id to")
        finally:
            os.close(fd)
        if s is None:
            self._rewrite(path, data)
            s = os.stat(path, follow_symlinks=False)
            good = 0
        elif new:  # its entry in txn/ids/ must survive a crash too
            durable.fsync_dir(self.dir)
        st.at = (s.st_ino, good + len(data), s.st_size)
        self._keep(tid, _Seen(s.st_ino, good + len(data), one, st.copy(None)))

    def _keep(self, tid: str, seen: _Seen) -> None:
        if len(self._seen) >= MAX_SEEN and tid not in self._seen:
            self._seen.clear()  # (a data dir of very many ids: start over)
        self._seen[tid] = seen

    def _rewrite(self, path: str, data: bytes) -> None:
        """(Lock held.) The log as its last state alone: tmp, fsync, rename, fsync dir."""
        prefix = os.path.basename(path) + ".tmp."
        for n in os.listdir(self.dir):  # a rewrite of this id cut short by a crash
            if n.startswith(prefix) and n[len(prefix):].isdigit():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.dir, n))
        durable.write_atomic(path, data)

    def _make_dirs(self) -> None:
        if self._made:
            return
        root = os.path.dirname(self.dir)
        for d in (root, self.dir):
            if guard.make_dir(d):  # a new directory: its entry must survive a crash too
                durable.fsync_dir(os.path.dirname(d))
        self._made = True

    @contextlib.contextmanager
    def locked(self, tid: str, wait: bool = True) -> Iterator[bool]:
        """Hold the id's lock for the block: waited for (bounded, LockTimeout), or with
        ``wait=False`` only taken when free (yields False, the lock not taken, when another
        process or thread holds it)."""
        self._make_dirs()
        lock = self._name(tid) + LOCK_SUFFIX
        try:
            fd = open_lock_file(lock)
        except FileNotFoundError:  # txn/ids/ removed since this store made it
            self._made = False
            self._make_dirs()
            fd = open_lock_file(lock)
        try:
            if wait:
                acquire(fd, lock, self.lock_wait)
            elif not try_lock(fd):
                yield False
                return
            yield True
        finally:
            os.close(fd)  # (drops the lock)
