"""Groups, transactions and admin through Kafka's Java client and kcat against a real
``rivven serve``: members of a group share partitions, rebalance when one joins, leaves or is
killed -9, commit, and resume with no record consumed twice by committed offsets; the Java
client's consume-transform-produce loop (``sendOffsetsToTransaction`` with the consumer's
group metadata) with random aborts leaves every input exactly once in the output and the
group's offsets at the end; the AdminClient's topic, partition, config, record, group and
transaction calls (what ``kafka-topics.sh``, ``kafka-configs.sh``, ``kafka-consumer-groups.sh``
and ``kafka-transactions.sh`` call) do what they say, as the engine and ``rivven`` show."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from helpers import run_rivven
from helpers.kafka import Served, start_server
from helpers.kafka_clients import (
    Member,
    Rec,
    confluent_consume,
    confluent_produce,
    first_difference,
    held,
    java,
    java_admin,
    java_consume,
    java_member,
    java_popen,
    java_produce,
    kafka_python_consume,
    kcat_consume,
    kcat_member,
    kcat_produce,
    kcat_run,
)

from engine import Engine

JAVA_ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
                  "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                  "cooperative-sticky":
                      "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}


def wait_until(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not in {timeout} s: {what()}"
        time.sleep(0.1)


def group_offsets(data_dir: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as ``rivven group describe`` shows them."""
    out = run_rivven(data_dir, "group", "describe", group, "--json", check=True).stdout
    return {(p["topic"], p["partition"]): p["current_offset"]
            for p in json.loads(out)["partitions"] if p["current_offset"] is not None}


def end_offsets(data_dir: str, topic: str) -> dict[tuple[str, int], int]:
    with Engine.open(data_dir, read_only=True) as eng:
        return {(topic, p): eng.offsets.of_partition(topic, p)[1]
                for p in range(eng.topic(topic).partitions)}


@pytest.fixture
def served(tmp_path) -> Iterator[Served]:
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "g", "--partitions", "6", check=True)
    s = start_server(d)
    try:
        yield s
    finally:
        s.kill()


@pytest.mark.slow
@pytest.mark.parametrize("kind,assignor", [("java", "range"), ("java", "cooperative-sticky"),
                                           ("kcat", "roundrobin")])
def test_three_members_share_rebalance_on_join_leave_and_kill_commit_and_resume(
        served, kind, assignor):
    b, d, topic, group = served.bootstrap, served.data_dir, "g", f"g-{kind}-{assignor}"
    members: list[Member] = []
    sent = 0

    def member(name: str) -> Member:
        if kind == "java":
            m = java_member(name, b, group, topic,
                            **{"partition.assignment.strategy": JAVA_ASSIGNORS[assignor]})
        else:
            m = kcat_member(name, b, group, topic, **{"partition.assignment.strategy": assignor})
        members.append(m)
        return m

    def produce(n: int) -> None:
        nonlocal sent
        confluent_produce(b, topic, [Rec((sent + i) % 6, b"k%d" % (sent + i), b"v%d" % (sent + i))
                                     for i in range(n)], "lz4")
        sent += n

    def consumed() -> set[tuple[str, int, int]]:
        return {r for m in members for r in m.records()}

    def status() -> str:
        return (f"{len(consumed())} of {sent} consumed; held: "
                f"{ {m.name: sorted(p for _, p in m.assigned()) for m in members} }; "
                f"{b''.join(m.stderr[-500:] for m in members).decode(errors='replace')}")

    def spread(live: list[Member]) -> bool:
        for m in live:  # a member that died on its own fails the test at once
            assert m.proc.poll() is None, \
                f"{m.name} exited {m.proc.returncode}: {m.stderr.decode(errors='replace')[-3000:]}"
        held_now = [m.assigned() for m in live]
        union = set().union(*held_now)
        return (all(held_now) and len(union) == 6
                and sum(len(h) for h in held_now) == 6)

    try:
        m1, m2, m3 = member("m1"), member("m2"), member("m3")
        wait_until(lambda: spread([m1, m2, m3]), 90, status)
        produce(300)
        wait_until(lambda: spread([m1, m2, m3]) and len(consumed()) >= sent, 60, status)
        assert all(m.records() for m in (m1, m2, m3)), status()  # each had its share
        # one leaves: the other two take its partitions
        assert m3.stop() == 0, m3.stderr.decode()
        wait_until(lambda: spread([m1, m2]), 60, status)
        produce(300)
        wait_until(lambda: len(consumed()) >= sent, 60, status)
        # one is killed -9: after its session times out (6 s) the last one takes them all
        m2.kill()
        produce(300)
        wait_until(lambda: spread([m1]) and len(consumed()) >= sent, 90, status)
        # a new member joins and resumes from the committed offsets
        m4 = member("m4")
        wait_until(lambda: spread([m1, m4]), 60, status)
        produce(300)
        wait_until(lambda: len(consumed()) >= sent, 60, status)
        for m in (m1, m4):
            assert m.stop() == 0, m.stderr.decode()
    finally:
        for m in members:
            m.kill()
    assert {(t, p, o) for t, p, o in consumed()} >= {
        (topic, r.partition, r.offset) for r in held(d, topic)}
    ends = end_offsets(d, topic)
    assert group_offsets(d, group) == ends  # every record committed, as rivven shows it
    if kind == "java":
        (listed,) = java_admin(b, f"list-group-offsets {group}")
        assert {(o["topic"], o["partition"]): o["offset"] for o in listed["offsets"]} == ends
        # no record is covered by two members' commits: a record read twice was read first
        # by a member that did not commit it (killed, or its commit refused in a rebalance)
        covered: Counter = Counter()
        for m in members:
            commits: dict[int, int] = {}
            for e in m.events:
                if e["event"] == "committed":
                    for o in e["offsets"]:
                        commits[o["partition"]] = max(commits.get(o["partition"], 0),
                                                      o["offset"])
            for _, p, o in set(m.records()):
                if o < commits.get(p, 0):
                    covered[(p, o)] += 1
        assert covered and max(covered.values()) == 1, covered.most_common(3)


