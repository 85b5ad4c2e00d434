"""Consumer groups through ``rivven serve``: real clients (confluent-kafka's librdkafka,
kafka-python) in processes of their own join, leave, are killed with -9, commit and resume;
the group's offsets are rivven's own (``rivven group describe``); a group is rivven-native or
Kafka-protocol while it has members, never both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, run_rivven
from helpers.kafka import FAST, Served, start_server

from engine import Engine, Record

MEMBER = ROOT / "tests" / "kafka_member.py"
# members' sessions are 3 s (a member killed with -9 is gone within that)
SETTINGS = (*FAST, "group.min.session.timeout.ms=1000")
PARTITIONS = 6


# ---------------------------------------------------------------- members in processes
class Members:
    """Member processes (tests/kafka_member.py), each writing its events to a file."""

    def __init__(self, served: Served, tmp: Path, group: str, assignor: str) -> None:
        self.served, self.tmp, self.group, self.assignor = served, tmp, group, assignor
        self.procs: dict[str, subprocess.Popen] = {}
        self.killed: set[str] = set()

    def start(self, name: str, kind: str, pause_ms: int = 10) -> None:
        with open(self.tmp / f"{name}.log", "wb") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, str(MEMBER), kind, self.served.bootstrap, self.group, "t",
                 self.assignor, name, str(pause_ms)], stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(ROOT)))

    def lines(self, name: str) -> list[list[str]]:
        text = (self.tmp / f"{name}.log").read_text(errors="replace")
        return [line.split() for line in text.split("\n")[:-1]]  # (a kill may cut the last)

    def stop(self, name: str) -> None:
        """SIGTERM: the member closes (leaves the group) and exits."""
        p = self.procs[name]
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, self.lines(name)[-5:]
        assert self.lines(name)[-1] == ["closed"]

    def kill(self, name: str) -> None:
        self.procs[name].kill()
        self.procs[name].wait(30)
        self.killed.add(name)

    def close(self) -> None:
        if sys.exc_info()[0] is not None:  # (a failed test: each live member's stacks)
            for p in self.procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGUSR1)
            time.sleep(1)
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)


def wait_for(what: str, check, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.1)


def live(data_dir: str, group: str) -> dict:
    with Engine.open(data_dir, read_only=True) as eng:
        return dict(eng.groups.live(group))


def stable_with(data_dir: str, group: str, n: int) -> bool:
    g = live(data_dir, group)
    return g["state"] == "Stable" and len(g["members"]) == n and \
        sorted(a["partition"] for m in g["members"] for a in m["assignment"]) == \
        list(range(PARTITIONS))


def produce(data_dir: str, n_per_partition: int) -> None:
    with Engine.open(data_dir) as eng:
        for p in range(PARTITIONS):
            eng.produce("t", [Record(value=b"v%d" % i) for i in range(n_per_partition)],
                        partition=p)


def ends(data_dir: str) -> dict[int, int]:
    with Engine.open(data_dir, read_only=True) as eng:
        return {p: eng.offsets.of_partition("t", p)[1] for p in range(PARTITIONS)}


def committed(data_dir: str, group: str) -> dict[int, int]:
    with Engine.open(data_dir, read_only=True) as eng:
        try:
            return {p: o for (_, p), o in eng.groups.committed(group).items()}
        except Exception:
            return {}


def consumed_under_commits(members: Members) -> tuple[dict, set]:
    """Which member took each record under a commit of its own: a record ``R p o`` counts
    when the same member then committed an offset past it on that partition before the
    partition was assigned to it anew (``A p``: its position came from the group's offsets
    again). A killed member's records after its last commit may have been committed too
    (the kill can fall between the commit and its line): those are ``maybe``."""
    taken: dict[tuple[int, int], list[str]] = {}
    maybe: set[tuple[int, int]] = set()
    for name in members.procs:
        open_: dict[int, list[int]] = {}  # partition -> records taken, not yet committed
        for f in members.lines(name):
            if f[0] == "A":
                open_[int(f[1])] = []
            elif f[0] == "R" and len(f) == 3:
                open_.setdefault(int(f[1]), []).append(int(f[2]))
            elif f[0] == "C" and len(f) == 3:
                p, upto = int(f[1]), int(f[2])
                rest = []
                for o in open_.get(p, []):
                    if o < upto:
                        taken.setdefault((p, o), []).append(name)
                    else:
                        rest.append(o)
                open_[p] = rest
        if name in members.killed:
            maybe.update((p, o) for p, os_ in open_.items() for o in os_)
    return taken, maybe


class Producing:
    """Records into every partition all along (6 every 20 ms), from a thread."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with Engine.open(self.data_dir) as eng:
            while not self.done.wait(0.02):
                for p in range(PARTITIONS):
                    eng.produce("t", [Record(value=b"x")], partition=p)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(30)


