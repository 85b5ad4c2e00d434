"""``rivven kafka export | import | mirror`` as users run them, in real processes against a
real ``rivven serve``: summaries and JSON, progress and a signal stop, security settings
passed through to librdkafka (-X, --config), metrics, and bad input as one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest
from helpers import RIVVEN, ROOT, run_rivven
from helpers.bridge import content, fill, kafka_content
from helpers.kafka import FAST, start_server

import engine

PASSWORD = "mirror's secret"


@pytest.fixture
def src(tmp_path) -> str:
    d = str(tmp_path / "src")
    with engine.Engine.open(d) as eng:
        fill(eng, "t")
    return d


@pytest.fixture
def served(tmp_path):
    s = start_server(str(tmp_path / "cluster"))
    try:
        yield s
    finally:
        s.kill()


def held(d: str, topic: str) -> dict:
    with engine.Engine.open(d, read_only=True) as eng:
        return content(eng, topic)


def test_export_then_import_print_a_summary_and_json(src, served, tmp_path):
    r = run_rivven(src, "kafka", "export", "t", "-b", served.bootstrap)
    assert r.returncode == 0, r.stderr.decode()
    line = r.stdout.decode().strip()
    assert line.startswith("exported 25 records of 1 topic (3 partitions) to "
                           f"{served.bootstrap} in 1 transaction")
    assert line.endswith("; created t; positions in group rivven-mirror-export-t")
    back = str(tmp_path / "back")
    r = run_rivven(back, "kafka", "import", "t", "-b", served.bootstrap, "--json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["direction"] == "import" and doc["records"] == 25 and doc["created"] == ["t"]
    assert [p["lag"] for p in doc["partitions"]] == [0, 0, 0]
    assert set(doc) >= {"name", "group", "transactional_id", "exactly_once", "bytes",
                        "transactions", "seconds", "warnings", "partitions"}
    assert held(back, "t") == held(src, "t")


def test_bad_input_is_one_line_and_nothing_is_copied(src, served):
    cases = [
        (("export", "nope", "-b", served.bootstrap), 1, "topic 'nope' does not exist"),
        (("import", "nope", "-b", served.bootstrap), 1,
         f"topic 'nope' does not exist on {served.bootstrap}"),
        (("export", "t", "-b", "127.0.0.1:1", "--timeout", "2"), 1,
         "cannot reach the cluster at 127.0.0.1:1 within 2 s"),
        (("export", "t", "-b", served.bootstrap, "-X", "bogus.key=1"), 1,
         'bad client setting: No such configuration property: "bogus.key"'),
        (("export", "t", "-b", served.bootstrap, "-X", "linger.ms=abc"), 1,
         "bad client setting: Invalid value"),
        (("export", "t", "-b", served.bootstrap, "-X", "nokv"), 2, "is not key=value"),
        (("export", "t", "-b", served.bootstrap, "--to", "5", "--follow"), 2,
         "--to stops at a position, --follow copies on"),
        (("export", "t", "-b", served.bootstrap, "--from", "yesterday"), 2,
         "is not a position"),
        (("mirror", "-b", served.bootstrap), 2, "name topics to copy"),
        (("mirror", "-b", served.bootstrap, "--export", "t", "--import", "t"), 2,
         "would be exported and imported back (a loop)"),
        (("export", "t", "-b", served.bootstrap, "--config", "/nonexistent.properties"), 1,
         "cannot read the client properties /nonexistent.properties"),
    ]
    for args, code, text in cases:
        r = run_rivven(src, "kafka", *args)
        err = r.stderr.decode()
        assert r.returncode == code, (args, err)
        lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and text in lines[0], (args, err)
        assert "Traceback" not in err
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": served.bootstrap}).list_topics(timeout=10)
    assert "t" not in md.topics  # (nothing was created, nothing copied)


def test_security_settings_pass_through_as_librdkafka_and_kafka_properties(src, tmp_path):
    cluster = str(tmp_path / "sasl-cluster")
    with engine.Engine.open(cluster) as eng:
        eng.users.add("mirror", PASSWORD)
    s = start_server(cluster, settings=FAST, listeners=("SASL_PLAINTEXT://127.0.0.1:0",))
    try:
        x = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256",
             "-X", "sasl.username=mirror"]
        bad = run_rivven(src, "kafka", "export", "t", "-b", s.bootstrap, *x,
                         "-X", "sasl.password=wrong", "--timeout", "5")
        assert bad.returncode == 1 and "Authentication failed" in bad.stderr.decode(), \
            bad.stderr.decode()
        props = tmp_path / "client.properties"
        props.write_text(
            "# a Kafka client's file\nsecurity.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=SCRAM-SHA-512\nkey.serializer=org.apache.kafka.common."
            "serialization.ByteArraySerializer\nsasl.jaas.config=org.apache.kafka.common."
            "security.scram.ScramLoginModule required \\\n  username=\"mirror\" "
            f"password=\"{PASSWORD}\";\n")
        r = run_rivven(src, "kafka", "export", "t", "-b", s.bootstrap, "--config", str(props))
        assert r.returncode == 0, r.stderr.decode()
        assert kafka_content_sasl(s.bootstrap) == held(src, "t")
    finally:
        s.kill()


def kafka_content_sasl(bootstrap: str) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.partition.eof": True,
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                  "sasl.username": "mirror", "sasl.password": PASSWORD,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition("t", p, 0) for p in range(3)])
    out: dict = {p: [] for p in range(3)}
    ended: set = set()
    deadline = time.monotonic() + 30
    while len(ended) < 3 and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is not None:
                ended.add(m.partition())
                continue
            out[m.partition()].append((m.key(), m.value(), tuple(m.headers() or ()),
                                       m.timestamp()[1]))
    c.close()
    return out


def test_a_following_mirror_shows_progress_serves_metrics_and_stops_on_sigterm(src, served,
                                                                                tmp_path):
    """``mirror --follow`` (the default): both directions, plain progress lines on stderr
    (no terminal), the rivven_mirror_* series on /metrics, SIGTERM ends it after the
    transaction in flight with its summary, exit 0."""
    import socket

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": served.bootstrap})  # (held: it answers)
    admin.create_topics([NewTopic("incoming", 2, replication_factor=-1)])["incoming"].result(30)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, RIVVEN_DATA_DIR=src, PYTHONPATH=str(ROOT))
    log = open(tmp_path / "mirror.err", "wb")
    proc = subprocess.Popen([*RIVVEN, "kafka", "mirror", "-b", served.bootstrap,
                             "--export", "t", "--import", "incoming", "--interval", "0.3",
                             "--metrics-port", str(port), "--name", "m1"],
                            stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT)
    try:
        p = Producer({"bootstrap.servers": served.bootstrap})
        for i in range(10):
            p.produce("incoming", b"in-%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "mirror.err").read_text()
            try:
                imported = held(src, "incoming")
            except Exception:  # noqa: BLE001 (not created yet)
                imported = {}
            if sum(map(len, imported.values())) == 10 and \
                    kafka_content(served.bootstrap, "t", 3) == held(src, "t"):
                break
            assert time.monotonic() < deadline, (tmp_path / "mirror.err").read_text()
            time.sleep(0.3)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        assert b'rivven_mirror_records_total{direction="export",mirror="m1",topic="t"} 25.0' \
            in text
        assert b'rivven_mirror_records_total{direction="import",mirror="m1",topic="incoming"}' \
            b' 10.0' in text
        assert b'rivven_mirror_lag_records{direction="export",mirror="m1",partition="0",' \
            b'topic="t"} 0.0' in text
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    err = (tmp_path / "mirror.err").read_text()
    assert proc.returncode == 0, err
    assert "export m1: 25 records" in err and "import m1: 10 records" in err
    lines = out.decode().splitlines()
    assert lines[0].startswith("exported 25 records") and lines[1].startswith("imported 10 "
                                                                              "records")


def test_on_a_terminal_a_live_table_shows_each_partition(src, served):
    from helpers import run_rivven_on_a_terminal

    code, out, frames = run_rivven_on_a_terminal(src, "kafka", "export", "t", "-b",
                                                 served.bootstrap, "--interval", "0.2")
    assert code == 0, frames
    assert out.decode().startswith("exported 25 records")
    text = "\n".join(frames)
    assert "rivven kafka (Ctrl-C stops after the transaction in flight)" in text
    for col in ("copy", "source", "destination", "copied", "records/s", "lag", "position"):
        assert col in text
    rows = [f for f in frames if f.startswith("│") and "t[" in f]
    assert any("t[0]" in r for r in rows) and any("t[2]" in r for r in rows), frames
