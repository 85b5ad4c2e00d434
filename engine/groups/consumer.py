"""``Consumer``: reads a set of topics as a member of a consumer group.

Partitions are split between the live members of the group (round robin over the sorted
topic-partitions, members sorted by id), and a member reads a partition only while it holds
the partition's lease (engine.groups.membership): during a change of membership the old owner
commits and lets go before the new owner starts, so no record is handed to two members while both run.
A member that dies loses its leases with its process; the others take its partitions over
within ``HEARTBEAT_S`` from its last committed offsets.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice, repeat
from typing import Any, NamedTuple, Protocol

from ..counters.meter import Meter
from ..crypto.topic import OffsetMetadata
from ..errors import (
    CorruptRecordError,
    InvalidArgument,
    OffsetOutOfRange,
    ReadOnlyError,
    UnknownTopic,
)
from ..format.records import ColumnBatch
from ..fs.locks import DEFAULT_WAIT, LockWait
from ..storage.reader import Reach
from . import membership
from .offset_store import OffsetStore

log = logging.getLogger("rivven.consumer")
HEARTBEAT_S = 0.5  # how often a member re-checks who is alive (a crash changes no mtime)
LEASE_RETRY_S = 0.05  # how often it retries a lease another member still holds
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
POLICIES = ("earliest", "latest", "none")

TopicPartition = tuple[str, int]


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


_new_tuple = tuple.__new__


class Source(Protocol):
    """What a consumer reads through (engine.Engine is one)."""

    path: str
    read_only: bool

    def topic(self, name: str) -> Any: ...  # .partitions; raises UnknownTopic

    @property
    def offsets(self) -> Any: ...  # engine.fetch.offsets.Offsets: of_partition(topic, p, level)

    def read_columns(self, topic: str, partition: int, offset: int, max_records: int,
                     isolation_level: str = "read_uncommitted", reach: Reach | None = None
                     ) -> Iterator[tuple[Any, Any, list, list, Any]]: ...


def _records(batches: list[ColumnBatch]) -> list[ConsumerRecord]:
    return list(chain.from_iterable(
        map(_new_tuple, repeat(ConsumerRecord),
            zip(repeat(b.topic), repeat(b.partition), b.offsets, b.timestamps, b.keys, b.values,
                b.headers)) for b in batches))


def assign(members: list[dict[str, Any]], partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Round robin over sorted topic-partitions, each to the next member subscribed to it
    (native members only: a server's mark of a Kafka-protocol group reads nothing here)."""
    members = [m for m in members if membership.kind(m) == membership.NATIVE]
    ids = sorted(m["member_id"] for m in members)
    subs = {m["member_id"]: set(m.get("topics", ())) for m in members}
    out: dict[str, list[TopicPartition]] = {i: [] for i in ids}
    turn = 0
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            for k in range(len(ids)):
                mid = ids[(turn + k) % len(ids)]
                if topic in subs[mid]:
                    out[mid].append((topic, p))
                    turn = (turn + k + 1) % len(ids)
                    break
    return out


