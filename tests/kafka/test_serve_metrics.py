"""``rivven serve``'s metrics (rivven_kafka_*) with real client traffic, read by ``rivven
metrics`` from another process while the server runs and after it stopped; checked by
Prometheus's promtool; and its status line, on a terminal and in the log."""

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import RIVVEN, ROOT, run_rivven
from helpers.kafka import FAST
from helpers.kafka_wire import Wire, api_versions, batch, produce, raw
from helpers.metrics import needs_prometheus, promtool

from engine import Engine


def _metrics(d: str) -> dict:
    r = run_rivven(d, "metrics", "--json", check=True)
    return json.loads(r.stdout)


def _value(doc: dict, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (a histogram: its
    count)."""
    total = 0.0
    for s in doc.get(name, {}).get("samples", []):
        if all(s["labels"].get(k) == v for k, v in labels.items()):
            total += s["count"] if "count" in s else s["value"]
    return total


def _traffic(bootstrap: str, n: int = 200) -> Consumer:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        p.produce("t", key=b"k%d" % i, value=b"v" * 100, partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("t", p, 0) for p in (0, 1)])
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == n
    return c  # (left open: a connection the gauge counts)


def test_requests_errors_bytes_latency_and_connections_show_in_rivven_metrics(served):
    d = served.data_dir
    consumer = _traffic(served.bootstrap)
    w = Wire(served.bootstrap)
    r = w.call(produce("nope", 0, batch(1)), 0, 9)
    assert r.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    w.close()
    bad = Wire(served.bootstrap)
    bad.send(raw(999, 0))
    assert bad.closed_by_server(10)
    time.sleep(0.3)
    doc = _metrics(d)
    for api in ("ApiVersions", "Metadata", "Produce", "Fetch"):
        n = _value(doc, "rivven_kafka_requests_total", api=api)
        assert n >= 1, api
        assert _value(doc, "rivven_kafka_request_bytes_total", api=api) > 8 * n, api
        assert _value(doc, "rivven_kafka_response_bytes_total", api=api) > 8 * n, api
        assert _value(doc, "rivven_kafka_request_duration_seconds", api=api) == n, api
    assert _value(doc, "rivven_kafka_requests_total", api="unknown") == 1
    assert _value(doc, "rivven_kafka_request_errors_total", api="Produce",
                  code="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert _value(doc, "rivven_kafka_connections_closed_total", reason="unsupported") == 1
    open_now = _value(doc, "rivven_kafka_connections")
    assert open_now >= 1  # (the consumer's)
    assert _value(doc, "rivven_kafka_connections_opened_total") == \
        open_now + _value(doc, "rivven_kafka_connections_closed_total")
    # the Fetch answers carried what was appended
    assert _value(doc, "rivven_kafka_response_bytes_total", api="Fetch") > 200 * 100
    assert _value(doc, "rivven_records_appended_total", topic="t") == 200
    consumer.close()
    assert served.stop() == 0
    after = _metrics(d)  # (the server's counts outlive it; its gauge does not)
    assert _value(after, "rivven_kafka_requests_total", api="Produce") >= \
        _value(doc, "rivven_kafka_requests_total", api="Produce")
    assert _value(after, "rivven_kafka_connections") == 0


@needs_prometheus
def test_the_servers_metrics_pass_promtool(served):
    _traffic(served.bootstrap, 20).close()
    text = run_rivven(served.data_dir, "metrics", check=True).stdout
    assert b'rivven_kafka_requests_total{api="Produce"}' in text
    assert b"rivven_kafka_request_duration_seconds_bucket" in text
    r = promtool(text)
    assert r.returncode == 0, r.stdout + r.stderr


def test_group_states_from_the_coordinators_hook_and_the_status_line(tmp_path):
    """The group coordinator fills ``Broker.group_states``; the server sets
    rivven_kafka_groups from it (every state of Kafka's, 0 when none) and shows it."""
    from engine.kafka.config import ServeConfig
    from engine.kafka.serve import serve
    from rivven_cli.serve import status_line

    d = str(tmp_path / "d")
    snaps: list[dict] = []
    states = {"Stable": 2, "Empty": 1}

    async def run(eng: Engine) -> None:
        stop = asyncio.Event()

        def started(server) -> None:  # (the hook, as the coordinator sets it)
            server.broker.group_states = lambda: states

        def status(snap: dict) -> None:
            snaps.append(snap)
            if len(snaps) >= 2:
                stop.set()

        await serve(eng, ("127.0.0.1", 0), None, ServeConfig(), lambda h, p: None,
                    stop=stop, status=status, status_every=0.2, started=started)

    with Engine.open(d) as eng:
        asyncio.run(run(eng))
        doc = eng.metrics()
    assert snaps[-1]["groups"] == states
    assert _value(doc, "rivven_kafka_groups", state="Stable") == 2
    assert _value(doc, "rivven_kafka_groups", state="Empty") == 1
    assert _value(doc, "rivven_kafka_groups", state="PreparingRebalance") == 0
    line = status_line(snaps[0], snaps[-1])
    assert "3 groups (Empty 1, Stable 2)" in line and "0 connections" in line


def test_status_line_rates():
    from rivven_cli.serve import status_line

    a = {"time": 10.0, "listener": "127.0.0.1:9092", "connections": 3, "requests": 100,
         "bytes_in": 0, "bytes_out": 0, "produce_requests": 10, "fetch_requests": 20,
         "records_in": 1000, "records_out": 0, "groups": None}
    b = {**a, "time": 12.0, "requests": 300, "bytes_in": 2 << 20, "bytes_out": 4 << 20,
         "produce_requests": 50, "fetch_requests": 60, "records_in": 21_000,
         "records_out": 8000, "connections": 1}
    assert status_line(a, b) == ("127.0.0.1:9092 · 1 connection · 100 req/s · in 1.0 MiB/s · "
                                 "out 2.0 MiB/s · produce 20 req/s 10,000 rec/s · fetch 20 req/s "
                                 "4,000 rec/s")


def _serve_on_a_terminal(d: str, traffic, *args: str) -> tuple[int, list[str]]:
    """``rivven serve`` with stderr on a pseudo-terminal; ``traffic(bootstrap)`` runs while
    it serves, then SIGTERM: (exit code, the lines the terminal showed)."""
    master, slave = os.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", TERM="xterm")
    proc = subprocess.Popen([*RIVVEN, "--data-dir", d, "serve", "--listen", "127.0.0.1:0",
                             "--set", FAST[0], *args], stdout=subprocess.PIPE, stderr=slave,
                            env=env, cwd=ROOT)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        m = None
        while m is None and time.monotonic() < deadline:
            m = re.search(rb"on (\S+):(\d+) \(Kafka protocol", b"".join(chunks))
            time.sleep(0.05)
        assert m is not None, b"".join(chunks)
        traffic(f"{m.group(1).decode()}:{m.group(2).decode()}")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
        os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))
    return code, [x.strip() for x in re.split(r"[\r\n]+", text) if x.strip()]


