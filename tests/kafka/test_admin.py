"""Kafka's admin APIs through ``rivven serve`` (engine/kafka/api_admin.py) with real clients —
confluent-kafka's AdminClient (librdkafka 2.16) and kafka-python's KafkaAdminClient — against a
real server process; what they do is what the engine and the ``rivven`` command see. Also
message.timestamp.type=LogAppendTime end to end, auto.create.topics.enable on and off, and
every version of every admin API served, through raw requests."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from confluent_kafka import (
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from helpers import run_rivven
from helpers.kafka import FAST, start_server

from engine import Engine
from engine.kafka.config import ServeConfig
from engine.kafka.protocol import Messages

OLD = 1_500_000_000_000  # a client timestamp far in the past


@pytest.fixture
def server(tmp_path):
    """``start(*settings)``: a data dir with topic ``t`` (1 partition) served; stopped after."""
    started = []

    def start(*settings: str):
        d = str(tmp_path / f"data{len(started)}")
        run_rivven(d, "topic", "create", "t", check=True)
        s = start_server(d, settings=FAST + settings)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def admin(s) -> AdminClient:
    return AdminClient({"bootstrap.servers": s.bootstrap})


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return e.value.args[0]


def topics(s) -> dict:
    """``rivven topic list --json`` of the served data dir, by topic."""
    out = run_rivven(s.data_dir, "topic", "list", "--json", check=True).stdout
    return {t["topic"]: t for t in json.loads(out)}


def engine_config(s, topic: str) -> dict:
    with Engine.open(s.data_dir, read_only=True) as eng:
        return dict(eng.topic(topic).config)


# ---------------------------------------------------------------- raw requests
MESSAGES = Messages()


def call(bootstrap: str, key: int, version: int, **fields):
    """One request of API ``key`` at ``version`` on a new connection: the decoded response."""
    req = MESSAGES.request[key](version=version, **fields)
    body = req.encode(version=version)
    flexible = MESSAGES.flexible(key, version)
    head = struct.pack(">hhih", key, version, 7, 4) + b"test" + (b"\x00" if flexible else b"")
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        data = _read(sock, size)
    assert struct.unpack(">i", data[:4])[0] == 7
    skip = 5 if flexible and key != 18 else 4  # (the response header's tagged fields)
    return MESSAGES.response[key].decode(data[skip:], version=version)


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "the server closed the connection"
        buf += chunk
    return buf


def metadata(bootstrap: str, topic: str, auto: bool = True):
    return call(bootstrap, 3, 12, topics=[MESSAGES.request[3].MetadataRequestTopic(
        topic_id=None, name=topic)], allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False).topics[0]


# ---------------------------------------------------------------- topics
def test_confluent_creates_and_deletes_topics_the_engine_sees_at_once(server):
    s = server("num.partitions=3")
    a = admin(s)
    futures = a.create_topics([
        NewTopic("plain"),  # -1, -1: num.partitions and replication factor 1
        NewTopic("two", 2, 1, config={"retention.ms": "1000", "cleanup.policy": "compact"}),
        NewTopic("assigned", 2, replica_assignment=[[0], [0]]),
    ])
    for f in futures.values():
        assert f.result(30) is None
    listed = topics(s)
    assert listed["plain"]["partitions"] == 3
    assert listed["two"]["partitions"] == 2
    assert listed["two"]["config"] == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert listed["assigned"]["partitions"] == 2
    meta = a.list_topics(timeout=30).topics
    assert {"plain", "two", "assigned", "t"} <= set(meta)
    assert [p.replicas for p in meta["two"].partitions.values()] == [[0], [0]]

    refused = {
        "t": (NewTopic("t", 1, 1), KafkaError.TOPIC_ALREADY_EXISTS, "Topic 't' already exists."),
        "rf": (NewTopic("rf", 1, 3), KafkaError.INVALID_REPLICATION_FACTOR, "one node"),
        "zero": (NewTopic("zero", 0, 1), KafkaError.INVALID_PARTITIONS, "num_partitions 0"),
        "cfg": (NewTopic("cfg", 1, 1, config={"retention.ms": "soon"}),
                KafkaError.INVALID_CONFIG,
                "invalid value 'soon' for retention.ms: must be an integer"),
        "cfg2": (NewTopic("cfg2", 1, 1, config={"retention.msx": "1"}),
                 KafkaError.INVALID_CONFIG, "(did you mean retention.ms?)"),
        "bad/name": (NewTopic("bad/name", 1, 1), KafkaError.TOPIC_EXCEPTION, "bad/name"),
        "elsewhere": (NewTopic("elsewhere", 1, replica_assignment=[[1]]),
                      KafkaError.INVALID_REPLICA_ASSIGNMENT, "one node (id 0)"),
        "sealed": (NewTopic("sealed", 1, 1, config={"encryption.enable": "true",
                                                    "encryption.key.id": "k1"}),
                   KafkaError.INVALID_CONFIG, "master key 'k1' is needed and no keyring"),
    }
    futures = a.create_topics([nt for nt, _, _ in refused.values()])
    for name, (_, code, text) in refused.items():
        err = error_of(futures[name])
        assert err.code() == code, (name, err)
        assert text in err.str(), (name, err.str())
    assert set(topics(s)) == {"t", "plain", "two", "assigned"}

    # validate_only: checked, not made
    (f,) = a.create_topics([NewTopic("dry", 2, 1)], validate_only=True).values()
    assert f.result(30) is None
    (f,) = a.create_topics([NewTopic("t", 1, 1)], validate_only=True).values()
    assert error_of(f).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert "dry" not in topics(s)

    for f in a.delete_topics(["plain", "two"]).values():
        assert f.result(30) is None
    assert set(topics(s)) == {"t", "assigned"}
    (f,) = a.delete_topics(["plain"]).values()
    assert error_of(f).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_creates_grows_and_deletes_topics(server):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

    s = server()
    a = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        out = a.create_topics([KNewTopic("kp", 2, 1, topic_configs={"segment.bytes": "4096"})])
        (res,) = out["topics"]
        assert (res["error_code"], res["num_partitions"], res["replication_factor"]) == (0, 2, 1)
        assert res["configs"]["segment.bytes"]["value"] == "4096"  # (v5+: the topic's configs)
        assert topics(s)["kp"]["partitions"] == 2
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([KNewTopic("kp", 1, 1)], raise_errors=True)
        a.create_partitions({"kp": KNewPartitions(5)})
        assert topics(s)["kp"]["partitions"] == 5
        with Engine.open(s.data_dir, read_only=True) as eng:
            assert eng.topic("kp").partitions == 5
        with pytest.raises(InvalidPartitionsError, match="higher than the requested 3"):
            a.create_partitions({"kp": KNewPartitions(3)}, raise_errors=True)
        with pytest.raises(InvalidPartitionsError, match="already has 5 partitions"):
            a.create_partitions({"kp": KNewPartitions(5)}, raise_errors=True)
        a.create_partitions({"kp": KNewPartitions(9)}, validate_only=True)
        assert topics(s)["kp"]["partitions"] == 5
        a.delete_topics(["kp"])
        assert "kp" not in topics(s)
    finally:
        a.close()


def test_confluent_adds_partitions_one_node_only(server):
    s = server()
    a = admin(s)
    (f,) = a.create_partitions([NewPartitions("t", 3)]).values()
    assert f.result(30) is None
    assert topics(s)["t"]["partitions"] == 3
    (f,) = a.create_partitions([NewPartitions("t", 4, replica_assignment=[[1]])]).values()
    assert error_of(f).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    (f,) = a.create_partitions([NewPartitions("nope", 4)]).values()
    assert error_of(f).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topics(s)["t"]["partitions"] == 3


def test_delete_topics_by_id_and_with_deletion_disabled(server):
    s = server("delete.topic.enable=false")
    State = MESSAGES.request[20].DeleteTopicState
    import uuid

    resp = call(s.bootstrap, 20, 6, topics=[State(name="t", topic_id=uuid.UUID(int=0)),
                                            State(name=None, topic_id=uuid.uuid4())],
                timeout_ms=30000)
    by_id, = [r for r in resp.responses if r.name is None]
    assert by_id.error_code == 100  # UNKNOWN_TOPIC_ID: ids are zero here
    by_name, = [r for r in resp.responses if r.name == "t"]
    assert by_name.error_code == 73  # TOPIC_DELETION_DISABLED
    assert "delete.topic.enable=false" in by_name.error_message
    assert "t" in topics(s)


# ---------------------------------------------------------------- configs
def test_describe_configs_shows_each_value_and_source_the_engine_holds(server):
    s = server("num.partitions=4")
    a = admin(s)
    for f in a.alter_configs([ConfigResource("topic", "t", set_config={
            "retention.ms": "5000", "message.timestamp.type": "LogAppendTime"})]).values():
        assert f.result(30) is None
    r = ConfigResource("topic", "t")
    (f,) = a.describe_configs([r]).values()
    got = f.result(30)
    shown = json.loads(run_rivven(s.data_dir, "topic", "describe", "t", "--json",
                                  check=True).stdout)["config_entries"]
    source = {"topic": ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
              "default": ConfigSource.DEFAULT_CONFIG.value}
    assert {k: (e.value, e.source) for k, e in got.items()} == \
        {e["key"]: (e["value"], source[e["source"]]) for e in shown}
    ret = got["retention.ms"]
    assert (ret.value, ret.source, ret.is_default, ret.is_read_only) == \
        ("5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    assert [(y.name, y.value, y.source) for y in ret.synonyms.values()] == [
        ("retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)]
    seg = got["segment.ms"]
    assert (seg.value, seg.source, seg.is_default) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value, True)
    assert got["message.timestamp.type"].value == "LogAppendTime"
    (f,) = a.describe_configs([ConfigResource("topic", "nope")]).values()
    assert error_of(f).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    b = ConfigResource("broker", "0")
    (f,) = a.describe_configs([b]).values()
    broker = f.result(30)
    assert broker["num.partitions"].value == "4"
    assert broker["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["auto.create.topics.enable"].value == "false"
    assert broker["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    assert broker["wal.sync"].value == "always" and broker["wal.sync"].is_read_only
    from engine.settings import DEFAULTS

    assert set(broker) == set(ServeConfig().as_kafka()) | set(DEFAULTS)
    assert all(e.is_read_only for e in broker.values())
    (f,) = a.alter_configs([ConfigResource("broker", "0",
                                           set_config={"num.partitions": "2"})]).values()
    err = error_of(f)
    assert err.code() == KafkaError.INVALID_REQUEST and "--set" in err.str()


def test_documentation_and_types_for_a_v3_client(server):
    s = server()
    R = MESSAGES.request[32]
    resp = call(s.bootstrap, 32, 4, resources=[R.DescribeConfigsResource(
        resource_type=2, resource_name="t", configuration_keys=["retention.ms",
                                                                "cleanup.policy"])],
        include_synonyms=False, include_documentation=True)
    (res,) = resp.results
    by = {c.name: c for c in res.configs}
    assert set(by) == {"retention.ms", "cleanup.policy"}
    assert (by["retention.ms"].config_type, by["cleanup.policy"].config_type) == (5, 7)
    assert "deleted" in by["retention.ms"].documentation and by["retention.ms"].synonyms == []
    # v0: is_default instead of a source
    resp = call(s.bootstrap, 32, 0, resources=[R.DescribeConfigsResource(
        resource_type=2, resource_name="t", configuration_keys=None)])
    assert all(c.is_default for c in resp.results[0].configs)
    # a resource type not served, and a broker that is not this one
    resp = call(s.bootstrap, 32, 4, resources=[
        R.DescribeConfigsResource(resource_type=8, resource_name="0", configuration_keys=None),
        R.DescribeConfigsResource(resource_type=4, resource_name="5", configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    assert [r.error_code for r in resp.results] == [42, 42]  # INVALID_REQUEST


def test_incremental_alter_configs_set_delete_append_subtract(server):
    s = server()
    a = admin(s)
    r = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("retention.ms", "9000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    (f,) = a.incremental_alter_configs([r]).values()
    assert f.result(30) is None
    assert engine_config(s, "t") == {"retention.ms": "9000", "cleanup.policy": "compact,delete"}
    r = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
    ])
    (f,) = a.incremental_alter_configs([r]).values()
    assert f.result(30) is None
    assert engine_config(s, "t") == {"cleanup.policy": "compact"}
    assert "cleanup.policy=compact" in run_rivven(s.data_dir, "topic", "list",
                                                  check=True).stdout.decode()

    for entry, text in [
        (ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND),
         "Config value append is not allowed for config key: retention.ms"),
        (ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET),
         "invalid value '1' for segment.bytes: must be between 128"),
        (ConfigEntry("cleanup.policy", "compact",
                     incremental_operation=AlterConfigOpType.SUBTRACT),
         "invalid value '' for cleanup.policy"),
    ]:
        (f,) = a.incremental_alter_configs([ConfigResource("topic", "t",
                                                           incremental_configs=[entry])]).values()
        err = error_of(f)
        assert err.code() == KafkaError.INVALID_CONFIG and text in err.str(), err.str()
    assert engine_config(s, "t") == {"cleanup.policy": "compact"}

    # validate_only: checked, not applied
    r = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    (f,) = a.incremental_alter_configs([r], validate_only=True).values()
    assert f.result(30) is None
    assert engine_config(s, "t") == {"cleanup.policy": "compact"}


def test_alter_configs_replaces_the_whole_set_as_kafka_does(server):
    s = server()
    a = admin(s)
    run_rivven(s.data_dir, "topic", "alter-config", "t", "--set", "retention.ms=7000",
               "--set", "segment.bytes=8192", check=True)
    (f,) = a.alter_configs([ConfigResource("topic", "t",
                                           set_config={"segment.ms": "60000"})]).values()
    assert f.result(30) is None
    assert engine_config(s, "t") == {"segment.ms": "60000"}  # the others back to defaults
    (f,) = a.alter_configs([ConfigResource("topic", "t", set_config={"segment.ms": "0"})]).values()
    err = error_of(f)
    assert err.code() == KafkaError.INVALID_CONFIG and "segment.ms" in err.str()
    assert engine_config(s, "t") == {"segment.ms": "60000"}


def test_kafka_python_alters_and_describes_configs(server):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    s = server()
    a = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        a.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "t",
                                         configs={"retention.ms": "3000"})])
        assert engine_config(s, "t") == {"retention.ms": "3000"}
        got = a.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "t")],
                                 config_filter="all")
        cfg = got["topic"]["t"]
        assert cfg["retention.ms"]["value"] == "3000"
        assert cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        a.close()


# ---------------------------------------------------------------- delete records
def test_delete_records_moves_the_log_start(server):
    s = server()
    p = Producer({"bootstrap.servers": s.bootstrap})
    for i in range(10):
        p.produce("t", b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    a = admin(s)
    (f,) = a.delete_records([TopicPartition("t", 0, 4)]).values()
    assert f.result(30).low_watermark == 4
    offsets = json.loads(run_rivven(s.data_dir, "offsets", "t", "--json", check=True).stdout)
    assert (offsets[0]["start_offset"], offsets[0]["end_offset"]) == (4, 10)
    (f,) = a.delete_records([TopicPartition("t", 0, 2)]).values()  # below it: stays
    assert f.result(30).low_watermark == 4
    (f,) = a.delete_records([TopicPartition("t", 0, 11)]).values()
    assert error_of(f).code() == KafkaError.OFFSET_OUT_OF_RANGE
    (f,) = a.delete_records([TopicPartition("t", 0, OFFSET_END)]).values()  # -1: the HW
    assert f.result(30).low_watermark == 10
    offsets = json.loads(run_rivven(s.data_dir, "offsets", "t", "--json", check=True).stdout)
    assert offsets[0]["start_offset"] == 10
    # (a client asks for a partition's leader first: these reach the server raw)
    T = MESSAGES.request[21].DeleteRecordsTopic
    resp = call(s.bootstrap, 21, 2, topics=[
        T(name="t", partitions=[T.DeleteRecordsPartition(partition_index=3, offset=0),
                                T.DeleteRecordsPartition(partition_index=0, offset=-5)]),
        T(name="nope", partitions=[T.DeleteRecordsPartition(partition_index=0, offset=0)])],
        timeout_ms=30000)
    got = [(t.name, p.partition_index, p.error_code, p.low_watermark)
           for t in resp.topics for p in t.partitions]
    assert got == [("t", 3, 3, -1), ("t", 0, 1, -1), ("nope", 0, 3, -1)]


def test_kafka_python_delete_records(server):
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    s = server()
    run_rivven(s.data_dir, "produce", "t", input=b"a\nb\nc\n", check=True)
    a = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        out = a.delete_records({KTopicPartition("t", 0): 2})
        assert out[KTopicPartition("t", 0)]["low_watermark"] == 2
    finally:
        a.close()
    with Engine.open(s.data_dir, read_only=True) as eng:
        assert eng.offsets.of_partition("t", 0) == (2, 3)


# ---------------------------------------------------------------- timestamps
def _consume(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    c.close()
    return got


def test_log_append_time_replaces_a_clients_timestamps_end_to_end(server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    s = server()
    a = admin(s)
    (f,) = a.create_topics([NewTopic("lat", 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})]).values()
    f.result(30)
    reports = []
    p = Producer({"bootstrap.servers": s.bootstrap})
    before = int(time.time() * 1000)
    for i in range(3):
        p.produce("lat", b"v%d" % i, timestamp=OLD + i,
                  on_delivery=lambda err, m: reports.append((err, m.timestamp())))
    assert p.flush(30) == 0
    after = int(time.time() * 1000)
    assert all(err is None for err, _ in reports)
    stamped = {ts for _, ts in reports}
    assert len(stamped) == 1
    kind, append_time = stamped.pop()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= append_time <= after + 1000
    got = _consume(s.bootstrap, "lat", 3)
    assert [m.timestamp() for m in got] == [(TIMESTAMP_LOG_APPEND_TIME, append_time)] * 3
    kc = KafkaConsumer(bootstrap_servers=s.bootstrap)
    kc.assign([KTopicPartition("lat", 0)])
    kc.seek_to_beginning()
    recs, deadline = [], time.monotonic() + 30
    while len(recs) < 3 and time.monotonic() < deadline:
        recs.extend(r for rs in kc.poll(1000).values() for r in rs)
    kc.close()
    assert [(r.timestamp_type, r.timestamp) for r in recs] == [(1, append_time)] * 3
    with Engine.open(s.data_dir, read_only=True) as eng:
        assert [r.timestamp for r in eng.read("lat", 0, 0)] == [append_time] * 3
    # the CreateTime topic beside it keeps what the client sent
    p.produce("t", b"c", timestamp=OLD)
    assert p.flush(30) == 0
    (m,) = _consume(s.bootstrap, "t", 1)
    assert m.timestamp() == (TIMESTAMP_CREATE_TIME, OLD)


def _produce_raw(bootstrap: str, topic: str, attributes: int = 0):
    """One Produce v9 of one record stamped OLD, with these batch attributes: the partition's
    answer."""
    from engine.format import kafka_batch

    batch = kafka_batch.encode(0, attributes, 0, OLD, OLD, -1, -1, -1, [0], [OLD], [None],
                               [b"raw"], None)
    T = MESSAGES.request[0].TopicProduceData
    resp = call(bootstrap, 0, 9, transactional_id=None, acks=-1, timeout_ms=30000,
                topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(
                    index=0, records=batch)])])
    return resp.responses[0].partition_responses[0]


def test_produce_answers_the_log_append_time_and_refuses_a_clients_own(server):
    s = server()
    run_rivven(s.data_dir, "topic", "create", "lat", "-c",
               "message.timestamp.type=LogAppendTime", check=True)
    before = int(time.time() * 1000)
    ok = _produce_raw(s.bootstrap, "lat")
    assert ok.error_code == 0 and before - 1000 <= ok.log_append_time_ms <= time.time() * 1000 + 1000
    with Engine.open(s.data_dir, read_only=True) as eng:
        assert [r.timestamp for r in eng.read("lat", 0, 0)] == [ok.log_append_time_ms]
    assert _produce_raw(s.bootstrap, "t").log_append_time_ms == -1  # (CreateTime)
    for topic in ("lat", "t"):  # a batch claiming LogAppendTime itself: refused, as by Kafka
        bad = _produce_raw(s.bootstrap, topic, attributes=0x08)
        assert bad.error_code == 32 and "LogAppendTime" in bad.error_message  # INVALID_TIMESTAMP
    with Engine.open(s.data_dir, read_only=True) as eng:
        assert eng.offsets.of_partition("lat", 0)[1] == 1 and eng.offsets.of_partition("t", 0)[1] == 1


def test_a_timestamp_out_of_bounds_is_invalid_timestamp(server):
    s = server()
    run_rivven(s.data_dir, "topic", "alter-config", "t", "--set",
               "message.timestamp.before.max.ms=3600000", check=True)
    errors = []
    p = Producer({"bootstrap.servers": s.bootstrap, "retries": 0})
    p.produce("t", b"old", timestamp=OLD, on_delivery=lambda err, m: errors.append(err))
    p.flush(30)
    p.produce("t", b"now", on_delivery=lambda err, m: errors.append(err))
    p.flush(30)
    # (a batch is refused whole, as Kafka refuses it: the second went in a batch of its own)
    assert [e.code() if e is not None else 0 for e in errors] == [
        KafkaError.INVALID_TIMESTAMP, 0]
    with Engine.open(s.data_dir, read_only=True) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [b"now"]
    assert "message.timestamp.before.max.ms=3600000" in s.log()


# ---------------------------------------------------------------- auto-create
def test_auto_create_on_makes_topics_with_num_partitions(server):
    from kafka import KafkaProducer

    s = server("auto.create.topics.enable=true", "num.partitions=3")
    first = metadata(s.bootstrap, "raw")
    assert first.error_code == 5 and first.partitions == []  # LEADER_NOT_AVAILABLE: ask again
    again = metadata(s.bootstrap, "raw")
    assert again.error_code == 0 and len(again.partitions) == 3
    assert metadata(s.bootstrap, "notasked", auto=False).error_code == 3

    reports = []
    p = Producer({"bootstrap.servers": s.bootstrap})
    p.produce("by-librdkafka", b"x", on_delivery=lambda err, m: reports.append(err))
    assert p.flush(30) == 0 and reports == [None]
    kp = KafkaProducer(bootstrap_servers=s.bootstrap)
    kp.send("by-kafka-python", b"y").get(30)
    kp.close()
    listed = topics(s)
    assert {n: listed[n]["partitions"] for n in ("raw", "by-librdkafka", "by-kafka-python")} \
        == {"raw": 3, "by-librdkafka": 3, "by-kafka-python": 3}
    assert "notasked" not in listed
    assert "created topic by-librdkafka (3 partitions)" in s.log()


def test_auto_create_off_answers_unknown_topic_and_says_why(server):
    s = server()
    assert metadata(s.bootstrap, "nope").error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    errors = []
    p = Producer({"bootstrap.servers": s.bootstrap, "message.timeout.ms": 3000,
                  "topic.metadata.propagation.max.ms": 1000})
    p.produce("absent", b"x", on_delivery=lambda err, m: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    assert set(topics(s)) == {"t"}
    log = s.log()
    assert "asks for topic absent, which does not exist" in log
    assert "--set auto.create.topics.enable=true" in log


# ---------------------------------------------------------------- every version
SERVED = {19: (0, 7), 20: (0, 6), 37: (0, 3), 21: (0, 2), 32: (0, 4), 33: (0, 2), 44: (0, 1)}


def test_api_versions_lists_the_admin_apis(server):
    s = server()
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in call(s.bootstrap, 18, 3, client_software_name="t",
                          client_software_version="1").api_keys}
    assert {k: keys.get(k) for k in SERVED} == SERVED


def test_every_version_of_every_admin_api_answers(server):
    s = server()
    b = s.bootstrap
    Q = {k: MESSAGES.request[k] for k in SERVED}
    for v in range(SERVED[19][1] + 1):
        topic = Q[19].CreatableTopic(name=f"v{v}", num_partitions=2, replication_factor=1,
                                     assignments=[], configs=[
                                         Q[19].CreatableTopic.CreatableTopicConfig(
                                             name="retention.ms", value="1000")])
        resp = call(b, 19, v, topics=[topic], timeout_ms=30000, validate_only=False)
        assert [(t.name, t.error_code) for t in resp.topics] == [(f"v{v}", 0)], (v, resp)
    assert all(topics(s)[f"v{v}"]["partitions"] == 2 for v in range(8))
    for v in range(SERVED[37][1] + 1):
        resp = call(b, 37, v, topics=[Q[37].CreatePartitionsTopic(
            name=f"v{v}", count=3, assignments=None)], timeout_ms=30000, validate_only=False)
        assert [r.error_code for r in resp.results] == [0], (v, resp)
    for v in range(SERVED[32][1] + 1):
        resp = call(b, 32, v, resources=[Q[32].DescribeConfigsResource(
            resource_type=2, resource_name=f"v{v}", configuration_keys=["retention.ms"])],
            include_synonyms=True, include_documentation=True)
        (res,) = resp.results
        assert res.error_code == 0 and [(c.name, c.value) for c in res.configs] == \
            [("retention.ms", "1000")], (v, resp)
    R33 = Q[33].AlterConfigsResource
    for v in range(SERVED[33][1] + 1):
        resp = call(b, 33, v, resources=[R33(resource_type=2, resource_name=f"v{v}", configs=[
            R33.AlterableConfig(name="segment.ms", value="5000")])], validate_only=False)
        assert [r.error_code for r in resp.responses] == [0], (v, resp)
        assert engine_config(s, f"v{v}") == {"segment.ms": "5000"}
    R44 = Q[44].AlterConfigsResource
    for v in range(SERVED[44][1] + 1):
        resp = call(b, 44, v, resources=[R44(resource_type=2, resource_name=f"v{v}", configs=[
            R44.AlterableConfig(name="retention.ms", config_operation=0, value="2000")])],
            validate_only=False)
        assert [r.error_code for r in resp.responses] == [0], (v, resp)
        assert engine_config(s, f"v{v}") == {"segment.ms": "5000", "retention.ms": "2000"}
    run_rivven(s.data_dir, "produce", "v0", "-p", "0", input=b"a\nb\nc\n", check=True)
    for v in range(SERVED[21][1] + 1):
        T = Q[21].DeleteRecordsTopic
        resp = call(b, 21, v, topics=[T(name="v0", partitions=[T.DeleteRecordsPartition(
            partition_index=0, offset=v + 1)])], timeout_ms=30000)
        (part,) = resp.topics[0].partitions
        assert (part.error_code, part.low_watermark) == (0, v + 1), (v, resp)
    for v in range(SERVED[20][1] + 1):
        if v >= 6:
            resp = call(b, 20, v, topics=[Q[20].DeleteTopicState(name=f"v{v}", topic_id=None)],
                        timeout_ms=30000)
        else:
            resp = call(b, 20, v, topic_names=[f"v{v}"], timeout_ms=30000)
        assert [(r.name, r.error_code) for r in resp.responses] == [(f"v{v}", 0)], (v, resp)
    assert set(topics(s)) == {"t", "v7"}


def test_a_request_naming_a_topic_twice_gets_invalid_request_for_it(server):
    s = server()
    T = MESSAGES.request[19].CreatableTopic
    resp = call(s.bootstrap, 19, 7, topics=[
        T(name="dup", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        T(name="dup", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        T(name="fine", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False)
    assert [(t.name, t.error_code) for t in resp.topics] == [("dup", 42), ("dup", 42),
                                                             ("fine", 0)]
    assert set(topics(s)) == {"t", "fine"}


def test_kafka_md_lists_every_serve_setting_with_its_default():
    from helpers import ROOT

    text = (ROOT / "docs" / "KAFKA.md").read_text()
    section = text.split("<!-- section: settings -->")[1].split("<!-- section:")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1].strip("`")
    assert rows == ServeConfig().as_kafka()