def explain(members: Members, record: tuple[int, int]) -> str:
    """Each member's events of the record's partition (a failure's message)."""
    p = str(record[0])
    return "; ".join(f"{name}: " + " ".join(
        "/".join(f) for f in members.lines(name) if len(f) > 1 and f[1] == p)[:1500]
        for name in members.procs)


def churn(tmp_path: Path, kinds: tuple[str, str, str, str, str], assignor: str) -> None:
    """Three members (kinds[0..2]) join, a fourth joins, one leaves, one is killed with -9,
    while records keep coming, each committed on its own; then a fifth (kinds[4]) resumes
    after they all stopped."""
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", PARTITIONS)
    produce(d, 40)
    s = start_server(d, settings=SETTINGS)
    m = Members(s, tmp_path, "g", assignor)
    more = Producing(d)
    try:
        for name, kind in zip("abc", kinds):
            m.start(name, kind)
        wait_for("3 members", lambda: stable_with(d, "g", 3))
        m.start("d", kinds[3])
        wait_for("4 members", lambda: stable_with(d, "g", 4))
        wait_for("d to take records", lambda: any(f[0] == "C" for f in m.lines("d")))
        m.stop("b")
        wait_for("3 members after b left", lambda: stable_with(d, "g", 3))
        wait_for("c to take records", lambda: any(f[0] == "C" for f in m.lines("c")))
        m.kill("c")
        wait_for("2 members after c was killed", lambda: stable_with(d, "g", 2))
        more.stop()
        end = ends(d)
        wait_for("every record committed", lambda: committed(d, "g") == end, timeout=120)
        for name in "ad":
            m.stop(name)
        taken, maybe = consumed_under_commits(m)
        twice = {r: who for r, who in taken.items() if len(who) > 1}
        assert twice == {}, (f"records taken twice under commits: {sorted(twice.items())[:10]}"
                             f"; {explain(m, min(twice))}")
        everything = {(p, o) for p in range(PARTITIONS) for o in range(end[p])}
        assert everything - set(taken) - maybe == set()
        assert live(d, "g")["state"] == "Empty"
        for name in "abd":  # each took part
            assert any(f[0] == "C" for f in m.lines(name)), name

        # every member stopped: a new one resumes from the committed offsets
        before = committed(d, "g")
        produce(d, 5)
        end = ends(d)
        m.start("e", kinds[4], pause_ms=0)
        wait_for("the new records committed", lambda: committed(d, "g") == end, timeout=60)
        m.stop("e")
        got = sorted((int(f[1]), int(f[2])) for f in m.lines("e") if f[0] == "R")
        assert got == [(p, o) for p in range(PARTITIONS) for o in range(before[p], end[p])]

        out = json.loads(run_rivven(d, "group", "describe", "g", "--json", check=True).stdout)
        assert out["state"] == "Empty" and out["total_lag"] == 0
        assert [(r["partition"], r["current_offset"], r["lag"]) for r in out["partitions"]] \
            == [(p, end[p], 0) for p in range(PARTITIONS)]
    finally:
        more.stop()
        m.close()
        s.kill()
    assert "Traceback" not in s.log(), s.log()[-3000:]


@pytest.mark.slow
def test_confluent_members_join_leave_die_and_resume_cooperative_sticky(tmp_path):
    churn(tmp_path, ("confluent",) * 5, "cooperative-sticky")