@pytest.mark.slow
def test_the_java_transactional_loop_with_random_aborts_leaves_every_input_once(served):
    """consume-transform-produce in transactions (``sendOffsetsToTransaction(offsets,
    consumer.groupMetadata())``), a third of them aborted; the loop killed -9 halfway and
    started again with its transactional id (which fences the dead one and aborts its open
    transaction): a read_committed consumer of the output sees every input exactly
    once and no aborted record, and the group's offsets are at the input's end."""
    b, d = served.bootstrap, served.data_dir
    run_rivven(d, "topic", "create", "out", "--partitions", "3", check=True)
    inputs = [Rec(i % 6, b"k%d" % i, b"v%d" % i) for i in range(600)]
    confluent_produce(b, "g", inputs, "zstd")
    props = {"max.poll.records": 17, "session.timeout.ms": 6000}

    first = java_popen("eos", b, "eos-group", "g", "out", "txn-a", props=props,
                       opts={"abort-rate": 0.3, "seed": 1, "idle-ms": 3000})
    try:
        assert b'"ready"' in first.stdout.readline()
        for _ in range(5):  # some transactions, then kill -9 in the middle of one
            first.stdout.readline()
        first.kill()
        first.wait(30)
        out = java("eos", b, "eos-group", "g", "out", "txn-a", props=props,
                   opts={"abort-rate": 0.3, "seed": 2, "idle-ms": 4000}, timeout=600)
    finally:
        first.kill()
        first.wait(30)
    done = out[-1]
    assert done["event"] == "done" and done["aborted"] > 0, out[-3:]
    committed = held(d, "out", "read_committed")
    srcs = Counter(dict(r.headers)["src"] for r in committed)
    want = {f"{r.partition}:{r.offset}".encode() for r in held(d, "g")}
    assert set(srcs) == want and max(srcs.values()) == 1, srcs.most_common(3)
    assert Counter(r.value for r in committed) == Counter(r.value for r in inputs)
    # the clients agree with the engine
    rc = {"isolation.level": "read_committed"}
    assert java_consume(b, "out", **rc) == committed
    assert confluent_consume(b, "out", count=len(committed), **rc) == committed
    assert group_offsets(d, "eos-group") == end_offsets(d, "g")


