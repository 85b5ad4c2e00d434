"""The group coordinator (engine/kafka/groups.py) alone, on an event loop with a real engine
but no listener: what real clients rarely show — protocol votes, members that never rejoin
or never sync, the initial delay, pending member ids, static members, the commit rules."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine import Engine
from engine.kafka import codes
from engine.kafka.config import ServeConfig
from engine.kafka.groups import (
    COMPLETING,
    EMPTY,
    PREPARING,
    STABLE,
    Coordinator,
    NotEmpty,
    assignment_partitions,
    encode_assignment,
    subscription_topics,
)

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # ConsumerProtocol v0: topic t


class Broker:
    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop, delay_ms: int) -> None:
        self.engine = engine
        self.loop = loop
        self.config = ServeConfig.parse({"group.initial.rebalance.delay.ms": str(delay_ms),
                                         "group.min.session.timeout.ms": "10"})
        self.pool = ThreadPoolExecutor(2)
        self.host, self.port = "127.0.0.1", 9092

    def advertised(self) -> str:
        return f"{self.host}:{self.port}"

    async def call(self, fn, *args):
        return await self.loop.run_in_executor(self.pool, fn, *args)


def run(data_dir: str, body, delay_ms: int = 0) -> None:
    async def main() -> None:
        with Engine.open(data_dir) as eng:
            b = Broker(eng, asyncio.get_running_loop(), delay_ms)
            coord = Coordinator(b)
            try:
                await body(coord)
            finally:
                coord.close()
                b.pool.shutdown()
    asyncio.run(main())


async def join(coord: Coordinator, member: str = "", protocols=(("range", SUB),),
               session: int = 500, rebalance: int = 500, instance: str | None = None,
               require_known: bool = False, group: str = "g"):
    return await coord.join(group, member, instance, require_known, "app", "/127.0.0.1",
                            session, rebalance, "consumer", list(protocols))


def started(coro) -> asyncio.Task:
    return asyncio.ensure_future(coro)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_protocol_every_member_supports_most_put_first(data_dir):
    async def body(coord: Coordinator) -> None:
        a = started(join(coord, protocols=(("range", SUB), ("roundrobin", SUB))))
        b = started(join(coord, protocols=(("roundrobin", SUB), ("range", SUB))))
        c = started(join(coord, protocols=(("roundrobin", SUB), ("range", SUB))))
        ra, rb, rc = await asyncio.gather(a, b, c)
        assert {r.protocol_name for r in (ra, rb, rc)} == {"roundrobin"}
        assert ra.generation == rb.generation == rc.generation == 1
        leader = [r for r in (ra, rb, rc) if r.members]
        assert len(leader) == 1 and leader[0].member_id == leader[0].leader
        assert sorted(m[0] for m in leader[0].members) == sorted(
            r.member_id for r in (ra, rb, rc))
        # a member sharing no protocol with the group is refused
        bad = await join(coord, protocols=(("cooperative-sticky", SUB),))
        assert bad.error == codes.INCONSISTENT_GROUP_PROTOCOL
        g = coord.groups["g"]
        assert g.state == COMPLETING and g.topics == {"t"}

    run(data_dir, body)


def test_a_rebalance_waits_for_known_members_and_drops_those_that_never_rejoin(data_dir):
    async def body(coord: Coordinator) -> None:
        ra, rb = await asyncio.gather(join(coord, rebalance=300), join(coord, rebalance=300))
        for r in (ra, rb):
            res = await coord.sync("g", r.generation, r.member_id, None, None, None,
                                   {ra.member_id: b"a", rb.member_id: b"b"}
                                   if r.member_id == r.leader else {})
            assert res.error == codes.NONE
        assert coord.groups["g"].state == STABLE
        assert (await coord.sync("g", 1, rb.member_id, None, None, None, {})).assignment \
            == b"b"  # (stable: its assignment again)
        # a joins again: the group waits for b ...
        again = started(join(coord, ra.member_id, rebalance=300))
        await settle()
        assert coord.groups["g"].state == PREPARING
        assert coord.heartbeat("g", 1, rb.member_id, None) == codes.REBALANCE_IN_PROGRESS
        assert not again.done()
        # ... which does not come back: after the rebalance timeout a goes on alone
        r = await asyncio.wait_for(again, 5)
        assert (r.error, r.generation, r.leader) == (codes.NONE, 2, ra.member_id)
        assert list(coord.groups["g"].members) == [ra.member_id]
        assert coord.heartbeat("g", 2, rb.member_id, None) == codes.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("g", 1, ra.member_id, None) == codes.ILLEGAL_GENERATION

    run(data_dir, body)


def test_members_without_heartbeats_or_syncs_are_removed(data_dir):
    async def body(coord: Coordinator) -> None:
        ra, rb = await asyncio.gather(join(coord, session=150, rebalance=200),
                                      join(coord, session=150, rebalance=200))
        leader, follower = (ra, rb) if ra.member_id == ra.leader else (rb, ra)
        # the follower never syncs: removed after the rebalance timeout, and a rebalance
        sync = started(coord.sync("g", 1, leader.member_id, None, None, None,
                                  {leader.member_id: b"x"}))
        assert (await sync).error == codes.NONE
        g = coord.groups["g"]
        t0 = time.monotonic()
        beats = [coord.heartbeat("g", 1, leader.member_id, None)]
        while beats[-1] == codes.NONE and time.monotonic() - t0 < 5:  # (the leader stays)
            await asyncio.sleep(0.02)
            beats.append(coord.heartbeat("g", 1, leader.member_id, None))
        assert beats[0] == codes.NONE and beats[-1] == codes.REBALANCE_IN_PROGRESS
        assert time.monotonic() - t0 > 0.1  # (the rebalance timeout, 0.2 s, from the join)
        assert follower.member_id not in g.members
        assert g.state == PREPARING
        r = await join(coord, leader.member_id, session=150, rebalance=200)
        assert (r.error, r.generation) == (codes.NONE, 2)
        assert (await coord.sync("g", 2, r.member_id, None, None, None,
                                 {r.member_id: b"y"})).assignment == b"y"
        # no heartbeat for the session timeout: gone, and the group empty
        await asyncio.sleep(0.4)
        assert g.state == EMPTY and not g.members
        await asyncio.sleep(0.1)
        assert "g" not in coord.groups  # (an empty group leaves memory; its mark is gone)
        assert coord.broker.engine.groups.live("g")["kind"] is None

    run(data_dir, body)


def test_the_first_join_waits_the_initial_delay_for_more_members(data_dir):
    async def body(coord: Coordinator) -> None:
        a = started(join(coord, rebalance=2000))
        await asyncio.sleep(0.1)
        assert not a.done()
        b = started(join(coord, rebalance=2000))
        ra, rb = await asyncio.wait_for(asyncio.gather(a, b), 5)
        assert ra.generation == rb.generation == 1  # one generation with both

    run(data_dir, body, delay_ms=300)


def test_member_id_required_then_join_and_leave_in_a_batch(data_dir):
    async def body(coord: Coordinator) -> None:
        first = await join(coord, require_known=True)
        assert first.error == codes.MEMBER_ID_REQUIRED and first.member_id.startswith("app-")
        assert coord.broker.engine.groups.live("g")["kind"] == "kafka"  # claimed already
        r = await join(coord, first.member_id, require_known=True)
        assert (r.error, r.member_id, r.generation) == (codes.NONE, first.member_id, 1)
        pending = await join(coord, require_known=True)
        err, out = coord.leave("g", [(r.member_id, None), (pending.member_id, None),
                                     ("nobody", None)])
        assert err == codes.NONE
        assert [e for _, _, e in out] == [codes.NONE, codes.NONE, codes.UNKNOWN_MEMBER_ID]
        await asyncio.sleep(0.05)
        assert coord.live("g") is None

    run(data_dir, body)


def test_a_static_member_back_with_a_new_id_fences_the_old_one(data_dir):
    async def body(coord: Coordinator) -> None:
        ra, rb = await asyncio.gather(join(coord, instance="ia"), join(coord, instance="ib"))
        for r, instance in ((ra, "ia"), (rb, "ib")):
            await coord.sync("g", 1, r.member_id, instance, None, None,
                             {ra.member_id: b"A", rb.member_id: b"B"} if r.member_id == r.leader
                             else {})
        back = await join(coord, instance="ia")
        assert (back.error, back.generation) == (codes.NONE, 1)  # no rebalance
        assert back.member_id != ra.member_id
        g = coord.groups["g"]
        assert g.state == STABLE and g.members[back.member_id].assignment == b"A"
        assert coord.heartbeat("g", 1, ra.member_id, "ia") == codes.FENCED_INSTANCE_ID
        assert coord.heartbeat("g", 1, back.member_id, "ia") == codes.NONE
        # an admin removes it by instance id alone
        assert coord.leave("g", [("", "ia")])[1] == [("", "ia", codes.NONE)]
        assert back.member_id not in g.members

    run(data_dir, body)


def test_who_may_commit(data_dir):
    async def body(coord: Coordinator) -> None:
        assert coord.check_commit("g", -1, "", None) is None  # not ours: ask the data dir
        assert coord.check_commit("g", 3, "m", None) == codes.ILLEGAL_GENERATION
        r = await join(coord)
        assert coord.check_commit("g", 1, r.member_id, None) == codes.REBALANCE_IN_PROGRESS
        await coord.sync("g", 1, r.member_id, None, None, None, {r.member_id: b""})
        assert coord.check_commit("g", 1, r.member_id, None) == codes.NONE
        assert coord.check_commit("g", 0, r.member_id, None) == codes.ILLEGAL_GENERATION
        assert coord.check_commit("g", 1, "other", None) == codes.UNKNOWN_MEMBER_ID
        assert coord.check_commit("g", -1, "", None) == codes.UNKNOWN_MEMBER_ID  # live group
        assert coord.check_commit("g", -1, "", None, transactional=True) == codes.NONE
        with pytest.raises(NotEmpty):
            await coord.locked("g", lambda: None)
        assert coord.check_group_id("") == codes.INVALID_GROUP_ID
        assert coord.check_group_id("x" * 300) == codes.INVALID_GROUP_ID
        assert coord.check_group_id("a\nb") == codes.INVALID_GROUP_ID

    run(data_dir, body)


def test_consumer_protocol_bytes():
    assert subscription_topics(SUB) == {"t"}
    assert subscription_topics(b"\x00\x00\xff\xff\xff\xff") is None
    parts = [("t", [0, 2]), ("u", [1])]
    assert assignment_partitions(encode_assignment(parts)) == parts
    assert assignment_partitions(b"") == []
    assert assignment_partitions(encode_assignment(parts)[:-9]) is None