class Consumer:
    """Iterate (``for rec in consumer``) or ``poll()`` records of ``topics`` as a member of
    ``group``, from the group's committed offsets.

    ``auto_offset_reset`` says where to start a partition that has no committed offset, or
    whose committed offset is no longer in the log (``"none"`` raises OffsetOutOfRange
    instead); such resets are logged on ``rivven.consumer`` and passed to ``on_reset``, and
    the position a reset gives is committed at once (with auto-commit or without): the group
    remembers where it started even if this member reads nothing, stops or dies. (Kafka
    commits it with the member's first commit; sooner changes nothing a commit protects, as
    every record from that position on is still to be read.)
    With ``enable_auto_commit`` the positions are committed every ``auto_commit_interval_ms``,
    when a partition moves to another member, and on ``close()``.
    """

    def __init__(self, engine: Source, group: str, topics: str | Iterable[str],
                 auto_offset_reset: str = "earliest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, member_id: str | None = None,
                 client_id: str = "rivven", max_poll_records: int = 500,
                 consumer_timeout_ms: int | None = None,
                 on_reset: Callable[[dict[str, Any]], None] | None = None,
                 sync_commits: bool = True,
                 on_close: Callable[[Consumer], None] | None = None,
                 lock_wait: LockWait = DEFAULT_WAIT,
                 settle: Callable[[str], None] | None = None,
                 isolation_level: str = "read_uncommitted",
                 metadata: OffsetMetadata | None = None, meter: Meter | None = None) -> None:
        if engine.read_only:
            raise ReadOnlyError("a group consumer commits offsets: open the engine writable")
        if auto_offset_reset not in POLICIES:
            raise InvalidArgument(f"auto_offset_reset must be one of {', '.join(POLICIES)}, "
                                  f"not {auto_offset_reset!r}")
        if max_poll_records < 1:
            raise InvalidArgument("max_poll_records must be at least 1")
        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidArgument(f"isolation_level must be read_uncommitted (the default) or "
                                  f"read_committed, not {isolation_level!r}")
        # read_committed: reads stop at the last stable offset and skip aborted transactions;
        # "latest" and seek_to_end mean the last stable offset
        self._iso: dict[str, Any] = {"isolation_level": isolation_level}
        self.topics = [topics] if isinstance(topics, str) else sorted(set(topics))
        if not self.topics:
            raise InvalidArgument("subscribe to at least one topic")
        for t in self.topics:
            engine.topic(t)  # exists?
        # every name is checked before anything is made on disk
        membership.check_group_name(group, new=True)
        membership.check_member_id(client_id, "client id", membership.MAX_CLIENT_CHARS,
                                   membership.MAX_CLIENT_BYTES)
        if member_id is not None:
            membership.check_member_id(member_id)
        self.engine = engine
        self.group = group
        self.gdir = membership.group_dir(engine.path, group)
        self.policy = auto_offset_reset
        self.auto_commit = enable_auto_commit
        self.commit_interval = auto_commit_interval_ms / 1000
        self.max_poll_records = max_poll_records
        self.timeout_ms = consumer_timeout_ms
        self.on_reset = on_reset
        # (an encrypted topic's commit metadata is sealed: engine.crypto.topic.OffsetMetadata)
        self.store = OffsetStore(self.gdir, sync=sync_commits, lock_wait=lock_wait,
                                 seal=functools.partial(metadata.seal, group)
                                 if metadata is not None else None)
        self._on_close = on_close
        m = meter if meter is not None else Meter(None, enabled=False)
        self._commits = m.get("rivven_group_commits_total", group=group)
        self._rebalances = m.get("rivven_group_rebalances_total", group=group)
        # finishes transactions that committed offsets of this group but were cut short
        # before writing them (engine.txn.coordinator.settle_group): called before the
        # committed offsets of a partition just taken over are read
        self._settle = settle
        self.member = membership.Member(self.gdir, member_id,
                                        {"client_id": client_id, "topics": self.topics})
        self.member_id = self.member.member_id
        self.leases = membership.Leases(self.gdir, self.member_id)
        self.resets: list[dict[str, Any]] = []
        self._unsaved_resets: dict[TopicPartition, int] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._wanted: list[TopicPartition] = []
        self._stamp = -1
        self._next_heartbeat = 0.0
        self._next_lease_try = 0.0
        self._next_commit = time.monotonic() + self.commit_interval
        self._turn = 0
        self._buffer: list[ConsumerRecord] = []
        self._rest: dict[TopicPartition, tuple] = {}
        # (from, to): markers or aborted batches fill [from, to); once the position is at
        # ``from`` (every record before it handed out) it steps to ``to``, as Kafka's does
        self._gaps: dict[TopicPartition, tuple[int, int]] = {}
        self._buffered = 0
        self.closed = False
        try:
            # a group with live Kafka-protocol members (rivven serve) is refused: one kind
            # at a time (the server looks for native members after its mark, as we do here)
            membership.refuse_kafka_members(self.gdir, group, self.member_id)
            self._rebalance(force=True)
        except BaseException:
            # the caller gets no consumer to close: leave the group now, else this member
            # stays live (and keeps its leases) until the engine closes
            self.closed = True
            self.leases.release_all()
            self.member.close()
            raise

    # ---------------------------------------------------------------- membership
    def assignment(self) -> list[TopicPartition]:
        """The partitions this member reads now (leases held)."""
        return sorted(self._positions)

    def _rebalance(self, force: bool = False) -> None:
        now = time.monotonic()
        stamp = membership.members_stamp(self.gdir)
        if force or stamp != self._stamp or now >= self._next_heartbeat:
            self._stamp = stamp
            self._next_heartbeat = now + HEARTBEAT_S
            members = membership.live_members(self.gdir)
            parts = {}
            for t in self.topics:
                try:
                    parts[t] = self.engine.topic(t).partitions
                except UnknownTopic:
                    pass  # deleted: its partitions are nobody's
            plan = assign(members, parts)
            wanted_now = plan.get(self.member_id, [])
            if wanted_now != self._wanted:
                self._rebalances.inc()
            self._wanted = wanted_now
            wanted = set(self._wanted)
            for tp in [tp for tp in self._positions if tp not in wanted]:
                self._revoke(tp)
        elif now < self._next_lease_try:
            return
        missing = [tp for tp in self._wanted if tp not in self._positions]
        if missing:
            self._next_lease_try = now + LEASE_RETRY_S
            committed = None
            for tp in missing:
                if self.leases.acquire(*tp):
                    if committed is None:  # read after the lease: the last owner's final commit
                        if self._settle is not None:
                            self._settle(self.group)
                        committed = self.store.refresh()
                    c = committed.get(tp)
                    self._positions[tp] = self._start(tp, None if c is None else c.offset)
                    self._committed[tp] = -1 if c is None else c.offset
            self._save_resets()

    def _revoke(self, tp: TopicPartition) -> None:
        if self.auto_commit and self._positions.get(tp, -1) != self._committed.get(tp, -1):
            self.store.commit({tp: self._positions[tp]})
        self._positions.pop(tp, None)
        self._committed.pop(tp, None)
        self._rest.pop(tp, None)
        self._gaps.pop(tp, None)
        self.leases.release(*tp)

    def _start(self, tp: TopicPartition, committed: int | None) -> int:
        start, end = self.engine.offsets.of_partition(*tp)
        if committed is not None and start <= committed <= end:
            return committed
        return self._reset(tp, committed, start, self.engine.offsets.of_partition(*tp, **self._iso)[1])

    def _reset(self, tp: TopicPartition, prior: int | None, start: int, end: int) -> int:
        if prior is not None or self.policy == "none":
            why = ("has no committed offset" if prior is None else
                   f"offset {prior} is out of range {start}..{end}")
            if self.policy == "none":
                raise OffsetOutOfRange(f"group {self.group!r}: {tp[0]}-{tp[1]} {why} and "
                                       "auto_offset_reset is 'none'; reset the group's offsets",
                                       start, end)
        new = start if self.policy == "earliest" else end
        event = {"group": self.group, "topic": tp[0], "partition": tp[1], "prior": prior,
                 "new": new, "policy": self.policy,
                 "reason": "no-commit" if prior is None else "out-of-range"}
        self.resets.append(event)
        if prior is not None:
            log.warning("group %s: %s-%d offset %d is out of range %d..%d; reset to %s (%d)",
                        self.group, tp[0], tp[1], prior, start, end, self.policy, new)
        if self.on_reset is not None:
            self.on_reset(event)
        self._unsaved_resets[tp] = new
        return new

    def _save_resets(self) -> None:
        """Commit the positions resets gave (one commit for all), while the leases are held."""
        if self._unsaved_resets:
            saved = {tp: o for tp, o in self._unsaved_resets.items() if tp in self._positions}
            self._unsaved_resets = {}
            if saved:
                self.store.commit(saved)
                self._committed.update(saved)

    # ---------------------------------------------------------------- reading
    def _fetch(self, max_records: int) -> list[ColumnBatch]:
        """Column batches from the current positions (positions move only over markers and
        aborted batches: past the records returned when those are handed out)."""
        self._rebalance()
        if self._gaps:
            self._step_over_gaps()
        tps = self.assignment()
        out: list[ColumnBatch] = []
        if not tps:
            return out
        self._turn = (self._turn + 1) % len(tps)
        want = max_records
        for tp in tps[self._turn:] + tps[:self._turn]:
            if want <= 0:
                break
            topic, p = tp
            pos = self._positions[tp]
            rest = self._rest.pop(tp, None)
            reach = None
            got = want
            try:
                if rest is not None and rest[0][0] == pos:  # the batch decoded last time
                    batches: Iterable = [rest]
                else:
                    reach = Reach(pos)
                    batches = self.engine.read_columns(topic, p, pos, want, reach=reach,
                                                       **self._iso)
                for offs, tss, keys, values, hs in batches:
                    n = len(keys)
                    lo = bisect_left(offs, pos) if n and offs[0] < pos else 0
                    hi = min(n, lo + want)
                    if hi <= lo:
                        continue
                    if lo or hi < n:
                        tss, hs = list(islice(tss, 0, n)), list(islice(hs, 0, n))
                        if hi < n:  # keep the decoded rest for the next fetch
                            self._rest[tp] = (offs[hi:], tss[hi:], keys[hi:], values[hi:],
                                              hs[hi:])
                        offs, keys, values = offs[lo:hi], keys[lo:hi], values[lo:hi]
                        tss, hs = tss[lo:hi], hs[lo:hi]
                    out.append(ColumnBatch(topic, p, offs, tss, keys, values, hs))
                    want -= hi - lo
                    pos = offs[-1] + 1
                    if want <= 0:
                        break
                if reach is not None:
                    if want == got:  # no record: nothing before reach.end to hand out
                        if reach.end > pos:
                            self._positions[tp] = reach.end
                    elif reach.end > reach.start:
                        self._gaps[tp] = (reach.start, reach.end)
            except CorruptRecordError as e:
                if want < got or out:
                    break  # (hand out what was read: the next fetch reaches the damage again)
                raise _damaged(e, self.group, topic, p) from None
            except OffsetOutOfRange as e:
                start, end = (e.start, e.end) if e.start is not None and e.end is not None \
                    and self._iso["isolation_level"] == "read_uncommitted" else \
                    self.engine.offsets.of_partition(topic, p, **self._iso)
                self._positions[tp] = self._reset(tp, pos, start, end)
        self._save_resets()
        return out

    def poll_batches(self, timeout_ms: int = 0, max_records: int | None = None
                     ) -> list[ColumnBatch]:
        """Like ``poll`` but as column batches (one partition each): the cheap way to stream."""
        self._check_open()
        if self._buffered < len(self._buffer):  # records the iterator has not handed out
            recs = self._take_buffer()
            return [ColumnBatch(r.topic, r.partition, [r.offset], [r.timestamp], [r.key],
                                [r.value], [r.headers]) for r in recs] if recs else []
        deadline = time.monotonic() + timeout_ms / 1000
        pause = 0.005
        while True:
            self._maybe_autocommit()  # what earlier polls returned, never what this one does
            batches = self._fetch(max_records or self.max_poll_records)
            for b in batches:
                self._positions[(b.topic, b.partition)] = b.offsets[-1] + 1
            if self._gaps:
                self._step_over_gaps()
            left = deadline - time.monotonic()
            if batches or left <= 0:
                return batches
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout_ms`` for some; the
        positions move past every record returned."""
        self._check_open()
        if self._buffered < len(self._buffer):
            recs = self._take_buffer()
            for r in recs:
                self._positions[(r.topic, r.partition)] = r.offset + 1
            if recs:
                return recs
        return _records(self.poll_batches(timeout_ms, max_records))

    def _take_buffer(self) -> list[ConsumerRecord]:
        rest = self._buffer[self._buffered:]
        self._buffer, self._buffered = [], 0
        return [r for r in rest if (r.topic, r.partition) in self._positions]

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> ConsumerRecord:
        if self._buffered < len(self._buffer):
            r = self._buffer[self._buffered]
            self._buffered += 1
            self._positions[(r.topic, r.partition)] = r.offset + 1
            return r
        self._check_open()
        deadline = None if self.timeout_ms is None else time.monotonic() + self.timeout_ms / 1000
        pause = 0.005
        while True:
            self._maybe_autocommit()
            self._buffer, self._buffered = _records(self._fetch(self.max_poll_records)), 0
            if self._buffer:
                return self.__next__()
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration
            time.sleep(pause if deadline is None else max(0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)

    # ---------------------------------------------------------------- positions
    def _step_over_gaps(self) -> None:
        for tp, (at, to) in list(self._gaps.items()):
            pos = self._positions.get(tp)
            if pos is None or pos >= at:
                del self._gaps[tp]
                if pos == at:
                    self._positions[tp] = to

    def _owned(self, topic: str, partition: int) -> TopicPartition:
        tp = (topic, partition)
        if tp not in self._positions:
            raise InvalidArgument(f"{topic}-{partition} is not assigned to this consumer (member "
                                  f"{self.member_id}); it reads {self.assignment()}")
        return tp

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record this consumer returns from that partition (past any
        transaction markers that follow the records handed out)."""
        tp = self._owned(topic, partition)
        if self._gaps:
            self._step_over_gaps()
        return self._positions[tp]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read that partition from ``offset`` next (checked against the log's range)."""
        tp = self._owned(topic, partition)
        start, end = self.engine.offsets.of_partition(topic, partition)
        if not isinstance(offset, int) or not start <= offset <= end:
            raise OffsetOutOfRange(f"cannot seek {topic}-{partition} to {offset}: valid offsets "
                                   f"are {start}..{end}", start, end)
        self._drop_buffered(tp)
        self._rest.pop(tp, None)
        self._gaps.pop(tp, None)
        self._positions[tp] = offset

    def seek_to_beginning(self, topic: str, partition: int) -> None:
        self.seek(topic, partition, self.engine.offsets.of_partition(topic, partition)[0])

    def seek_to_end(self, topic: str, partition: int) -> None:
        """Read from the end next (read_committed: from the last stable offset)."""
        self.seek(topic, partition,
                  self.engine.offsets.of_partition(topic, partition, **self._iso)[1])

    def _drop_buffered(self, tp: TopicPartition) -> None:
        rest = [r for r in self._buffer[self._buffered:] if (r.topic, r.partition) != tp]
        self._buffer, self._buffered = rest, 0

    def committed(self, topic: str, partition: int) -> int | None:
        c = self.store.refresh().get((topic, partition))
        return None if c is None else c.offset

    def commit(self, offsets: dict[TopicPartition, int] | None = None, metadata: str = "") -> None:
        """Durably commit ``offsets`` (default: the current positions) for this group."""
        self._check_open()
        if offsets is None:
            if self._gaps:
                self._step_over_gaps()
            offsets = {tp: p for tp, p in self._positions.items()
                       if p != self._committed.get(tp, -1)}
        else:
            for tp in offsets:
                self._owned(*tp)
        if offsets:
            self.store.commit(offsets, metadata)
            self._commits.inc()
            self._committed.update(offsets)

    def _maybe_autocommit(self) -> None:
        if self.auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.commit_interval
            self.commit()

    def _check_open(self) -> None:
        if self.closed:
            raise InvalidArgument("this consumer is closed")

    def close(self) -> None:
        """Commit (with auto-commit), give the partitions back and leave the group."""
        if self.closed:
            return
        try:
            if self.auto_commit:
                self.commit()
        finally:
            self.closed = True
            self.leases.release_all()
            self.member.close()
            if self._on_close is not None:
                self._on_close(self)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Consumer(group={self.group!r}, member={self.member_id!r}, pid={os.getpid()})"


def _damaged(e: CorruptRecordError, group: str, topic: str, partition: int) -> CorruptRecordError:
    """``e`` (a read that reached a damaged batch: engine.storage.reader) with the way past it
    for a group's consumers: its committed offset moved past the damage."""
    nxt = getattr(e, "next_offset", None)  # (a DamagedRange's: where reading can go on)
    if nxt is None:
        return e
    e.args = (f"{e}; the group's consumers go past it with 'rivven group reset-offsets {group} "
              f"--topic {topic}:{partition} --to-offset {nxt} --execute'", *e.args[1:])
    return e
