"""A classic group as the coordinator (groups.py) keeps it in memory: its states, its
members (``Member``: protocols, sessions, the JoinGroup and SyncGroup waiting), the group
(``Group``: generation, leader, timers, its mark in the data dir) and what a JoinGroup and a
SyncGroup answer (``JoinResult``, ``SyncResult``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import clock

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER = "consumer"  # the protocol type of Kafka's consumers (ConsumerProtocol metadata)


class JoinResult(NamedTuple):
    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (id, instance id, metadata)
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    session_ms: int
    rebalance_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    joined_ms: int = field(default_factory=clock.now_ms)
    join: asyncio.Future | None = None  # its JoinGroup, waiting for the rebalance
    sync: asyncio.Future | None = None  # its SyncGroup, waiting for the leader's
    assignment: bytes = b""
    assigned: list[tuple[str, list[int]]] | None = None  # decoded (consumer protocol)
    is_new: bool = True
    expiry: asyncio.TimerHandle | None = None

    def names(self) -> list[str]:
        return [n for n, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        return next(n for n in self.names() if n in candidates)


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)  # MEMBER_ID_REQUIRED
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_timer: asyncio.TimerHandle | None = None
    initial_delay: bool = False  # the join timer is group.initial.rebalance.delay.ms's
    sync_timer: asyncio.TimerHandle | None = None
    topics: set[str] | None = field(default_factory=set)  # subscribed (None: not known)
    mark: Any = None  # eng.groups.claim's ProtocolMark while the group has members
    mark_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    writer: asyncio.Task | None = None
    dirty: bool = False
    busy: int = 0  # requests waiting on the group's data dir work: it stays in memory


    def rebalance_ms(self) -> int:
        return max((m.rebalance_ms for m in self.members.values()), default=0)

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join is not None)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending

    def candidates(self) -> set[str]:
        sets = [set(m.names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if self.state == EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        return (protocol_type == self.protocol_type
                and any(n in self.candidates() for n in names))

    def select_protocol(self) -> str:
        """The protocol every member supports with the most members' first choice among them
        (a tie: the one voted for first, in joining order)."""
        candidates = self.candidates()
        votes: dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        return max(votes, key=lambda n: votes[n])  # (max keeps the first of a tie)

    def has_members(self) -> bool:
        return bool(self.members or self.pending)

    def idle(self) -> bool:
        """Nothing to keep in memory: no member, no request at work, no mark, Empty."""
        return (not self.has_members() and not self.busy and self.mark is None
                and self.state == EMPTY)