def test_status_line_on_a_terminal(tmp_path):
    d = str(tmp_path / "d")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)

    def traffic(bootstrap: str) -> None:
        c = _traffic(bootstrap, 500)
        w = Wire(bootstrap)
        w.send(raw(999, 0))  # a log line printed above the status line
        w.closed_by_server(5)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 2.5:  # requests while the line is redrawn
            n += 1
            Wire(bootstrap).call(api_versions(correlation_id=n), 18, 3)
            time.sleep(0.05)
        c.close()

    code, lines = _serve_on_a_terminal(d, traffic)
    assert code == 0, lines
    status = [x for x in lines if " req/s · in " in x]
    assert len(status) >= 2, lines  # redrawn every second
    assert all(x.startswith("127.0.0.1:") and "connection" in x and "produce " in x and
               "fetch " in x and "/s" in x for x in status), status
    assert any(re.search(r"· [1-9][\d,]* req/s", x) for x in status), status
    assert any("closing 127.0.0.1:" in x and "unknown API (key 999" in x for x in lines)
    assert lines[-1] == "stopped"


def test_status_in_the_log_when_stderr_is_not_a_terminal(tmp_path):
    from helpers.kafka import start_server

    d = str(tmp_path / "d")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)
    s = start_server(d, "--status-interval", "0.5")
    try:
        _traffic(s.bootstrap, 50).close()
        deadline = time.monotonic() + 10
        while "status: " not in s.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(x for x in s.log().splitlines() if "status: " in x)
        assert " req/s · in " in line and "produce " in line, line
        while "status: 127.0.0.1:" not in s.log().splitlines()[-1] or \
                " 0 connections " not in s.log().splitlines()[-1]:
            assert time.monotonic() < deadline + 20, s.log()
            time.sleep(0.1)  # (until the clients' connections are gone)
        n = s.log().count("status: ")
        time.sleep(1.5)  # idle: no more status lines
        assert s.log().count("status: ") == n
    finally:
        assert s.stop() == 0