@pytest.mark.slow
def test_kafka_python_members_join_leave_die_and_resume_range(tmp_path):
    churn(tmp_path, ("kafka-python",) * 5, "range")


@pytest.mark.slow
def test_mixed_members_join_leave_die_and_resume_roundrobin(tmp_path):
    churn(tmp_path, ("confluent", "kafka-python", "confluent", "kafka-python", "confluent"),
          "roundrobin")


# ---------------------------------------------------------------- quick ones, in process
@pytest.fixture
def three(tmp_path):
    """Topic ``t`` (3 partitions, 10 records each) served; the server's settings: FAST."""
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", 3)
        for p in range(3):
            eng.produce("t", [Record(value=b"v%d" % i) for i in range(10)], partition=p)
    s = start_server(d, settings=SETTINGS)
    try:
        yield s
    finally:
        s.kill()


def confluent(served: Served, group: str, **conf):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": served.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "client.id": "app", **conf})


def take(c, n: int, timeout: float = 30) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    assert len(got) == n, f"took {len(got)} of {n}"
    return got


def rivven_json(data_dir: str, *args: str):
    return json.loads(run_rivven(data_dir, *args, "--json", check=True).stdout)


def test_a_kafka_groups_offsets_show_in_rivven_group_describe_with_lag(three):
    from confluent_kafka import TopicPartition

    d = three.data_dir
    c = confluent(three, "g")
    c.subscribe(["t"])
    got = take(c, 5)
    last = {}
    for m in got:
        last[m.partition()] = m.offset() + 1
    c.commit(offsets=[TopicPartition("t", p, o, metadata=f"m{p}") for p, o in last.items()],
             asynchronous=False)
    wait_for("the group's members", lambda: stable_with_n(d, "g", 1))
    out = rivven_json(d, "group", "describe", "g")
    assert out["state"] == "Stable"
    rows = {r["partition"]: r for r in out["partitions"]}
    for p in range(3):
        committed_ = last.get(p)
        assert rows[p]["current_offset"] == committed_
        assert rows[p]["lag"] == (None if committed_ is None else 10 - committed_)
        # (librdkafka sends the metadata with its C string's NUL: kept as sent)
        assert rows[p]["metadata"] == (None if committed_ is None else f"m{p}\x00")
        assert rows[p]["consumer"] == c.memberid()
    assert out["total_lag"] == sum(10 - o for o in last.values())
    members = rivven_json(d, "group", "describe", "g", "--members")["members"]
    assert [(m["member_id"], m["client_id"], m["host"], m["pid"], m["topics"],
             [a["partition"] for a in m["assignment"]]) for m in members] == \
        [(c.memberid(), "app", "/127.0.0.1", None, ["t"], [0, 1, 2])]
    state = rivven_json(d, "group", "describe", "g", "--state")
    assert (state["state"], state["assignment_strategy"], state["members"]) == \
        ("Stable", "range", 1)
    assert [r["state"] for r in rivven_json(d, "group", "list") if r["group"] == "g"] == \
        ["Stable"]
    # the committed offsets with their metadata, through OffsetFetch
    back = c.committed([TopicPartition("t", p) for p in range(3)], timeout=10)
    assert [(tp.offset, tp.metadata) for tp in back] == \
        [(last[p], f"m{p}") if p in last else (-1001, None) for p in range(3)]  # (NUL cut)

    # a reset while the group has live members is refused, as for a native group
    r = run_rivven(d, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                   "--execute")
    assert r.returncode == 1
    err = r.stderr.decode().strip()
    assert "\n" not in err and "active Kafka-protocol consumer" in err, err
    c.close()
    wait_for("an empty group", lambda: live(d, "g")["state"] == "Empty")
    run_rivven(d, "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "2",
               "--execute", check=True)
    c = confluent(three, "g")
    c.subscribe(["t"])
    got = take(c, 24)
    assert sorted((m.partition(), m.offset()) for m in got) == \
        [(p, o) for p in range(3) for o in range(2, 10)]
    c.close()


