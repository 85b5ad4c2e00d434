"""Produce and consume through ``rivven serve`` with confluent-kafka (librdkafka) and
kafka-python: what they read equals what the engine holds."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import run_rivven

from engine import Engine


def _consume_all(bootstrap: str, topic: str, partitions: int, n: int, **conf) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append((m.partition(), m.offset(), m.key(), m.value(),
                    tuple(m.headers() or ()), m.timestamp()[1]))
    c.close()
    return got


def test_confluent_produce_every_codec_reads_back_equal_to_the_engine(served):
    sent = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 5,
                      "enable.idempotence": True, "compression.type": codec})
        for i in range(50):
            p.produce("t", key=f"{codec}-{i}".encode(), value=codec.encode() * (i + 1),
                      headers=[("n", str(i).encode()), ("null", None)],
                      timestamp=1_700_000_000_000 + i)
        assert p.flush(30) == 0
        sent += 50
    got = _consume_all(served.bootstrap, "t", 2, sent)
    assert len(got) == sent
    with Engine.open(served.data_dir, read_only=True) as eng:
        held = [(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                for p in (0, 1) for r in eng.read("t", p, 0, 10_000)]
    norm = sorted((p, o, k, v, tuple((hk, hv) for hk, hv in hs), ts)
                  for p, o, k, v, hs, ts in got)
    assert norm == sorted(held)
    assert {ts for *_, ts in got} == {1_700_000_000_000 + i for i in range(50)}


def test_kafka_python_produces_and_rivven_consume_shows_it(served):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=served.bootstrap, enable_idempotence=True,
                      compression_type="gzip")
    for i in range(20):
        p.send("t", key=b"k%d" % i, value=b"v%d" % i, partition=1)
    p.flush(30)
    p.close()
    out = run_rivven(served.data_dir, "consume", "t", "-p", "1",
                     "-f", "%k=%s\\n", "--exit", check=True).stdout.decode().split()
    assert out == [f"k{i}=v{i}" for i in range(20)]


def test_what_another_process_writes_is_served_to_a_waiting_fetch(served):
    c = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "unused",
                  "fetch.wait.max.ms": 5000})
    c.assign([TopicPartition("t", 0, 0)])
    assert c.poll(1) is None
    run_rivven(served.data_dir, "produce", "t", "-p", "0", input=b"from-the-cli\n", check=True)
    deadline = time.monotonic() + 10
    m = None
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and m.value() == b"from-the-cli"


def test_sigterm_stops_cleanly(served):
    p = Producer({"bootstrap.servers": served.bootstrap, "acks": "all"})
    p.produce("t", value=b"x", partition=0)
    assert p.flush(10) == 0
    assert served.stop() == 0
    assert "stopped" in served.log()
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [b"x"]


def test_kafka_md_lists_every_api_and_version_served():
    """docs/KAFKA.md's table of APIs is the server's own list (ApiVersions)."""
    import re

    from helpers import ROOT

    from engine.kafka.registry import APIS
    from engine.kafka.serve import load_handlers

    load_handlers()
    text = (ROOT / "docs" / "KAFKA.md").read_text()
    shown = {(int(k), name, int(lo), int(hi)) for k, name, lo, hi in
             re.findall(r"^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|$", text, re.M)}
    served = {(a.key, a.name, a.min_version, a.max_version) for a in APIS.values()}
    assert shown == served