@pytest.mark.slow
def test_transactions_of_the_java_client_and_kcat_read_committed_by_every_client(served):
    """Java's transactional producer commits one transaction and aborts another, kcat's
    commits one (kcat -X transactional.id: the whole run in one): at read_committed every
    client reads the committed ones only, as ``Engine.read`` shows; at read_uncommitted all."""
    b, d = served.bootstrap, served.data_dir
    recs = [Rec(i % 6, b"k%d" % i, b"v%d" % i) for i in range(12)]
    java_produce(b, "g", [r._replace(value=b"java-commit-" + r.value) for r in recs], "zstd",
                 **{"transactional.id": "java-txn"})
    java_produce(b, "g", [r._replace(value=b"java-abort-" + r.value) for r in recs], "lz4",
                 abort=True, **{"transactional.id": "java-txn"})
    kcat_produce(b, "g", [Rec(2, b"kc%d" % i, b"kcat-commit-%d" % i) for i in range(5)],
                 "gzip", "-X", "transactional.id=kcat-txn")
    confluent_produce(b, "g", [Rec(p, None, b"plain") for p in range(6)], "none")
    committed = held(d, "g", "read_committed")
    values = Counter(r.value.split(b"-")[0] + b"-" + r.value.split(b"-")[1] for r in committed
                     if r.value != b"plain")
    assert values == {b"java-commit": 12, b"kcat-commit": 5}, values
    everything = held(d, "g")
    assert len(everything) == len(committed) + 12
    rc = {"isolation.level": "read_committed"}
    ru = {"isolation.level": "read_uncommitted"}
    got = {"java": java_consume(b, "g", **rc),
           "confluent": confluent_consume(b, "g", count=len(committed), **rc),
           "kafka-python": kafka_python_consume(b, "g", count=len(committed),
                                                isolation_level="read_committed"),
           "kcat": kcat_consume(b, "g", "-X", "isolation.level=read_committed")}
    wrong = {c: first_difference(g, committed) for c, g in got.items() if g != committed}
    assert not wrong, wrong
    got = {"java": java_consume(b, "g"),
           "confluent": confluent_consume(b, "g", count=len(everything), **ru),
           "kafka-python": kafka_python_consume(b, "g", count=len(everything)),
           "kcat": kcat_consume(b, "g", "-X", "isolation.level=read_uncommitted")}
    wrong = {c: first_difference(g, everything) for c, g in got.items() if g != everything}
    assert not wrong, wrong


@pytest.mark.slow
def test_the_java_admin_client_manages_topics_configs_and_records(served):
    """What kafka-topics.sh, kafka-configs.sh and kafka-delete-records.sh call."""
    b, d = served.bootstrap, served.data_dir
    r = java_admin(b, "create-topic a1 3 retention.ms=3600000 cleanup.policy=compact",
                   "create-topic a1 3", "create-topic bad/name 1", "describe-configs topic a1",
                   "alter-configs topic a1 retention.ms=7200000 cleanup.policy=",
                   "describe-configs topic a1", "create-partitions a1 5",
                   "create-partitions a1 4", "describe-topic a1")
    created, again, bad, before, altered, after, grown, shrink, desc = r
    assert created == {"created": "a1", "partitions": 3}
    assert again["error"] == "TopicExistsException"
    assert bad["error"] == "InvalidTopicException"
    assert before["configs"]["retention.ms"] == "3600000"
    assert before["configs"]["cleanup.policy"] == "compact"
    assert altered == {"altered": "a1"}
    assert after["configs"]["retention.ms"] == "7200000"
    assert after["configs"]["cleanup.policy"] == "delete"  # deleted: back to the default
    assert grown == {"topic": "a1", "partitions": 5}
    assert shrink["error"] == "InvalidPartitionsException"
    assert len(desc["partitions"]) == 5
    with Engine.open(d, read_only=True) as eng:
        meta = eng.topic("a1")
        assert meta.partitions == 5 and meta.typed.retention_ms == 7_200_000
    # delete-records moves the log start; a consumer then starts there
    java_produce(b, "a1", [Rec(0, None, b"r%d" % i) for i in range(10)], "none")
    low, offsets = java_admin(b, "delete-records a1 0 4", "list-offsets a1 0 earliest")
    assert low == {"low_watermark": 4} and offsets["offset"] == 4
    assert [r.value for r in java_consume(b, "a1") if r.partition == 0] == \
        [b"r%d" % i for i in range(4, 10)]
    # delete-topic: gone for the engine too
    assert java_admin(b, "delete-topic a1", "list-topics") == [{"deleted": "a1"},
                                                               {"topics": ["g"]}]
    with Engine.open(d, read_only=True) as eng:
        assert "a1" not in [t.name for t in eng.topics()]