def stable_with_n(data_dir: str, group: str, n: int) -> bool:
    g = live(data_dir, group)
    return g["state"] == "Stable" and len(g["members"]) == n


def test_a_group_is_rivven_native_or_kafka_protocol_while_it_has_live_members(three):
    from confluent_kafka import KafkaException, TopicPartition
    from kafka import KafkaConsumer
    from kafka.errors import InconsistentGroupProtocolError

    d = three.data_dir
    with Engine.open(d) as eng, eng.consumer("n", "t", client_id="native") as native:
        # a Kafka client cannot join a group that native consumers hold ...
        c = confluent(three, "n")
        c.subscribe(["t"])
        deadline = time.monotonic() + 30
        while True:
            m = c.poll(0.2)
            if m is not None:
                break
            assert time.monotonic() < deadline
        assert m.error() is not None and m.error().code() == 23, m.error()  # INCONSISTENT_...
        c.close()
        k = KafkaConsumer("t", bootstrap_servers=three.bootstrap, group_id="n")
        with pytest.raises(InconsistentGroupProtocolError):
            k.poll(timeout_ms=10_000)
        k.close()
        # ... nor commit to it from outside group management (Kafka's rule for a group
        # with members)
        s = confluent(three, "n")
        s.assign([TopicPartition("t", 0, 0)])
        with pytest.raises(KafkaException, match="UNKNOWN_MEMBER_ID|Unknown member"):
            s.commit(offsets=[TopicPartition("t", 0, 3)], asynchronous=False)
        s.close()
        assert native.assignment() == [("t", 0), ("t", 1), ("t", 2)]
        # Kafka's tools see the native group: Stable, its members' partitions
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=three.bootstrap)
        g = admin.describe_groups(["n"])["n"]
        assert (g["group_state"], g["protocol_type"], g["protocol_data"], g["error"]) == \
            ("Stable", "consumer", "roundrobin", None)
        (member,) = g["members"]
        assert (member["member_id"], member["client_id"]) == (native.member_id, "native")
        assert member["member_assignment"]["assigned_partitions"] == \
            [{"topic": "t", "partitions": [0, 1, 2]}]
        admin.close()

    # the other way: while Kafka clients hold a group, native consumers are refused
    c = confluent(three, "k")
    c.subscribe(["t"])
    take(c, 1)
    wait_for("a stable group", lambda: stable_with_n(d, "k", 1))
    r = run_rivven(d, "consume", "t", "--group", "k")
    assert r.returncode == 1
    err = r.stderr.decode().strip()
    assert "\n" not in err and "live Kafka-protocol members (1 member through rivven serve" \
        in err and "rivven-native or Kafka-protocol" in err, err
    c.close()
    wait_for("an empty group", lambda: live(d, "k")["state"] == "Empty")
    r = run_rivven(d, "consume", "t", "--group", "k", "-q", check=True)
    assert len(r.stdout.splitlines()) == 30  # (nothing was committed: from the start)


