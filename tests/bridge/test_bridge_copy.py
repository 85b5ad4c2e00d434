"""``engine.bridge``: data-dir topics copied into a Kafka-protocol cluster (a real ``rivven
serve`` in another process) and back, exactly once and resumable: what arrives, where a
rerun goes on, what is refused before anything is copied."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.bridge import (  # noqa: F401
    content,
    fill,
    kafka_content,
    kafka_fill,
    served_fixture,
    sink_fixture,
    source_fixture,
)
from helpers.kafka import start_server

from engine import Record
from engine.bridge.cluster import ClusterError
from engine.bridge.export import Export, export
from engine.bridge.importer import import_topics
from engine.errors import InvalidArgument, UnknownTopic
from engine.fetch.positions import Position
from engine.security.acl import Acl


def make_topic(bootstrap: str, name: str, parts: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, parts, replication_factor=-1)])[name].result(30)


def test_a_topic_goes_out_and_back_exactly_as_read_committed_sees_it(source, sink, served):
    fill(source, "orders", config={"retention.ms": "86400000", "cleanup.policy": "delete"})
    want = content(source, "orders")
    out = export(source, ["orders"], served.bootstrap)
    assert out["created"] == ["orders"] and out["exactly_once"]
    assert out["records"] == sum(map(len, want.values())) == 25
    assert out["group"] == "rivven-mirror-export-orders"
    got = kafka_content(served.bootstrap, "orders", 3)
    assert got == want  # keys, values, headers, tombstone, timestamps; no aborted record
    assert all(b"aborted" not in [r[0] for r in rows] for rows in got.values())

    back = import_topics(sink, ["orders"], served.bootstrap, prefix="back.")
    assert back["created"] == ["back.orders"] and back["records"] == out["records"]
    assert content(sink, "back.orders") == want
    assert sink.topic("back.orders").partitions == 3
    # the topic's configs went to the cluster and came back from it
    assert sink.topic("back.orders").config["retention.ms"] == "86400000"
    # the positions are the source's offsets, in the data dir's mirror group
    stored = sink.groups.committed(back["group"])
    assert sorted(stored) == [("back.orders", p) for p in range(3)]


def test_a_rerun_copies_only_what_came_since(source, sink, served):
    fill(source, "t")
    first = export(source, ["t"], served.bootstrap)
    assert export(source, ["t"], served.bootstrap)["records"] == 0
    source.produce("t", [Record(b"new", b"1", (), 1_700_000_500_000)], partition=2)
    assert export(source, ["t"], served.bootstrap)["records"] == 1
    assert kafka_content(served.bootstrap, "t", 3) == content(source, "t")
    a = import_topics(sink, ["t"], served.bootstrap)
    assert a["records"] == first["records"] + 1
    assert import_topics(sink, ["t"], served.bootstrap)["records"] == 0
    assert content(sink, "t") == content(source, "t")


def test_a_copy_stopped_at_a_position_resumes_there_without_a_duplicate(source, served):
    fill(source, "t")
    part = export(source, ["t"], served.bootstrap, stop=Position("offset", 3))
    assert part["records"] == 9 and [p["position"] for p in part["partitions"]] == [3, 3, 3]
    assert {p: len(rows) for p, rows in kafka_content(served.bootstrap, "t", 3).items()} == \
        {0: 3, 1: 3, 2: 3}
    rest = export(source, ["t"], served.bootstrap, txn_records=4)
    assert rest["transactions"] > 3  # (several steps: each one transaction)
    assert kafka_content(served.bootstrap, "t", 3) == content(source, "t")


def test_start_positions_apply_where_the_copy_has_none(source, served):
    fill(source, "t")
    out = export(source, ["t"], served.bootstrap, start=Position("timestamp",
                                                                 1_700_000_002_005))
    got = kafka_content(served.bootstrap, "t", 3)
    assert got[2] == [r for r in content(source, "t")[2] if r[3] >= 1_700_000_002_005]
    assert got[0] == content(source, "t")[0][-1:]  # (only the tombstone, written later)
    assert out["records"] == sum(map(len, got.values()))


def test_several_topics_with_a_prefix_and_one_to_another_name(source, served):
    fill(source, "a", parts=2)
    fill(source, "b", parts=1)
    out = export(source, ["a", "b"], served.bootstrap, prefix="copy.")
    assert sorted(out["created"]) == ["copy.a", "copy.b"]
    assert kafka_content(served.bootstrap, "copy.a", 2) == content(source, "a")
    assert kafka_content(served.bootstrap, "copy.b", 1) == content(source, "b")
    export(source, ["a"], served.bootstrap, to_topic="renamed")
    assert kafka_content(served.bootstrap, "renamed", 2) == content(source, "a")
    with pytest.raises(InvalidArgument, match="--to-topic names one destination"):
        export(source, ["a", "b"], served.bootstrap, to_topic="x")


def test_a_destination_with_fewer_partitions_is_refused_before_copying(source, sink, served):
    fill(source, "t")
    make_topic(served.bootstrap, "t", 2)
    with pytest.raises(InvalidArgument, match="has 2 partition.*the source 't' 3.*nothing was "
                       "copied"):
        export(source, ["t"], served.bootstrap)
    assert kafka_content(served.bootstrap, "t", 2) == {0: [], 1: []}
    # and the other way: a data-dir topic with fewer partitions than the cluster's
    make_topic(served.bootstrap, "wide", 3)
    kafka_fill(served.bootstrap, "wide", 3, transactions=False)
    sink.create_topic("wide", 1)
    with pytest.raises(InvalidArgument, match="data dir's topic 'wide' has 1 partition"):
        import_topics(sink, ["wide"], served.bootstrap)
    assert content(sink, "wide") == {0: []}


def test_an_import_leaves_aborted_transactions_out(sink, served):
    make_topic(served.bootstrap, "k", 3)
    kafka_fill(served.bootstrap, "k", 3)
    want = kafka_content(served.bootstrap, "k", 3)
    assert (b"y", b"committed") not in [(r[1], r[0]) for r in want[0]]
    out = import_topics(sink, ["k"], served.bootstrap)
    assert out["records"] == sum(map(len, want.values())) == 17
    assert content(sink, "k") == want
    assert all(b"aborted" not in [r[0] for r in rows] for rows in content(sink, "k").values())


def test_unknown_topics_and_an_unreachable_cluster_fail_clearly(source, sink, served):
    with pytest.raises(UnknownTopic, match="'nope' does not exist"):
        export(source, ["nope"], served.bootstrap)
    with pytest.raises(UnknownTopic, match=f"'nope' does not exist on {served.bootstrap}"):
        import_topics(sink, ["nope"], served.bootstrap)
    fill(source, "t")
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match="cannot reach the cluster at 127.0.0.1:1 within 2 s"):
        export(source, ["t"], "127.0.0.1:1", timeout=2)
    assert time.monotonic() - t0 < 20
    with pytest.raises(InvalidArgument, match='No such configuration property: "bogus"'):
        export(source, ["t"], served.bootstrap, config={"bogus": "1"})


def test_a_following_copy_takes_what_comes_until_stopped(source, sink, served):
    fill(source, "t")
    stop = threading.Event()
    result: list = []
    th = threading.Thread(target=lambda: result.append(export(
        source, ["t"], served.bootstrap, follow=True, stop_event=stop)))
    th.start()
    try:
        for i in range(5):
            source.produce("t", [Record(b"f%d" % i, b"v", (), 1_700_000_600_000 + i)],
                           partition=i % 3)
            time.sleep(0.3)
        deadline = time.monotonic() + 30
        while kafka_content(served.bootstrap, "t", 3) != content(source, "t"):
            assert time.monotonic() < deadline, "the followed records did not arrive"
            time.sleep(0.3)
    finally:
        stop.set()
        th.join(30)
    assert result and result[0]["records"] == 30


def test_a_second_copy_of_one_name_fences_the_first(source, served):
    fill(source, "t")
    conf = {"bootstrap.servers": served.bootstrap}
    first = Export(source, ["t"], conf, "same", txn_records=2)
    first.open()
    assert first.step() == 2
    second = Export(source, ["t"], conf, "same")
    second.open()  # (its init_transactions fences the first)
    with pytest.raises(ClusterError, match="another copy named 'same' started"):
        for _ in range(20):
            first.step()
    first.close()
    while second.step():
        pass
    second.close()
    assert kafka_content(served.bootstrap, "t", 3) == content(source, "t")


def test_without_transactions_at_least_once_is_asked_for_never_assumed(source, tmp_path):
    """A cluster that refuses the copy's transactional id (here by its ACLs: the same error
    a cluster without transactions gives) stops the copy with the way out named; with
    at_least_once it copies through an idempotent producer and plain offset commits."""
    import engine

    fill(source, "t")
    cluster_dir = str(tmp_path / "acl-cluster")
    with engine.Engine.open(cluster_dir) as c:
        c.acls.add([Acl.make(rt, name, "Literal", "User:*", "*", "All", "Allow")
                    for rt, name in (("Topic", "*"), ("Group", "*"),
                                     ("Cluster", "kafka-cluster"))])
    served = start_server(cluster_dir)
    try:
        with pytest.raises(ClusterError, match="cannot start the transactional producer.*"
                           "--at-least-once copies with an idempotent producer"):
            export(source, ["t"], served.bootstrap, timeout=10)
        out = export(source, ["t"], served.bootstrap, at_least_once=True, timeout=10)
        assert not out["exactly_once"] and out["transactional_id"] is None
        assert kafka_content(served.bootstrap, "t", 3) == content(source, "t")
        assert export(source, ["t"], served.bootstrap, at_least_once=True)["records"] == 0
    finally:
        served.kill()
