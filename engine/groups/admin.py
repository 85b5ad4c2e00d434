"""Consumer-group administration, ``Engine.groups``: list, describe, reset offsets, delete
(``rivven group``).

It reads the log only through two calls it is given: a topic's (start, end) offsets per
partition, and the offset of a partition at a time. Its results are typed (engine.groups.results).

A reset plan file is Kafka's (``kafka-consumer-groups --reset-offsets --export`` writes it,
``--from-file`` reads it): one partition per line, ``topic,partition,offset``, no header.
Reading also takes Kafka's several-group form ``group,topic,partition,offset`` (the rows of
other groups are ignored), rpk's ``topic partition offset`` (``rpk group seek --to-file``),
blank lines and ``#`` comments (a topic name never starts with ``#``).
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..crypto.topic import OffsetMetadata
from ..errors import (
    DamagedMetadata,
    GroupActive,
    GroupKindConflict,
    GroupNotFound,
    InvalidArgument,
    RivvenError,
    UnknownTopic,
)
from ..fs import guard
from ..fs.locks import DEFAULT_WAIT, LockWait
from . import membership
from .offset_store import Committed, OffsetStore
from .results import (
    CommittedOffset,
    GroupDescription,
    GroupLive,
    GroupMember,
    GroupOffsetsDeleted,
    GroupPartition,
    GroupRemoved,
    GroupState,
    ResetPlan,
    ResetRow,
)

TopicOffsets = Callable[[str], "dict[int, tuple[int, int]] | None"]  # None: no such topic
OffsetForTime = Callable[[str, int, int], "int | None"]

RESET_MODES = ("to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration", "shift-by",
               "from-start", "from-end", "to-current", "from-file")
ASSIGNMENT_STRATEGY = "roundrobin"  # engine.groups.consumer.assign (Kafka's name for it)
MAX_PLAN_BYTES = 64 << 20  # a reset plan file larger than this is refused (1M partitions fit)
Plan = Mapping[tuple[str, int], int]
# the reset mode of each kind of engine.fetch.positions.Position
RESET_MODE_OF = {"beginning": "to-earliest", "end": "to-latest", "offset": "to-offset",
                 "timestamp": "to-datetime", "from_start": "from-start", "from_end": "from-end"}


def _writable() -> None:
    pass


MAX_STORES = 1024  # groups whose offsets the service keeps read (commit/offsets)
__all__ = ["GroupActive", "GroupAdmin", "GroupKindConflict", "GroupNotFound"]


class GroupAdmin:
    """The groups of one data dir, seen through ``topic_offsets`` and ``offset_for_time``.
    ``writable()`` raises when the engine was opened read-only (every change calls it)."""

    def __init__(self, data_dir: str, sync: bool, topic_offsets: TopicOffsets,
                 offset_for_time: OffsetForTime, lock_wait: LockWait = DEFAULT_WAIT,
                 metadata: OffsetMetadata | None = None,
                 writable: Callable[[], None] = _writable) -> None:
        self.data_dir = data_dir
        self.metadata = metadata  # opens an encrypted topic's sealed commit metadata
        self.lock_wait = lock_wait
        self.sync = sync  # fdatasync each commit
        self._topic_offsets = topic_offsets
        self.offset_for_time = offset_for_time
        self.writable = writable
        # the offset stores commit() and offsets() use, kept (each reads only what other
        # processes appended since its last look), the least recently used dropped past
        # MAX_STORES
        self._stores: OrderedDict[str, OffsetStore] = OrderedDict()
        self._stores_lock = threading.Lock()

    def check_name(self, group: str) -> None:
        """InvalidArgument (one line, with the rule) for a name no new group may have."""
        membership.check_group_name(group, new=True)

    def group_dir(self, group: str) -> str:
        return membership.group_dir(self.data_dir, group)

    def _store(self, group: str) -> OffsetStore:
        return OffsetStore(self.group_dir(group), sync=self.sync, lock_wait=self.lock_wait)

    def _metadata(self, group: str, topic: str, partition: int, c: Committed | None
                  ) -> tuple[str | None, bool]:
        """A commit's metadata text, and whether it is stored sealed (its text None when the
        keys to open it are not at hand: offsets and lag need no key)."""
        if c is None:
            return None, False
        if isinstance(c.metadata, str) or self.metadata is None:
            return (c.metadata if isinstance(c.metadata, str) else None), not isinstance(
                c.metadata, str)
        return self.metadata.open(group, topic, partition, c.offset, c.metadata)

    def sealed_versions(self, topic: str) -> set[int]:
        """The data key versions the groups' committed metadata of ``topic`` is sealed with
        (so a re-encryption keeps them)."""
        out: set[int] = set()
        for g in self.names():
            try:
                committed = self._store(g).refresh()
            except RivvenError:
                continue  # (a damaged offsets log: 'group describe' reports it)
            out.update(c.metadata["v"] for (t, _), c in committed.items()
                       if t == topic and isinstance(c.metadata, dict))
        return out

    def reseal_metadata(self, topic: str) -> int:
        """Every group's commit metadata of ``topic`` sealed anew with the topic's current
        data key (text committed before the topic encrypted, sealed; back to text when it no
        longer encrypts), each group's offsets file rewritten so that no frame keeps it as it
        was: part of a re-encryption. Returns how many commits changed."""
        self.writable()
        if self.metadata is None:
            return 0
        resealed = self.metadata.resealed
        scrub = self.metadata.encrypts(topic)
        n = 0
        for g in self.names():
            n += self._store(g).reseal(topic, functools.partial(resealed, g, topic), scrub)
        return n

    def _exists(self, group: str) -> bool:
        return os.path.isdir(self.group_dir(group))

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (no log offsets, members or leases looked at)."""
        self._check_exists(group)
        return {tp: c.offset for tp, c in self._store(group).refresh().items()}

    def _check_exists(self, group: str) -> None:
        if not self._exists(group):
            raise GroupNotFound(f"group {group!r} does not exist; 'rivven group list' shows the "
                                "groups")

    def live(self, group: str) -> GroupLive:
        """Who reads the group now: ``kind`` "rivven" (native consumers: engine.groups.
        consumer), "kafka" (Kafka clients through a ``rivven serve``) or None (no live
        member); ``state`` Empty, Active (native) or the Kafka group's state (Stable,
        PreparingRebalance, CompletingRebalance); ``protocol`` the assignor; ``members``
        with the partitions each holds. Reads member files only (no offsets, no log)."""
        gdir = self.group_dir(group)
        found = membership.live_members(gdir) if self._exists(group) else []
        marks = [m for m in found if membership.kind(m) == membership.KAFKA]
        if marks:
            details = membership.read_details(gdir, marks[0])
            members: list[GroupMember] = []
            for m in details["members"] if details else ():
                topics = m.get("topics")
                members.append({
                    "member_id": m.get("member_id"), "client_id": m.get("client_id"),
                    "host": m.get("host"), "pid": None,
                    "topics": [t for t in topics if isinstance(t, str)]
                    if isinstance(topics, list) else [],
                    "joined": m.get("joined"), "assignment": _assignment(m.get("assignment"))})
            state = details.get("state") if details else None
            return {"group": group, "kind": membership.KAFKA,
                    "state": state if isinstance(state, str) else "PreparingRebalance",
                    "protocol": details.get("protocol") if details else None,
                    "server_pid": marks[0].get("pid"), "members": members}
        held: dict[str, list[dict[str, Any]]] = {}
        if found:
            for (t, p), owner in sorted(membership.lease_owners(gdir).items()):
                held.setdefault(owner, []).append({"topic": t, "partition": p})
        shown: list[GroupMember] = [
            {"member_id": m.get("member_id"), "client_id": m.get("client_id"),
             "host": m.get("host"), "pid": m.get("pid"), "topics": m.get("topics"),
             "joined": m.get("joined"), "assignment": held.get(str(m.get("member_id")), [])}
            for m in found]
        return {"group": group, "kind": membership.NATIVE if shown else None,
                "state": "Active" if shown else "Empty",
                "protocol": ASSIGNMENT_STRATEGY, "server_pid": None, "members": shown}

    def describe(self, group: str) -> GroupDescription:
        """Per partition the group reads or has committed: committed offset, log start/end,
        lag, owner; the live members with the partitions each holds (``assignment``)."""
        return self._describe(group)[0]

    def _describe(self, group: str) -> tuple[GroupDescription, GroupLive]:
        self._check_exists(group)
        live = self.live(group)
        members = live["members"]
        committed = self._store(group).refresh()
        owners = {(a["topic"], a["partition"]): str(m["member_id"])
                  for m in members for a in m["assignment"]}
        topics = {t for t, _ in committed} | {t for m in members for t in m.get("topics") or ()}
        rows: list[GroupPartition] = []
        for t in sorted(topics):
            offs = self._topic_offsets(t)
            parts = sorted(set(offs or ()) | {p for tt, p in committed if tt == t})
            for p in parts:
                c = committed.get((t, p))
                start, end = offs[p] if offs and p in offs else (None, None)
                lag = None if c is None or end is None else max(0, end - c.offset)
                text, sealed = self._metadata(group, t, p, c)
                rows.append({"topic": t, "partition": p,
                             "current_offset": None if c is None else c.offset,
                             "log_start_offset": start, "log_end_offset": end, "lag": lag,
                             "last_commit": None if c is None else c.timestamp,
                             "metadata": text, "metadata_encrypted": sealed,
                             "consumer": owners.get((t, p))})
        return {"group": group, "state": live["state"], "members": members,
                "partitions": rows,
                "total_lag": sum(r["lag"] for r in rows if r["lag"] is not None)}, live

    def names(self) -> list[str]:
        """The groups' names alone: no offsets read, nothing changed or tidied (shell
        completion)."""
        return membership.group_names(self.data_dir, tidy=False)

    def state(self, group: str) -> GroupState:
        """One line about the group (``describe --state``, a row of ``list``): group,
        state (Active / Empty), assignment_strategy, members (a count), topics, total_lag."""
        d, live = self._describe(group)
        return {"group": group, "state": d["state"],
                "assignment_strategy": (live["protocol"] or ASSIGNMENT_STRATEGY)
                if live["kind"] else ASSIGNMENT_STRATEGY,
                "members": len(d["members"]),
                "topics": sorted({r["topic"] for r in d["partitions"]}),
                "total_lag": d["total_lag"]}

    def list_groups(self) -> list[GroupState]:
        """Every group's ``state``, by name."""
        return [self.state(g) for g in membership.group_names(self.data_dir)]

    def _refuse_if_active(self, group: str, what: str, topic: str | None = None,
                          hint: str = "") -> None:
        live = self.live(group)
        members = live["members"]
        if topic is not None:
            members = [m for m in members if topic in (m.get("topics") or ())]
        if live["kind"] == membership.KAFKA and not live["members"]:
            # (a server's mark whose details are not written yet: members, topics unknown)
            raise GroupActive(f"group {group!r} has Kafka-protocol members through rivven serve "
                              f"(pid {live['server_pid']}); stop them before {what}{hint}")
        if members:
            ids = ", ".join(str(m.get("member_id")) for m in members[:3])
            kafka = " Kafka-protocol" if live["kind"] == membership.KAFKA else ""
            raise GroupActive(f"group {group!r} has {len(members)} active{kafka} consumer(s) "
                              f"({ids}); stop them before {what}{hint}")

    def reset_offsets(self, group: str, targets: dict[str, list[int] | None] | None,
                      mode: str | tuple[str, int], value: Any = None, execute: bool = False,
                      force: bool = False, new_topics: bool = True) -> ResetPlan:
        """A reset of ``targets`` (topic -> partitions, None = all; ``targets=None`` = every
        topic the group has committed), applied with ``execute`` (refused while the group has
        live consumers, unless ``force``). ``mode``: one of RESET_MODES, or a ``Position``
        (engine.fetch.positions; ``value`` then unused). ``value``: the offset
        (to-offset), the resolved time in ms (to-datetime, by-duration), the shift (shift-by),
        N (from-start: log start + N; from-end: log end - N), or for from-file a plan: a path
        of a plan file or a mapping ``{(topic, partition): offset}`` (``targets`` then filters
        it). to-current keeps the committed offset (the log end where there is none, as
        Kafka). ``new_topics=False`` (rpk's default) leaves out the topics the group has no
        committed offset for. The group need not exist: the plan then sets up its first
        offsets.

        Returns ``group, mode, executed, new_group`` (it had no offsets: the reset sets them
        up), ``active_members`` (a reset while there are any needs ``force``),
        ``skipped_topics`` (left out by ``new_topics=False``), ``partitions``: rows ``topic,
        partition, prior, new, requested, clamped, log_start_offset, log_end_offset``."""
        if isinstance(mode, tuple):  # a Position
            mode, value = RESET_MODE_OF.get(mode[0], repr(mode[0])), mode[1]
        if execute:
            self.writable()
        if mode not in RESET_MODES:
            raise InvalidArgument(f"unknown reset mode {mode!r}; use one of {', '.join(RESET_MODES)}")
        exists = self._exists(group)
        if not exists:  # the reset would create it: the names a new group may have
            membership.check_group_name(group, new=True)
        committed = self._store(group).refresh() if exists else {}
        wanted: dict[tuple[str, int], int] = {}
        if mode == "from-file":
            wanted = dict(read_plan(value, group) if not isinstance(value, Mapping) else value)
            if targets is not None:
                wanted = {(t, p): o for (t, p), o in wanted.items()
                          if t in targets and (targets[t] is None or p in (targets[t] or ()))}
                if not wanted:
                    raise InvalidArgument("the plan has no offsets for the topics and partitions "
                                          "named")
            named: dict[str, list[int]] = {}
            for t, p in wanted:
                named.setdefault(t, []).append(p)
            targets = dict(named)
        elif targets is None:
            had: dict[str, list[int]] = {}
            for t, p in committed:
                had.setdefault(t, []).append(p)
            targets = dict(had)
            if not targets:
                raise InvalidArgument(f"group {group!r} has no committed offsets; name topics with "
                                      "--topic")
        skipped = []
        if not new_topics and mode != "from-file":
            known = {t for t, _ in committed}
            skipped = sorted(t for t in targets if t not in known)
            targets = {t: ps for t, ps in targets.items() if t in known}
            if not targets:
                raise InvalidArgument(f"group {group!r} has no committed offsets for "
                                      f"{', '.join(map(repr, skipped))}; allow new topics to set "
                                      "them up (rivven group seek --allow-new-topics)")
        rows: list[ResetRow] = []
        for t in sorted(targets):
            offs = self._topic_offsets(t)
            if offs is None:
                raise UnknownTopic(f"topic {t!r} does not exist; 'rivven topic list' shows topics")
            parts = targets[t]
            for p in sorted(set(parts if parts is not None else offs)):
                if p not in offs:
                    raise InvalidArgument(f"partition {p} does not exist in topic {t!r} (it has "
                                          f"partitions 0..{len(offs) - 1})")
                start, end = offs[p]
                c = committed.get((t, p))
                prior = None if c is None else c.offset
                if mode == "to-earliest":
                    want = start
                elif mode == "to-latest":
                    want = end
                elif mode == "to-offset":
                    want = int(value)
                elif mode == "from-file":
                    want = wanted[(t, p)]
                elif mode == "to-current":
                    want = end if prior is None else prior
                elif mode == "shift-by":
                    if prior is None:
                        raise InvalidArgument(f"cannot shift {t}-{p}: group {group!r} has no committed "
                                              "offset there; use --to-offset or --to-earliest")
                    want = prior + int(value)
                elif mode == "from-start":
                    want = start + int(value)
                elif mode == "from-end":
                    want = end - int(value)
                else:
                    found = self.offset_for_time(t, p, int(value))
                    want = end if found is None else found
                new = min(max(want, start), end)
                rows.append({"topic": t, "partition": p, "prior": prior, "new": new,
                             "requested": want, "clamped": new != want,
                             "log_start_offset": start, "log_end_offset": end})
        active = len(membership.live_members(self.group_dir(group))) if exists else 0
        if execute:
            self.apply_reset(group, rows, force)
        return {"group": group, "mode": mode, "executed": execute, "new_group": not exists,
                "active_members": active, "skipped_topics": skipped, "partitions": rows}

    def apply_reset(self, group: str, rows: list[ResetRow], force: bool = False) -> None:
        membership.check_group_name(group, new=True)  # a reset may create the group
        if not force:
            self._refuse_if_active(group, "resetting its offsets", hint=" (or pass --force)")
        if rows:
            self._store(group).commit({(r["topic"], r["partition"]): r["new"] for r in rows})

    def delete(self, group: str) -> GroupRemoved:
        """Delete a group with no live consumer: its committed offsets and files."""
        self.writable()
        if not self._exists(group):
            raise GroupNotFound(f"group {group!r} does not exist")
        self._refuse_if_active(group, "deleting it")
        gdir = self.group_dir(group)
        try:
            count: int | None = len(self._store(group).refresh())
        except DamagedMetadata:
            count = None  # deleting the group is the way out of a damaged offsets log
        # (a short name: the group's own may take a whole file name's 255 bytes)
        trash = os.path.join(os.path.dirname(gdir), f".deleted-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.replace(gdir, trash)  # one atomic step: the group is there or gone
        guard.remove_tree(self.data_dir, trash)
        return {"group": group, "deleted_offsets": count}

    def delete_offsets(self, group: str, topic: str, partitions: Sequence[int] | None = None,
                       missing_ok: bool = False) -> GroupOffsetsDeleted:
        """Delete the group's committed offsets of ``topic`` (of its ``partitions`` only, when
        given), refused while a live consumer of the group reads the topic. No offset to
        delete: InvalidArgument, or with ``missing_ok`` nothing deleted."""
        self.writable()
        if not self._exists(group):
            raise GroupNotFound(f"group {group!r} does not exist")
        self._refuse_if_active(group, f"deleting its offsets of {topic!r}", topic)
        store = self._store(group)
        gone = [tp for tp in store.refresh() if tp[0] == topic
                and (partitions is None or tp[1] in partitions)]
        if not gone and not missing_ok:
            raise InvalidArgument(f"group {group!r} has no committed offsets for topic {topic!r}")
        if gone:
            store.commit({}, delete=gone)
        return {"group": group, "topic": topic, "partitions": sorted(p for _, p in gone)}

    # ------------------------------------------------------------ a server's groups
    def _kept_store(self, group: str) -> OffsetStore:
        with self._stores_lock:
            store = self._stores.get(group)
            if store is None:
                seal = (functools.partial(self.metadata.seal, group)
                        if self.metadata is not None else None)
                store = OffsetStore(self.group_dir(group), sync=self.sync,
                                    lock_wait=self.lock_wait, seal=seal)
                self._stores[group] = store
                while len(self._stores) > MAX_STORES:
                    self._stores.popitem(last=False)
            else:
                self._stores.move_to_end(group)
            return store

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int],
               metadata: Mapping[tuple[str, int], str] | None = None) -> int:
        """Durably commit ``offsets`` for ``group``, each with its own metadata text (missing:
        "", sealed for an encrypted topic), as one commit; the group is made if new. The
        caller checks who may commit (a Kafka coordinator: its members; no live-member check
        here). Returns the commit time (ms)."""
        self.writable()
        membership.check_group_name(group, new=True)
        return self._kept_store(group).commit(dict(offsets), metadata or {})

    def offsets(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's committed offsets with their metadata text (None: sealed, its key not
        at hand) and commit time; ``{}`` for a group that does not exist."""
        membership.check_group_name(group)
        if not self._exists(group):
            return {}
        out: dict[tuple[str, int], CommittedOffset] = {}
        for (t, p), c in self._kept_store(group).refresh().items():
            text, _ = self._metadata(group, t, p, c)
            out[(t, p)] = {"offset": c.offset, "metadata": text, "timestamp": c.timestamp}
        return out

    def claim(self, group: str, info: dict[str, Any]) -> membership.ProtocolMark:
        """Mark ``group`` as a Kafka-protocol group of this process's server (``rivven
        serve``) while it has members: the mark (``ProtocolMark``: ``publish(details)`` its
        members, ``close()`` when the last leaves) makes native consumers refuse to join and
        ``describe``/``list`` show the members. GroupKindConflict (one line) while the group
        has live members of another kind or another server."""
        self.writable()
        membership.check_group_name(group, new=True)
        return membership.claim(self.group_dir(group), group, info)


def _assignment(value: Any) -> list[dict[str, Any]]:
    """A details file's ``[[topic, [partition, ...]], ...]`` as assignment rows (unchecked
    content reads as nothing)."""
    out: list[dict[str, Any]] = []
    if isinstance(value, list):
        for item in value:
            if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], list)):
                out += [{"topic": item[0], "partition": p} for p in item[1]
                        if type(p) is int]
    return out


def write_plan(rows: list[ResetRow]) -> str:
    """Reset rows as a plan file (``topic,partition,offset`` lines of the new offsets)."""
    return "".join(f"{r['topic']},{r['partition']},{r['new']}\n" for r in rows)


def read_plan(source: str | os.PathLike[str], group: str) -> dict[tuple[str, int], int]:
    """The offsets a plan file (see the module docstring) sets for ``group``; InvalidArgument
    naming the file and line of anything else."""
    name = os.fspath(source)
    try:
        with open(name, "rb") as f:
            data = f.read(MAX_PLAN_BYTES + 1)
    except OSError as e:
        raise InvalidArgument(f"cannot read reset plan {name!r}: {e.strerror or e}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise InvalidArgument(f"reset plan {name!r} is larger than {MAX_PLAN_BYTES >> 20} MiB; "
                              "split it")
    out: dict[tuple[str, int], int] = {}
    others: set[str] = set()
    for n, raw in enumerate(data.split(b"\n"), 1):
        where = f"reset plan {name!r} line {n}"
        try:
            line = raw.decode().strip()
        except UnicodeDecodeError:
            raise InvalidArgument(f"{where}: not UTF-8 text") from None
        if not line or line.startswith("#"):
            continue
        cols = [c.strip() for c in line.split(",")] if "," in line else line.split()
        if len(cols) == 4:  # Kafka's form for several groups
            if cols[0] != group:
                others.add(cols[0])
                continue
            cols = cols[1:]
        if len(cols) != 3:
            raise InvalidArgument(f"{where}: {line[:80]!r} is not topic,partition,offset")
        topic, part, off = cols
        try:
            tp, offset = (topic, int(part)), int(off)
        except ValueError:
            raise InvalidArgument(f"{where}: {line[:80]!r}: partition and offset must be "
                                  "integers") from None
        if tp[1] < 0 or offset < 0:
            raise InvalidArgument(f"{where}: {line[:80]!r}: partition and offset must not be "
                                  "negative")
        if out.get(tp, offset) != offset:
            raise InvalidArgument(f"{where}: {topic}-{tp[1]} appears twice with different "
                                  f"offsets ({out[tp]} and {offset})")
        out[tp] = offset
    if not out:
        found = f" (it has rows for {', '.join(sorted(others)[:5])})" if others else ""
        raise InvalidArgument(f"reset plan {name!r} has no offsets for group {group!r}{found}")
    return out