@pytest.mark.slow
def test_every_client_reads_log_append_time_as_the_topic_stamps_it(served):
    """A LogAppendTime topic: whatever time a producer sets, each client reads the time the
    server stamped, and says it is the append time."""
    b, d = served.bootstrap, served.data_dir
    java_admin(b, "create-topic lat 1 message.timestamp.type=LogAppendTime")
    before = int(time.time() * 1000)
    java_produce(b, "lat", [Rec(0, b"k", b"v%d" % i, (), 1_000 + i) for i in range(5)], "gzip")
    after = int(time.time() * 1000)
    truth = held(d, "lat")
    assert len(truth) == 5 and all(before <= r.timestamp <= after for r in truth), truth
    assert java_consume(b, "lat") == truth
    out = java("consume", b, "lat")
    assert {j["timestamp_type"] for j in out if "offset" in j} == {"LogAppendTime"}
    assert confluent_consume(b, "lat") == truth
    assert kcat_consume(b, "lat") == [r._replace(headers=()) for r in truth]
    tstypes = {json.loads(x)["tstype"] for x in kcat_run(
        "-C", "-b", b, "-t", "lat", "-o", "beginning", "-e", "-J", "-q").stdout.splitlines()}
    assert tstypes == {"logappend"}


@pytest.mark.slow
def test_the_java_admin_client_lists_describes_and_deletes_groups(served):
    """What kafka-consumer-groups.sh calls, on a group of one Java member."""
    b = served.bootstrap
    confluent_produce(b, "g", [Rec(0, None, b"r%d" % i) for i in range(10)], "none")
    m = java_member("solo", b, "admin-group", "g", **{"max.poll.records": 3})
    try:
        wait_until(lambda: len(m.records()) >= 10, 60, lambda: m.stderr.decode()[-2000:])
        groups, desc_group = java_admin(b, "list-groups", "describe-group admin-group")
        assert {"group_id": "admin-group", "state": "Stable"} in groups["groups"]
        assert desc_group["state"] == "Stable" and len(desc_group["members"]) == 1
        assert desc_group["members"][0]["client_id"] == "solo"
        assert len(desc_group["members"][0]["partitions"]) == 6
        busy = java_admin(b, "delete-group admin-group")[0]
        assert busy["error"] == "GroupNotEmptyException"
    finally:
        assert m.stop() == 0
    listed, deleted, gone = java_admin(b, "list-group-offsets admin-group",
                                       "delete-group admin-group", "list-groups")
    assert {(o["partition"], o["offset"]) for o in listed["offsets"]} >= {(0, 10)}
    assert deleted == {"deleted": "admin-group"}
    assert all(g["group_id"] != "admin-group" for g in gone["groups"])


def test_the_java_admin_client_sees_an_open_transaction_as_kafka_transactions_sh_does(served):
    """ListTransactions, DescribeTransactions and DescribeProducers of a transaction another
    process's engine holds open."""
    from engine import Record

    b, d = served.bootstrap, served.data_dir
    with Engine.open(d) as eng:
        txn = eng.producer("admin-txn", transaction_timeout_ms=600_000)
        txn.begin()
        txn.produce("g", [Record(None, b"in-txn")], 1)
        try:
            listed, described, producers = java_admin(
                b, "list-transactions", "describe-transactions admin-txn",
                "describe-producers g 1")
            (t,) = [t for t in listed["transactions"] if t["transactional_id"] == "admin-txn"]
            assert t["state"] == "Ongoing" and t["producer_id"] == txn.producer_id
            (dt,) = described["transactions"]
            assert dt["state"] == "Ongoing" and dt["producer_epoch"] == txn.epoch
            assert {"topic": "g", "partition": 1} in dt["partitions"]
            (p,) = [p for p in producers["producers"] if p["producer_id"] == txn.producer_id]
            assert p["current_transaction_start_offset"] == 0
        finally:
            txn.abort()
