"""The cross-client matrix against one real ``rivven serve``: confluent-kafka, kafka-python,
kcat and Kafka's Java client each produce (keys, null keys and values, headers with repeated
names and null values, explicit timestamps, every codec), and each of them consumes what every
one wrote: partitions, offsets, keys, values, headers and timestamps equal what
``Engine.read`` holds and what ``rivven consume`` prints. Then what each client asks of the
server beyond that: metadata, offsets by time, acks=0 and 1, small fetches, the Java
AdminClient's calls."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from helpers import run_rivven
from helpers.kafka import Served, start_server
from helpers.kafka_clients import (
    CODECS,
    Rec,
    confluent_consume,
    confluent_produce,
    first_difference,
    held,
    java_admin,
    java_consume,
    java_consume_topics,
    java_popen,
    java_produce,
    java_produce_runs,
    kafka_python_consume,
    kafka_python_produce,
    kcat,
    kcat_consume,
    kcat_produce,
    kcat_run,
    rivven_consume,
)

PARTITIONS = 3
PER_CODEC = 40
BASE_TS = 1_700_000_000_000
PRODUCERS = ("confluent", "kafka-python", "kcat", "java")


def records(client: str, codec_index: int) -> list[Rec]:
    """What ``client`` sends with the codec ``CODECS[codec_index]``: UTF-8 (kcat prints text),
    compressible, spread over the partitions; null keys, null and empty values, a null
    header value (kafka-python sends no null header value: an empty one) and a repeated
    header name where the client can send them."""
    codec = CODECS[codec_index]
    if client == "kcat":  # one partition and one header set a run, the producer's clock
        return [Rec(codec_index % PARTITIONS, f"kcat/{codec}/{i}/ключ".encode(),
                    (f"{codec} {i} ✓ " * (1 + i % 7)).encode(),
                    (("codec", codec.encode()), ("by", b"kcat"))) for i in range(PER_CODEC)]
    out = []
    for i in range(PER_CODEC):
        key: bytes | None = f"{client}/{codec}/{i}/ключ".encode()
        value: bytes | None = (f"{codec} {i} ✓ " * (1 + i % 7)).encode()
        if i % 10 == 7:
            key = None
        if i % 10 == 8:
            value = b""
        if i % 10 == 9:
            value = None
        null = b"" if client == "kafka-python" else None
        headers = (("codec", codec.encode()), ("i", str(i).encode()), ("dup", b"1"),
                   ("dup", b"2"), ("null", null))
        out.append(Rec((codec_index + i) % PARTITIONS, key, value, headers,
                       BASE_TS + codec_index * 100_000 + i))
    return out


def produce(client: str, bootstrap: str, topic: str) -> tuple[list[Rec], list[tuple[int, int]]]:
    """Every codec's records from ``client``: what was sent and the (partition, offset)
    acknowledged for each (kcat reports none)."""
    runs = [(codec, records(client, i)) for i, codec in enumerate(CODECS)]
    sent = [r for _, rs in runs for r in rs]
    acks: list[tuple[int, int]] = []
    if client == "java":
        acks = java_produce_runs(bootstrap, topic, runs)
    else:
        for codec, rs in runs:
            if client == "confluent":
                acks += confluent_produce(bootstrap, topic, rs, codec)
            elif client == "kafka-python":
                acks += kafka_python_produce(bootstrap, topic, rs, codec)
            else:
                kcat_produce(bootstrap, topic, rs, codec)
    return sent, acks


CONSUMERS: dict[str, Callable[[str, str], list[Rec]]] = {
    "confluent": confluent_consume,
    "kafka-python": kafka_python_consume,
    "kcat": kcat_consume,
}


def content(r: Rec) -> tuple:
    return (r.key, r.value, r.headers, r.timestamp)


@pytest.fixture
def server(tmp_path) -> Iterator[Served]:
    d = str(tmp_path / "data")
    for client in PRODUCERS:
        run_rivven(d, "topic", "create", f"from-{client}", "--partitions", str(PARTITIONS),
                   check=True)
    s = start_server(d)
    try:
        yield s
    finally:
        s.kill()


@pytest.mark.slow
def test_every_client_reads_what_every_client_wrote_as_the_engine_holds_it(server):
    bootstrap, problems = server.bootstrap, []
    sent: dict[str, list[Rec]] = {}
    started = int(time.time() * 1000)
    for client in PRODUCERS:
        topic = f"from-{client}"
        sent[client], acks = produce(client, bootstrap, topic)
        truth = held(server.data_dir, topic)
        # what was sent is stored, in order within each partition, with its timestamp
        for p in range(PARTITIONS):
            want = [content(r) for r in sent[client] if r.partition == p]
            have = [content(r)[:3] for r in truth if r.partition == p]
            if client == "kcat":  # kcat sets no timestamp: the producer's clock, now
                want = [w[:3] for w in want]
                late = [r for r in truth if not started <= r.timestamp <= time.time() * 1000]
                if late:
                    problems.append(f"kcat's records have timestamps outside the run: {late[:2]}")
            else:
                have = [content(r) for r in truth if r.partition == p]
            if have != want:
                problems.append(f"{client} wrote partition {p}: {first_difference(have, want)}")
        # each acknowledged offset holds the record it acknowledged
        at = {(r.partition, r.offset): content(r) for r in truth}
        wrong = [(a, content(r)) for a, r in zip(acks, sent[client]) if at.get(a) != content(r)]
        if acks and (len(acks) != len(sent[client]) or wrong):
            problems.append(f"{client}'s acknowledged offsets: {len(acks)} acks, wrong: {wrong[:2]}")
        if rivven_consume(server.data_dir, topic) != truth:
            problems.append(f"rivven consume {topic}: "
                            f"{first_difference(rivven_consume(server.data_dir, topic), truth)}")
    topics = [f"from-{c}" for c in PRODUCERS]
    truths = {t: held(server.data_dir, t) for t in topics}
    assert all(len(truths[t]) == len(CODECS) * PER_CODEC for t in topics), \
        {t: len(v) for t, v in truths.items()}
    by_java = java_consume_topics(bootstrap, topics)
    for consumer in (*CONSUMERS, "java"):
        for topic in topics:
            got = by_java[topic] if consumer == "java" else CONSUMERS[consumer](bootstrap, topic)
            if got != truths[topic]:
                problems.append(f"{consumer} reading {topic}: "
                                f"{first_difference(got, truths[topic])}")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ beyond the matrix
@pytest.fixture
def one(tmp_path) -> Iterator[Served]:
    """Topic ``t`` (2 partitions) with ten records in partition 1 (timestamps 10 ms apart),
    served."""
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)
    s = start_server(d)
    try:
        confluent_produce(s.bootstrap, "t", [Rec(1, b"k%d" % i, b"v%d" % i, (), BASE_TS + 10 * i)
                                             for i in range(10)], "none")
        yield s
    finally:
        s.kill()


def test_kcat_lists_metadata_and_finds_offsets_by_time(one):
    meta = json.loads(kcat_run("-L", "-J", "-b", one.bootstrap).stdout)
    assert meta["controllerid"] == 0 and [b["id"] for b in meta["brokers"]] == [0]
    (t,) = meta["topics"]
    assert t["topic"] == "t" and [p["partition"] for p in t["partitions"]] == [0, 1]
    assert all(p["leader"] == 0 and p["isrs"] == [{"id": 0}] for p in t["partitions"])

    def query(spec: str) -> str:  # one partition a run (librdkafka merges repeats)
        return kcat_run("-Q", "-b", one.bootstrap, "-t", spec).stdout.decode().split()[-1]

    assert query("t:1:-1") == "10"  # the end, not the last batch's base + 1
    assert query("t:1:-2") == "0"
    assert query(f"t:1:{BASE_TS + 35}") == "4"  # the first record at or after the time
    assert query(f"t:1:{BASE_TS + 90}") == "9"
    assert query(f"t:1:{BASE_TS + 91}") == "-1"
    assert query("t:0:-1") == "0"
    # kcat's own -o forms ride on the same ListOffsets: s@TIME, -N from the end
    out = kcat_run("-C", "-b", one.bootstrap, "-t", "t", "-p", "1", "-o", f"s@{BASE_TS + 75}",
                   "-e", "-q").stdout
    assert out.split() == [b"v8", b"v9"]
    out = kcat_run("-C", "-b", one.bootstrap, "-t", "t", "-p", "1", "-o", "-3", "-e", "-q").stdout
    assert out.split() == [b"v7", b"v8", b"v9"]


def test_kcat_reports_an_unknown_topic(one):
    r = subprocess.run([kcat(), "-C", "-b", one.bootstrap, "-t", "nope", "-e"],
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and b"Unknown topic or partition" in r.stderr


def test_the_java_admin_client_describes_the_cluster_and_lists_offsets(one):
    b = one.bootstrap
    specs = (("earliest", (0, -1)), ("latest", (10, -1)), ("max", (9, BASE_TS + 90)),
             (str(BASE_TS + 35), (4, BASE_TS + 40)), (str(BASE_TS + 91), (-1, -1)))
    cluster, topics, desc, unknown, *offsets = java_admin(
        b, "describe-cluster", "list-topics", "describe-topic t", "describe-topic nope",
        *(f"list-offsets t 1 {spec}" for spec, _ in specs))
    assert cluster["controller"] == 0 and [n["id"] for n in cluster["nodes"]] == [0]
    assert f"{cluster['nodes'][0]['host']}:{cluster['nodes'][0]['port']}" == b
    assert topics == {"topics": ["t"]}
    assert desc["partitions"] == [{"partition": p, "leader": 0, "replicas": 1, "isr": 1}
                                  for p in (0, 1)]
    assert unknown["error"] == "UnknownTopicOrPartitionException"
    assert [(o["offset"], o["timestamp"]) for o in offsets] == [want for _, want in specs]


@pytest.mark.slow
def test_every_client_produces_with_acks_0_and_1(one):
    b = one.bootstrap
    sent: list[Rec] = []

    def recs(tag: str) -> list[Rec]:
        out = [Rec(0, f"{tag}-{i}".encode(), b"v", (), None) for i in range(5)]
        sent.extend(out)
        return out

    for acks in (0, 1):
        no_idem = {"acks": acks, "enable.idempotence": False}
        confluent_produce(b, "t", recs(f"confluent-acks{acks}"), "gzip", **no_idem)
        kafka_python_produce(b, "t", recs(f"kafka-python-acks{acks}"), "gzip", acks=acks,
                             enable_idempotence=False)
        java_produce(b, "t", recs(f"java-acks{acks}"), "lz4", acks=str(acks),
                     **{"enable.idempotence": "false"})
        kcat_produce(b, "t", recs(f"kcat-acks{acks}"), "snappy", "-X", f"acks={acks}",
                     "-X", "enable.idempotence=false")
    deadline = time.monotonic() + 10  # acks=0: nothing says when the server has it
    while time.monotonic() < deadline:
        keys = [r.key for r in held(one.data_dir, "t") if r.partition == 0]
        if len(keys) >= len(sent):
            break
        time.sleep(0.2)
    assert sorted(keys) == sorted(r.key for r in sent)


@pytest.mark.slow
def test_small_fetches_and_near_limit_records_read_whole(one):
    b = one.bootstrap
    big = [Rec(0, b"big", bytes([65 + i]) * 900_000, (), BASE_TS) for i in range(3)]
    java_produce(b, "t", big, "none")
    kafka_python_produce(b, "t", big, "zstd")
    truth = held(one.data_dir, "t")
    assert len(truth) == 16
    # a partition's first batch is sent whole however small the limits (as Kafka does)
    small = {"max.partition.fetch.bytes": 100, "fetch.max.bytes": 100}
    assert java_consume(b, "t", **small) == truth
    assert kafka_python_consume(b, "t", max_partition_fetch_bytes=100,
                                fetch_max_bytes=100) == truth
    assert confluent_consume(b, "t", **{"max.partition.fetch.bytes": 100}) == truth
    assert kcat_consume(b, "t", "-X", "max.partition.fetch.bytes=100") == truth


@pytest.mark.slow
def test_a_waiting_fetch_of_every_client_wakes_when_records_arrive(tmp_path):
    """Each client waits in a long fetch (20 s) on its own topic; a record produced through
    the server (kafka-python) or by another process (the CLI) reaches it in well under that."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    d = str(tmp_path / "data")
    names = ("java", "kcat", "confluent", "kafka-python")
    for n in names:
        run_rivven(d, "topic", "create", f"wait-{n}", check=True)
    s = start_server(d)
    wait_ms = 20_000
    arrived: dict[str, float] = {}
    try:
        jv = java_popen("consume", s.bootstrap, "wait-java", props={"fetch.max.wait.ms": wait_ms,
                        "request.timeout.ms": 60_000}, opts={"min-records": 1})
        kc = subprocess.Popen([kcat(), "-C", "-b", s.bootstrap, "-t", "wait-kcat", "-c", "1",
                               "-q", "-X", f"fetch.wait.max.ms={wait_ms}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def confluent() -> None:
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "unused",
                          "fetch.wait.max.ms": wait_ms})
            c.assign([TopicPartition("wait-confluent", 0, 0)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    arrived["confluent"] = time.monotonic()
                    break
            c.close()

        def kafka_python() -> None:
            c = KafkaConsumer(bootstrap_servers=s.bootstrap, fetch_max_wait_ms=wait_ms,
                              request_timeout_ms=60_000, auto_offset_reset="earliest")
            c.assign([KTP("wait-kafka-python", 0)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if any(c.poll(200).values()):
                    arrived["kafka-python"] = time.monotonic()
                    break
            c.close()

        threads = [threading.Thread(target=f) for f in (confluent, kafka_python)]
        for t in threads:
            t.start()
        line = jv.stdout.readline()  # the Java consumer has its (empty) end offsets: waiting
        assert b'"start"' in line, line + jv.stderr.read()
        time.sleep(2)  # every fetch is in its long wait
        sent = time.monotonic()
        kafka_python_produce(s.bootstrap, "wait-java", [Rec(0, None, b"j")], "none")
        kafka_python_produce(s.bootstrap, "wait-kcat", [Rec(0, None, b"k")], "none")
        run_rivven(d, "produce", "wait-confluent", input=b"c\n", check=True)
        run_rivven(d, "produce", "wait-kafka-python", input=b"p\n", check=True)
        for t in threads:
            t.join(60)
        assert b'"value":"ag=="' in jv.stdout.readline()
        arrived["java"] = time.monotonic()
        assert kc.communicate(timeout=60)[0] == b"k\n"
        arrived["kcat"] = time.monotonic()
        # (a graceful close would wait for the next 20 s fetch in flight: on Kafka too)
        jv.kill()
        jv.wait(60)
    finally:
        s.kill()
    late = {n: round(at - sent, 1) for n, at in arrived.items() if at - sent > 8}
    assert set(arrived) == set(names) and not late, (arrived, late)


@pytest.mark.slow
def test_read_committed_clients_skip_aborted_records_and_stop_at_the_open_transaction(one):
    """Transactions written by another process (an engine's transactional producers: one
    committed, one aborted, one still open) read by every client at read_committed: what
    ``Engine.read`` shows at read_committed (no aborted record, nothing past the last stable
    offset); at read_uncommitted every record (the markers never)."""
    from engine import Engine, Record

    b = one.bootstrap
    with Engine.open(one.data_dir) as eng:
        plain = lambda v: eng.produce("t", [Record(b"p", v)], 0)  # noqa: E731
        committed = eng.producer("committed-txn")
        aborted = eng.producer("aborted-txn")
        still_open = eng.producer("open-txn", transaction_timeout_ms=600_000)
        plain(b"first")
        committed.begin()
        aborted.begin()
        committed.produce("t", [Record(b"c", b"c%d" % i) for i in range(3)], 0)
        aborted.produce("t", [Record(b"a", b"a%d" % i) for i in range(3)], 0)
        aborted.produce("t", [Record(b"a", b"a-p1")], 1)
        plain(b"between")
        committed.produce("t", [Record(b"c", b"c-p1")], 1)
        aborted.abort()
        committed.commit()
        plain(b"after")
        still_open.begin()
        still_open.produce("t", [Record(b"o", b"open")], 0)
        plain(b"after-open")
        try:
            truth = held(one.data_dir, "t", "read_committed")
            values = [r.value for r in truth]
            assert b"a0" not in values and b"open" not in values and b"after-open" not in values
            assert {b"c0", b"c-p1", b"after", b"first"} <= set(values)
            rc = {"isolation.level": "read_committed"}
            got = {
                "confluent": confluent_consume(b, "t", count=len(truth), **rc),
                "kafka-python": kafka_python_consume(b, "t", count=len(truth),
                                                     isolation_level="read_committed"),
                "kcat": kcat_consume(b, "t", "-X", "isolation.level=read_committed"),
                "java": java_consume(b, "t", **rc),
            }
            wrong = {c: first_difference(g, truth) for c, g in got.items() if g != truth}
            assert not wrong, wrong
            everything = held(one.data_dir, "t")
            assert b"a0" in [r.value for r in everything]
            ru = {"isolation.level": "read_uncommitted"}  # (librdkafka's default: committed)
            got = {"confluent": confluent_consume(b, "t", count=len(everything), **ru),
                   "kafka-python": kafka_python_consume(b, "t", count=len(everything)),
                   "kcat": kcat_consume(b, "t", "-X", "isolation.level=read_uncommitted"),
                   "java": java_consume(b, "t")}
            wrong = {c: first_difference(g, everything) for c, g in got.items() if g != everything}
            assert not wrong, wrong
        finally:
            still_open.abort()


@pytest.mark.slow
def test_every_client_reads_a_compacted_log_with_its_offset_gaps(tmp_path):
    """Compaction (another process, the server stopped and started again) leaves batches
    whose offsets have gaps: every client reads them at their offsets, as the engine holds
    them."""
    import os
    import random

    from engine import Engine

    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "c", "--partitions", "2", "-c", "cleanup.policy=compact",
               "-c", "segment.bytes=20000", check=True)
    rng = random.Random(5)
    s = start_server(d)
    try:
        for rnd in range(5):
            confluent_produce(s.bootstrap, "c", [
                Rec(i % 2, b"key%d" % rng.randrange(300), os.urandom(100).hex().encode(),
                    (("round", b"%d" % rnd),), BASE_TS + rnd * 1000 + i)
                for i in range(200)], "zstd")
    finally:
        assert s.stop() == 0
    with Engine.open(d) as eng:
        assert all(not r.get("skipped") for r in eng.maintenance.compact("c", force=True))
    truth = held(d, "c")
    offsets = [r.offset for r in truth if r.partition == 0]
    assert len(truth) < 1000 and offsets != list(range(offsets[0], offsets[0] + len(offsets)))
    s = start_server(d)
    try:
        b = s.bootstrap
        got = {"java": java_consume(b, "c"), "confluent": confluent_consume(b, "c"),
               "kafka-python": kafka_python_consume(b, "c"), "kcat": kcat_consume(b, "c")}
    finally:
        s.kill()
    wrong = {c: first_difference(g, truth) for c, g in got.items() if g != truth}
    assert not wrong, wrong


def raw_request(bootstrap: str, request: object, version: int, timeout: float = 30
                ) -> tuple[object, float]:
    """One request on its own connection (kafka-python's generated classes): the decoded
    response and the seconds it took."""
    import socket

    request.with_header(correlation_id=7, client_id="rivven-tests")  # type: ignore[attr-defined]
    frame = request.encode(version=version, header=True, framed=True)  # type: ignore[attr-defined]
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        t0 = time.monotonic()
        sock.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed the connection"
            data += chunk
        took = time.monotonic() - t0
    cls = type(request).__name__.replace("Request", "Response")
    module = __import__(type(request).__module__, fromlist=[cls])
    return getattr(module, cls).decode(data[4:], version=version, header=True), took


def test_a_fetch_of_no_partition_is_answered_at_once(one):
    """As Kafka's broker answers it (the Java client closes its fetch session with one)."""
    from kafka.protocol.consumer.fetch import FetchRequest

    req = FetchRequest(replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                       forgotten_topics_data=[], rack_id="")
    resp, took = raw_request(one.bootstrap, req, 12)
    assert resp.error_code == 0 and resp.session_id == 0 and resp.responses == []
    assert took < 5, took
