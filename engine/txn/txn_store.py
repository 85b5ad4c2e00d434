"""The durable state of each transactional id: ``<data>/txn/ids/<percent-encoded id>.json``.

One sealed JSON document per id (engine.storage.jsondoc; key by key in docs/FORMAT.md),
replaced atomically (write, fsync, rename, fsync dir) and changed only under
``flock(<data>/txn/ids/<percent-encoded id>.lock)``, taken with a bounded wait
(``lock.timeout.ms``) or not at all (``try_locked``: recovery leaves an id another process is
working on to that process). Every field read back is checked before it is used; a document
that fails its seal or a check is ``DamagedMetadata``, never acted on.

States (Kafka's): Empty -> Ongoing -> PrepareCommit | PrepareAbort -> CompleteCommit |
CompleteAbort -> Ongoing ... A Prepare state is the decision: once it is durable the
transaction is finished that way, by whoever holds the lock next (engine.txn.coordinator).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..errors import DamagedMetadata, InvalidArgument
from ..format.records import MAX_EPOCH
from ..groups import membership
from ..groups.offset_store import MAX_PARTITION
from ..storage import files, guard, jsondoc
from ..storage.locks import DEFAULT_WAIT, LockWait, acquire, open_lock_file, try_lock

TXN_DIR = "txn"
IDS_DIR = "ids"
VERSION = 1
SUFFIX, LOCK_SUFFIX = ".json", ".lock"
# a file name is one path component: "<id>.json.tmp.<pid>" (storage.files.write_atomic) fits
MAX_ID_BYTES = membership.MAX_NAME_BYTES - len(SUFFIX + ".tmp.") - 7
MAX_TIMEOUT_MS = (1 << 31) - 1  # Kafka's transaction.timeout.ms is an int32 too
MAX_STATE_BYTES = 64 << 20

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)
PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)
OPEN = (ONGOING, *PREPARED)  # a transaction not yet finished

_WHAT = "transaction state"
_FIX = ("restore it from a backup; its transaction's partitions and group offsets are listed "
        "in it")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
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
                "completed": list(self.completed) if self.completed is not None else None}

    @classmethod
    def from_doc(cls, doc: dict, path: str, tid: str) -> TxnState:
        """The state in a document read from ``path``, every field checked."""
        def bad(reason: str) -> DamagedMetadata:
            return jsondoc.damaged(path, _WHAT, reason, _FIX)

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
            if (type(row) is not list or len(row) != 4 or not _is_tp(row[0], row[1])
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
            for row in rows:
                if (type(row) is not list or len(row) != 3 or not _is_tp(row[0], row[1])
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
        return cls(tid, num("producer_id"), num("epoch", 0, MAX_EPOCH), state, partitions,
                   offsets, dict(fences), num("timeout_ms", 1, MAX_TIMEOUT_MS),
                   num("started_ms"), num("updated_ms"),
                   None if done is None else (done[0], done[1]))


def _is_int(v: object) -> bool:
    return type(v) is int and 0 <= v <= jsondoc.MAX_INT


def _is_tp(topic: object, partition: object) -> bool:
    return (type(topic) is str and _TOPIC.fullmatch(topic) is not None
            and type(partition) is int and 0 <= partition <= MAX_PARTITION)


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


class TxnStore:
    """The transactional ids' files of one data dir."""

    def __init__(self, data_dir: str, lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self.data_dir = data_dir
        self.dir = os.path.join(data_dir, TXN_DIR, IDS_DIR)
        self.lock_wait = lock_wait

    def path(self, tid: str) -> str:
        return os.path.join(self.dir, membership.encoded_name(tid) + SUFFIX)

    def ids(self) -> list[str]:
        """Every transactional id with a state file, sorted."""
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
        """The id's state, None when it has none; DamagedMetadata when the file is damaged."""
        path = self.path(tid)
        raw = jsondoc.read(path, _WHAT, MAX_STATE_BYTES, _FIX)
        if raw is None:
            return None
        return TxnState.from_doc(jsondoc.unseal(raw, path, _WHAT, _FIX), path, tid)

    def write(self, st: TxnState) -> None:
        """(Lock held.) Replace the id's file with ``st``: durable when this returns."""
        self._make_dirs()
        files.write_atomic(self.path(st.transactional_id), jsondoc.seal(st.to_doc()))

    def _make_dirs(self) -> None:
        root = os.path.dirname(self.dir)
        for d in (root, self.dir):
            if guard.make_dir(d):  # a new directory: its entry must survive a crash too
                files.fsync_dir(os.path.dirname(d))

    @contextlib.contextmanager
    def locked(self, tid: str, wait: bool = True) -> Iterator[bool]:
        """Hold the id's lock for the block: waited for (bounded, LockTimeout), or with
        ``wait=False`` only taken when free (yields False, the lock not taken, when another
        process or thread holds it)."""
        self._make_dirs()
        lock = os.path.join(self.dir, membership.encoded_name(tid) + LOCK_SUFFIX)
        fd = open_lock_file(lock)
        try:
            if wait:
                acquire(fd, lock, self.lock_wait)
            elif not try_lock(fd):
                yield False
                return
            self._drop_debris(tid)
            yield True
        finally:
            os.close(fd)  # (drops the lock)

    def _drop_debris(self, tid: str) -> None:
        """(Lock held.) A replacement of this id's file cut short by a crash."""
        prefix = membership.encoded_name(tid) + SUFFIX + ".tmp."
        for n in os.listdir(self.dir):
            if n.startswith(prefix) and n[len(prefix):].isdigit():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.dir, n))