def test_list_describe_delete_groups_and_offsets_through_the_protocol(three):
    from confluent_kafka import ConsumerGroupState, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    d = three.data_dir
    with Engine.open(d) as eng:
        eng.groups.commit("old", {("t", 0): 4, ("t", 1): 5})
    c = confluent(three, "g", **{"partition.assignment.strategy": "roundrobin"})
    c.subscribe(["t"])
    take(c, 3)
    c.commit(offsets=[TopicPartition("t", 2, 7)], asynchronous=False)
    wait_for("a stable group", lambda: stable_with_n(d, "g", 1))

    admin = AdminClient({"bootstrap.servers": three.bootstrap})
    listed = admin.list_consumer_groups().result(30)
    assert {(g.group_id, g.state) for g in listed.valid} == \
        {("g", ConsumerGroupState.STABLE), ("old", ConsumerGroupState.EMPTY)}
    stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(30)
    assert [g.group_id for g in stable.valid] == ["g"]
    desc = admin.describe_consumer_groups(["g"])["g"].result(30)
    assert (desc.state, desc.partition_assignor) == (ConsumerGroupState.STABLE, "roundrobin")
    (member,) = desc.members
    assert (member.client_id, member.host) == ("app", "/127.0.0.1")
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]

    k = KafkaAdminClient(bootstrap_servers=three.bootstrap)
    assert {tp.partition: om.offset for tp, om in k.list_group_offsets("g")["g"].items()} \
        == {2: 7}
    # OffsetFetch v8: several groups in one request, each with its own error
    both = k.list_group_offsets({"g": None, "old": [KTP("t", 1), KTP("t", 2)]})
    assert {g: {tp.partition: om.offset for tp, om in offs.items()}
            for g, offs in both.items()} == {"g": {2: 7}, "old": {1: 5, 2: -1}}
    with pytest.raises(Exception, match="InvalidGroupId"):
        k.list_group_offsets({"g": None, "bad\nname": None})
    # OffsetDelete: refused for a topic a live member reads, done on an empty group
    out = k.delete_group_offsets("g", [KTP("t", 2)])
    assert [e.__name__ for e in out.values()] == ["GroupSubscribedToTopicError"]
    out = k.delete_group_offsets("old", [KTP("t", 0)])
    assert [e.__name__ for e in out.values()] == ["NoError"]
    assert committed(d, "old") == {1: 5}
    # DeleteGroups: not while live; an unknown group is not found
    out = k.delete_groups(["g", "old", "nope"])
    assert out == {"g": "NonEmptyGroupError", "old": "OK", "nope": "GroupIdNotFoundError"}
    assert [g["group"] for g in rivven_json(d, "group", "list")] == ["g"]
    c.close()
    wait_for("an empty group", lambda: live(d, "g")["state"] == "Empty")
    assert k.delete_groups(["g"]) == {"g": "OK"}
    assert rivven_json(d, "group", "list") == []
    k.close()


def test_a_static_member_back_within_its_session_keeps_its_partitions(three):
    d = three.data_dir
    conf = {"session.timeout.ms": 10000, "partition.assignment.strategy": "roundrobin"}
    a = confluent(three, "s", **{"group.instance.id": "ia"}, **conf)
    b = confluent(three, "s", **{"group.instance.id": "ib"}, **conf)
    a.subscribe(["t"])
    b.subscribe(["t"])
    deadline = time.monotonic() + 60
    while not stable_with_n(d, "s", 2) or len(a.assignment()) + len(b.assignment()) != 3:
        a.poll(0.1)
        b.poll(0.1)
        assert time.monotonic() < deadline
    before = sorted([x["partition"] for x in m["assignment"]] for m in live(d, "s")["members"])
    mine = sorted(tp.partition for tp in a.assignment())
    rebalances = three.log().count("rebalancing from")
    a.close()  # (a static member leaves no LeaveGroup: its place is kept for its session)
    a = confluent(three, "s", **{"group.instance.id": "ia"}, **conf)
    a.subscribe(["t"])
    deadline = time.monotonic() + 30
    while not a.assignment():
        a.poll(0.1)
        b.poll(0.1)
        assert time.monotonic() < deadline
    assert sorted(tp.partition for tp in a.assignment()) == mine
    assert three.log().count("rebalancing from") == rebalances  # no rebalance
    after = sorted([x["partition"] for x in m["assignment"]] for m in live(d, "s")["members"])
    assert after == before
    a.close()
    b.close()


def test_read_committed_consumers_wait_for_offsets_an_open_transaction_holds(three):
    from confluent_kafka import KafkaException, TopicPartition

    c = confluent(three, "g", **{"isolation.level": "read_committed"})
    with Engine.open(three.data_dir) as eng:
        p = eng.producer("tx")
        p.begin()
        p.send_offsets("g", {("t", 0): 5})
        # OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT until it ends (the client
        # asks again and again)
        with pytest.raises(KafkaException, match="Timed out"):
            c.committed([TopicPartition("t", 0)], timeout=2)
        p.commit()
    (tp,) = c.committed([TopicPartition("t", 0)], timeout=10)
    assert tp.offset == 5
    c.close()
