"""The group coordinator of Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), in memory on the event loop, as Kafka's broker GroupCoordinator runs it.

A group's states: Empty -> PreparingRebalance (members (re)join; a JoinGroup waits until
every known member has rejoined or the rebalance timeout passes; a new group waits
``group.initial.rebalance.delay.ms`` more for others) -> CompletingRebalance (a new
generation: the protocol every member supports, by the members' preferences; the leader got
every member's metadata and runs the client-side assignor; the others wait in SyncGroup) ->
Stable (the leader's SyncGroup handed each member its assignment). A member that sends no
heartbeat for its session timeout is removed, which starts a rebalance; so does a join, a
leave, a change of a member's protocols, and a member that does not sync within the
rebalance timeout. Dead: a deleted group. Static members (``group.instance.id``) keep their
place across restarts within their session timeout.

Committed offsets are the data dir's own group offsets (``eng.groups``, what ``rivven group
describe`` reads). While a group has members (or members asked to rejoin with the id they
were given) the server holds its mark in the data dir (``eng.groups.claim``: a member file
of kind kafka, flocked; group_marks.py), so native consumers of the group refuse to join and
other processes see the members; a group with live native members is refused here with
INCONSISTENT_GROUP_PROTOCOL. The group's state lives in this process only: after a restart,
members rejoin (their member ids are unknown: UNKNOWN_MEMBER_ID, and clients join anew). The
groups and members kept in memory are group_state.py's, the consumers' metadata and
assignments consumer_protocol.py's."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from . import codes
from .consumer_protocol import assignment_partitions, subscription_topics
from .consumer_protocol import encode_assignment as encode_assignment  # (api_groups, tests)
from .group_marks import Marks
from .group_state import (
    COMPLETING,
    CONSUMER,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    JoinResult,
    Member,
    SyncResult,
)

log = logging.getLogger("rivven.serve")

# a new member that joined and waits for the rebalance is removed after this long without
# rejoining (its JoinGroup was lost: Kafka's NewMemberJoinTimeoutMs)
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class Coordinator:
    """Every group of this server. Its methods run on the event loop; those that touch the
    data dir await the broker's thread pool."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.loop: asyncio.AbstractEventLoop = broker.loop
        self.cfg = broker.config
        self.groups: dict[str, Group] = {}
        self.closed = False
        self._commits: dict[str, set[asyncio.Future]] = {}  # commits on the thread pool
        self.marks = Marks(broker, self.loop, self._forget)  # (the groups in the data dir)

    # ------------------------------------------------------------ helpers
    def _later(self, ms: int, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return self.loop.call_later(max(0, ms) / 1000, fn, *args)

    def check_group_id(self, group_id: str | None) -> int:
        """INVALID_GROUP_ID for a name rivven cannot keep (empty, too long, control chars)."""
        return check_group_id(self.broker.engine, group_id)

    def _forget(self, group: Group) -> None:
        """An idle group out of memory (the data dir keeps its offsets)."""
        if group.idle() and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ------------------------------------------------------------ JoinGroup
    async def join(self, group_id: str, member_id: str, instance_id: str | None,
                   require_known: bool, client_id: str, host: str, session_ms: int,
                   rebalance_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   reason: str | None = None, skip_assignment_ok: bool = False) -> JoinResult:
        err = self.check_group_id(group_id)
        if err:
            return JoinResult(err, member_id)
        if self.closed:
            return JoinResult(codes.COORDINATOR_NOT_AVAILABLE, member_id)
        if not (self.cfg.group_min_session_timeout_ms <= session_ms
                <= self.cfg.group_max_session_timeout_ms):
            return JoinResult(codes.INVALID_SESSION_TIMEOUT, member_id)
        if not protocol_type or not protocols:
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id)
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id)
        if group.mark is None:
            group.busy += 1
            try:
                err = await self.marks.claim(group)
            finally:
                group.busy -= 1
            if err:
                self._forget(group)
                return JoinResult(err, member_id)
        if group.state == DEAD:
            return JoinResult(codes.COORDINATOR_NOT_AVAILABLE, member_id)
        if not self._accepts(group, member_id):
            return JoinResult(codes.GROUP_MAX_SIZE_REACHED, "")
        why = f"client reason: {reason or 'not provided'}"
        if unknown:
            out = self._join_new(group, instance_id, require_known, client_id, host,
                                 session_ms, rebalance_ms, protocol_type, protocols, why,
                                 skip_assignment_ok)
        else:
            out = self._join_known(group, member_id, instance_id, client_id, host, session_ms,
                                   rebalance_ms, protocol_type, protocols, why)
        if group.state == PREPARING:
            self._try_complete_join(group)
        if isinstance(out, JoinResult):
            return out
        return await out

    def _accepts(self, group: Group, member_id: str) -> bool:
        cap = self.cfg.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING:
            m = group.members.get(member_id)
            return (m is not None and m.join is not None) or group.awaiting_join() < cap
        return member_id in group.members or len(group.members) < cap

    def _join_new(self, group: Group, instance_id: str | None, require_known: bool,
                  client_id: str, host: str, session_ms: int, rebalance_ms: int,
                  protocol_type: str, protocols: list[tuple[str, bytes]], why: str,
                  skip_ok: bool) -> JoinResult | asyncio.Future:
        if not group.supports(protocol_type, [n for n, _ in protocols]):
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, "")
        new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old = group.static.get(instance_id)
            if old is not None:
                return self._replace_static(group, instance_id, old, new_id, session_ms,
                                            rebalance_ms, protocols, why, skip_ok)
        elif require_known:
            # (JoinGroup v4+: the member asks again with the id it is given)
            group.pending[new_id] = self._later(session_ms, self._expire_pending, group, new_id)
            self.marks.touch(group)
            return JoinResult(codes.MEMBER_ID_REQUIRED, new_id)
        return self._add_member(group, new_id, instance_id, client_id, host, session_ms,
                                rebalance_ms, protocol_type, protocols, why)

    def _join_known(self, group: Group, member_id: str, instance_id: str | None,
                    client_id: str, host: str, session_ms: int, rebalance_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]], why: str
                    ) -> JoinResult | asyncio.Future:
        if not group.supports(protocol_type, [n for n, _ in protocols]):
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending:
            if instance_id is not None:
                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)
            group.pending.pop(member_id).cancel()
            return self._add_member(group, member_id, None, client_id, host, session_ms,
                                    rebalance_ms, protocol_type, protocols, why)
        err = self._check_member(group, member_id, instance_id)
        if err:
            return JoinResult(err, member_id)
        m = group.members[member_id]
        if group.state == PREPARING:
            return self._update_member(group, m, protocols, session_ms, rebalance_ms,
                                       f"member {member_id} rejoins; {why}")
        if group.state == COMPLETING:
            if m.protocols == protocols:  # (it lost our answer: the same again)
                return self._join_answer(group, m)
            return self._update_member(group, m, protocols, session_ms, rebalance_ms,
                                       f"member {member_id} changed its metadata; {why}")
        if group.state == STABLE:
            if member_id == group.leader or m.protocols != protocols:
                # (the leader rejoins to have the group assigned anew, e.g. new partitions)
                return self._update_member(group, m, protocols, session_ms, rebalance_ms,
                                           f"member {member_id} rejoins a stable group; {why}")
            return JoinResult(codes.NONE, member_id, group.generation, group.protocol_type,
                              group.protocol_name, group.leader or "")
        return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)  # (Empty, Dead)

    def _check_member(self, group: Group, member_id: str, instance_id: str | None) -> int:
        """UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (another member holds that instance id), or
        NONE."""
        if instance_id is not None:
            current = group.static.get(instance_id)
            if current is None:
                return codes.UNKNOWN_MEMBER_ID
            if current != member_id:
                return codes.FENCED_INSTANCE_ID
        return codes.NONE if member_id in group.members else codes.UNKNOWN_MEMBER_ID

    def _add_member(self, group: Group, member_id: str, instance_id: str | None,
                    client_id: str, host: str, session_ms: int, rebalance_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]], why: str
                    ) -> asyncio.Future:
        m = Member(member_id, instance_id, client_id, host, session_ms, rebalance_ms,
                   protocol_type, protocols)
        if group.state == PREPARING and group.generation == 0:
            group.new_member_added = True
        if not group.members:
            group.protocol_type = protocol_type
        if instance_id is not None:
            group.static[instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        fut = m.join = self.loop.create_future()
        group.members[member_id] = m
        group.pending.pop(member_id, None)
        # a new member that loses its JoinGroup answer would stay for ever: it has this long
        self._expire_after(group, m, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.marks.touch(group)
        self._maybe_rebalance(group, f"member {member_id} joins; {why}")
        return fut

    def _update_member(self, group: Group, m: Member, protocols: list[tuple[str, bytes]],
                       session_ms: int, rebalance_ms: int, why: str) -> asyncio.Future:
        m.protocols, m.session_ms, m.rebalance_ms = protocols, session_ms, rebalance_ms
        if m.join is not None and not m.join.done():  # (an earlier JoinGroup it gave up on)
            m.join.set_result(JoinResult(codes.REBALANCE_IN_PROGRESS, m.member_id))
        fut = m.join = self.loop.create_future()
        self._maybe_rebalance(group, why)
        return fut

    def _replace_static(self, group: Group, instance_id: str, old_id: str, new_id: str,
                        session_ms: int, rebalance_ms: int, protocols: list[tuple[str, bytes]],
                        why: str, skip_ok: bool) -> JoinResult | asyncio.Future:
        """A static member back with a new member id (restarted): it takes its old place;
        the old id is fenced."""
        m = group.members.pop(old_id)
        for fut, res in ((m.join, JoinResult(codes.FENCED_INSTANCE_ID, old_id)),
                         (m.sync, SyncResult(codes.FENCED_INSTANCE_ID))):
            if fut is not None and not fut.done():
                fut.set_result(res)
        m.join = m.sync = None
        old_leader = group.leader
        m.member_id = new_id
        group.members[new_id] = m
        if group.leader == old_id:
            group.leader = new_id
        group.static[instance_id] = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._expire_after(group, m, m.session_ms)
        m.protocols, m.session_ms, m.rebalance_ms = protocols, session_ms, rebalance_ms
        self.marks.touch(group)
        if group.state == STABLE:
            if group.select_protocol() == group.protocol_name:
                # no rebalance: its assignment stands (v9+: the leader is told to skip it)
                leader = group.leader == new_id
                if skip_ok:
                    return self._join_answer(group, m, skip=leader)
                return JoinResult(codes.NONE, new_id, group.generation, group.protocol_type,
                                  group.protocol_name, old_leader or "")
            fut = m.join = self.loop.create_future()
            self._maybe_rebalance(group, f"static member {instance_id} rejoins with another "
                                         f"protocol; {why}")
            return fut
        fut = m.join = self.loop.create_future()
        if group.state == COMPLETING:
            self._prepare_rebalance(group, f"static member {instance_id} rejoins; {why}")
        return fut

    def _join_answer(self, group: Group, m: Member, skip: bool = False) -> JoinResult:
        leader = m.member_id == group.leader
        members = tuple((x.member_id, x.instance_id, x.metadata(group.protocol_name or ""))
                        for x in group.members.values()) if leader else ()
        return JoinResult(codes.NONE, m.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader or "", members, skip)

    # ------------------------------------------------------------ rebalancing
    def _maybe_rebalance(self, group: Group, why: str) -> None:
        if group.state in (EMPTY, COMPLETING, STABLE):
            self._prepare_rebalance(group, why)

    def _prepare_rebalance(self, group: Group, why: str) -> None:
        if group.state == COMPLETING:
            self._fail_syncs(group, codes.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        if group.state == EMPTY:
            delay = self.cfg.group_initial_rebalance_delay_ms
            group.initial_delay = True
            group.join_timer = self._later(delay, self._initial_join_due, group, delay,
                                           max(group.rebalance_ms() - delay, 0))
        else:
            group.initial_delay = False
            group.join_timer = self._later(group.rebalance_ms(), self._complete_join, group)
        log.info("group %s: rebalancing from generation %d (%s)", group.group_id,
                 group.generation, why)
        group.state = PREPARING
        self.marks.touch(group)
        self._try_complete_join(group)

    def _initial_join_due(self, group: Group, delay: int, remaining: int) -> None:
        """group.initial.rebalance.delay.ms passed: wait once more while members still come
        (at most the rebalance timeout in all), else complete the join."""
        if group.state != PREPARING:
            return
        if group.new_member_added and remaining:
            group.new_member_added = False
            wait = min(self.cfg.group_initial_rebalance_delay_ms, remaining)
            group.join_timer = self._later(wait, self._initial_join_due, group, wait,
                                           max(remaining - delay, 0))
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state == PREPARING and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Every member rejoined or the rebalance timeout passed: the next generation."""
        if group.state != PREPARING:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        for m in [m for m in group.members.values() if m.join is None and m.instance_id is None]:
            log.info("group %s: member %s did not rejoin in time: removed", group.group_id,
                     m.member_id)
            self._drop(group, m)
        if group.members and not self._elect_joined_leader(group):
            # nobody rejoined (static members kept): wait again, their sessions end it
            group.join_timer = self._later(group.rebalance_ms(), self._complete_join, group)
            return
        group.generation += 1
        group.pending_sync.clear()
        if not group.members:
            group.state, group.protocol_name, group.leader = EMPTY, None, None
            group.topics = set()
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            self.marks.touch(group)
            return
        group.protocol_name = group.select_protocol()
        group.state = COMPLETING
        group.topics = self._subscribed(group)
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s",
                 group.group_id, group.generation, len(group.members), group.protocol_name,
                 group.leader)
        for m in group.members.values():
            fut, m.join = m.join, None
            if fut is not None and not fut.done():
                fut.set_result(self._join_answer(group, m))
            m.is_new = False
            m.assigned = None
            self._expire_after(group, m, m.session_ms)
            group.pending_sync.add(m.member_id)
        group.sync_timer = self._later(group.rebalance_ms(), self._sync_due, group,
                                       group.generation)
        self.marks.touch(group)

    def _elect_joined_leader(self, group: Group) -> bool:
        leader = group.members.get(group.leader or "")
        if leader is not None and leader.join is not None:
            return True
        joined = next((m for m in group.members.values() if m.join is not None), None)
        if joined is None:
            return False
        group.leader = joined.member_id
        return True

    def _subscribed(self, group: Group) -> set[str] | None:
        if group.protocol_type != CONSUMER or group.protocol_name is None:
            return None
        out: set[str] = set()
        for m in group.members.values():
            topics = subscription_topics(m.metadata(group.protocol_name))
            if topics is None:
                return None  # (metadata we cannot read: every topic counts as subscribed)
            out |= topics
        return out

    def _sync_due(self, group: Group, generation: int) -> None:
        """The rebalance timeout passed after the join: members that never synced go."""
        group.sync_timer = None
        if generation != group.generation or group.state not in (COMPLETING, STABLE):
            return
        late = [group.members[i] for i in group.pending_sync if i in group.members]
        if not late:
            return
        for m in late:
            log.info("group %s: member %s did not sync in time: removed", group.group_id,
                     m.member_id)
            self._drop(group, m)
        self._prepare_rebalance(group, "members did not sync in time")

    def _cancel_sync_timer(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _fail_syncs(self, group: Group, error: int) -> None:
        for m in group.members.values():
            m.assignment, m.assigned = b"", None
            fut, m.sync = m.sync, None
            if fut is not None and not fut.done():
                fut.set_result(SyncResult(error))

    # ------------------------------------------------------------ members leaving
    def _expire_after(self, group: Group, m: Member, ms: int) -> None:
        if m.expiry is not None:
            m.expiry.cancel()
        m.expiry = self._later(ms, self._expire, group, m)

    def _expire(self, group: Group, m: Member) -> None:
        m.expiry = None
        if group.state == DEAD or group.members.get(m.member_id) is not m:
            return
        if not m.is_new and (m.join is not None or m.sync is not None):
            # waiting for a rebalance counts as a heartbeat (Kafka's hasSatisfiedHeartbeat)
            self._expire_after(group, m, m.session_ms)
            return
        log.info("group %s: member %s sent no heartbeat for %d ms: removed", group.group_id,
                 m.member_id, m.session_ms)
        self._remove(group, m, "session timeout")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self.marks.touch(group)
            self._try_complete_join(group)

    def _drop(self, group: Group, m: Member) -> None:
        """``m`` out of the group (its waiting JoinGroup answered UNKNOWN_MEMBER_ID)."""
        for fut, res in ((m.join, JoinResult(codes.UNKNOWN_MEMBER_ID, "")),
                         (m.sync, SyncResult(codes.UNKNOWN_MEMBER_ID))):
            if fut is not None and not fut.done():
                fut.set_result(res)
        m.join = m.sync = None
        if m.expiry is not None:
            m.expiry.cancel()
            m.expiry = None
        group.members.pop(m.member_id, None)
        if m.instance_id is not None and group.static.get(m.instance_id) == m.member_id:
            del group.static[m.instance_id]
        if group.leader == m.member_id:
            group.leader = next(iter(group.members), None)
        group.pending_sync.discard(m.member_id)
        self.marks.touch(group)

    def _remove(self, group: Group, m: Member, why: str) -> None:
        self._drop(group, m)
        if group.state in (STABLE, COMPLETING):
            self._maybe_rebalance(group, f"member {m.member_id} left ({why})")
        elif group.state == PREPARING:
            self._try_complete_join(group)

    # ------------------------------------------------------------ SyncGroup
    async def sync(self, group_id: str, generation: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]) -> SyncResult:
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(codes.UNKNOWN_MEMBER_ID)
        if group.state == DEAD:
            return SyncResult(codes.COORDINATOR_NOT_AVAILABLE)
        err = self._check_member(group, member_id, instance_id)
        if not err and generation != group.generation:
            err = codes.ILLEGAL_GENERATION
        if not err and ((protocol_type is not None and protocol_type != group.protocol_type)
                        or (protocol_name is not None
                            and protocol_name != group.protocol_name)):
            err = codes.INCONSISTENT_GROUP_PROTOCOL
        if err:
            return SyncResult(err)
        if group.state == EMPTY:
            return SyncResult(codes.UNKNOWN_MEMBER_ID)
        if group.state == PREPARING:
            return SyncResult(codes.REBALANCE_IN_PROGRESS)
        m = group.members[member_id]
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_sync_timer(group)
        if group.state == STABLE:
            self._expire_after(group, m, m.session_ms)
            return SyncResult(codes.NONE, group.protocol_type, group.protocol_name, m.assignment)
        if m.sync is not None and not m.sync.done():
            m.sync.set_result(SyncResult(codes.REBALANCE_IN_PROGRESS))
        fut = m.sync = self.loop.create_future()
        if member_id == group.leader:
            missing = [i for i in group.members if i not in assignments]
            if missing:
                log.warning("group %s: the leader's assignment leaves out %s: they get none",
                            group.group_id, ", ".join(missing[:5]))
            for x in group.members.values():
                x.assignment = assignments.get(x.member_id, b"")
                x.assigned = (assignment_partitions(x.assignment)
                              if group.protocol_type == CONSUMER else None)
            group.state = STABLE
            log.info("group %s: generation %d is stable", group.group_id, group.generation)
            for x in group.members.values():
                f, x.sync = x.sync, None
                if f is not None and not f.done():
                    f.set_result(SyncResult(codes.NONE, group.protocol_type,
                                            group.protocol_name, x.assignment))
                    self._expire_after(group, x, x.session_ms)
            self.marks.touch(group)
        return await fut

    # ------------------------------------------------------------ Heartbeat, LeaveGroup
    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return codes.UNKNOWN_MEMBER_ID
        if group.state == DEAD:
            return codes.COORDINATOR_NOT_AVAILABLE
        err = self._check_member(group, member_id, instance_id)
        if err:
            return err
        if generation != group.generation:
            return codes.ILLEGAL_GENERATION
        if group.state == EMPTY:
            return codes.UNKNOWN_MEMBER_ID
        m = group.members[member_id]
        self._expire_after(group, m, m.session_ms)
        return codes.REBALANCE_IN_PROGRESS if group.state == PREPARING else codes.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]
              ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """Members out: (top-level error, per member (member id, instance id, error))."""
        group = self.groups.get(group_id)
        if group is None:
            return codes.NONE, [(i, s, codes.UNKNOWN_MEMBER_ID) for i, s in leaving]
        if group.state == DEAD:
            return codes.COORDINATOR_NOT_AVAILABLE, []
        out: list[tuple[str, str | None, int]] = []
        for asked, instance_id in leaving:
            member_id = asked  # (the answer names each member as the request did)
            if not member_id and instance_id is not None:  # (an admin's removal by instance)
                current = group.static.get(instance_id)
                if current is None:
                    out.append((asked, instance_id, codes.UNKNOWN_MEMBER_ID))
                    continue
                member_id = current
            elif member_id in group.pending:
                group.pending.pop(member_id).cancel()
                self.marks.touch(group)
                self._try_complete_join(group)
                out.append((member_id, instance_id, codes.NONE))
                continue
            else:
                err = self._check_member(group, member_id, instance_id)
                if err:
                    out.append((member_id, instance_id, err))
                    continue
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove(group, group.members[member_id], "LeaveGroup")
            out.append((asked, instance_id, codes.NONE))
        return codes.NONE, out

    # ------------------------------------------------------------ offsets, admin
    def check_commit(self, group_id: str, generation: int, member_id: str,
                     instance_id: str | None, transactional: bool = False) -> int | None:
        """May these commit the group's offsets? An error code; NONE for a member of the
        current generation (its session renewed); None for a group this server does not
        hold (a commit from outside group management: the caller checks that no other
        process's members hold the group; a generation >= 0: ILLEGAL_GENERATION)."""
        group = self.groups.get(group_id)
        if group is None:
            return codes.ILLEGAL_GENERATION if generation >= 0 else None
        if group.state == DEAD:
            return codes.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state == EMPTY:
            return codes.NONE
        if generation >= 0 or member_id or instance_id is not None:
            err = self._check_member(group, member_id, instance_id)
            if err:
                return err
            if generation != group.generation:
                return codes.ILLEGAL_GENERATION
        elif not transactional and group.state != EMPTY:
            return codes.UNKNOWN_MEMBER_ID
        if transactional:
            return codes.NONE
        if group.state == COMPLETING:
            return codes.REBALANCE_IN_PROGRESS
        m = group.members.get(member_id)
        if m is not None:
            self._expire_after(group, m, m.session_ms)
        return codes.NONE

    def validate_txn_commit(self, group_id: str, member_id: str, generation: int,
                            instance_id: str | None) -> int:
        """TxnOffsetCommit's check (KIP-447), called from the thread pool: run on the event
        loop, which owns the groups; a group this server does not hold: NONE."""
        async def check() -> int | None:
            return self.check_commit(group_id, generation, member_id, instance_id,
                                     transactional=True)

        code = asyncio.run_coroutine_threadsafe(check(), self.loop).result(30)
        return codes.NONE if code is None else code

    def states(self) -> dict[str, int]:
        """Groups by state (the ``rivven_kafka_groups`` gauge)."""
        out: dict[str, int] = {}
        for g in list(self.groups.values()):
            out[g.state] = out.get(g.state, 0) + 1
        return out

    async def store(self, group_id: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` (a commit of the group's offsets) on the thread pool, known to
        ``settled`` until it is done."""
        fut = self.loop.run_in_executor(self.broker.pool, fn)
        running = self._commits.setdefault(group_id, set())
        running.add(fut)
        try:
            return await fut
        finally:
            running.discard(fut)
            if not running and self._commits.get(group_id) is running:
                del self._commits[group_id]

    async def settled(self, group_id: str) -> None:
        """Once the group's commits that are under way are done: an OffsetFetch then sees
        them (a member that lost a partition in a rebalance may be committing it while its
        new owner fetches where to start)."""
        running = self._commits.get(group_id)
        if running:
            await asyncio.wait(list(running))

    def live(self, group_id: str) -> Group | None:
        """The group, when this server holds it with members (or mid-join)."""
        group = self.groups.get(group_id)
        return group if group is not None and (group.has_members()
                                               or group.state != EMPTY) else None

    def subscribed(self, group_id: str, topic: str) -> bool:
        group = self.live(group_id)
        if group is None:
            return False
        return group.topics is None or topic in group.topics

    async def locked(self, group_id: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the thread pool while no JoinGroup can claim the group (DeleteGroups:
        the group's files go while nobody can join)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        group.busy += 1
        try:
            async with group.mark_lock:
                if group.has_members():
                    raise NotEmpty
                return await self.broker.call(fn)
        finally:
            group.busy -= 1
            self._forget(group)

    def close(self) -> None:
        """The server stops: every waiting JoinGroup and SyncGroup answered (clients come
        back to another server); the marks go with the process."""
        self.closed = True
        for group in self.groups.values():
            for m in group.members.values():
                for fut, res in ((m.join, JoinResult(codes.COORDINATOR_NOT_AVAILABLE, "")),
                                 (m.sync, SyncResult(codes.COORDINATOR_NOT_AVAILABLE))):
                    if fut is not None and not fut.done():
                        fut.set_result(res)
            self.marks.release(group)


def check_group_id(engine: Any, group_id: str | None) -> int:
    if not group_id:
        return codes.INVALID_GROUP_ID
    try:
        engine.groups.check_name(group_id)
    except InvalidArgument:
        return codes.INVALID_GROUP_ID
    return codes.NONE


class NotEmpty(Exception):
    """DeleteGroups of a group with members."""


def client_host(peer: str) -> str:
    """Kafka's form of a client's address (``/127.0.0.1``)."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return "/" + host.strip("[]")

