"""Idempotent producers of three Kafka clients (confluent-kafka, kafka-python, Kafka's Java
client) go on sending while ``rivven serve`` is killed -9 in the middle of their stream and
started again on the same port: they retry what was not answered, and every record is stored
exactly once, in the order sent within its partition (the engine's producer state, durable
across the restart, answers a retried batch as the duplicate it is)."""

from __future__ import annotations

import base64
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter

import pytest
from helpers import run_rivven
from helpers.kafka import start_server
from helpers.kafka_clients import held, java_command

from engine import Engine

N = 20_000
# Kafka's Java client is handed its input whole (the tool reads it all, then sends): more
# records, so that the kill lands while it sends
JAVA_N = 200_000


def stored(data_dir: str) -> int:
    with Engine.open(data_dir, read_only=True) as eng:
        return sum(eng.offsets.of_partition("t", p)[1] for p in range(3))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce(client: str, bootstrap: str, gate: threading.Event, n: int) -> None:
    """``n`` records ("v0".."v{n-1}", partition i % 3) through an idempotent producer that
    retries for up to two minutes; the Python clients wait for ``gate`` (the server killed)
    after the first half, so the kill lands inside the stream however fast the machine is."""
    if client == "java":
        # its input fed as a stream, as the other clients send theirs: the kill lands in it
        # (its stderr in a file: a pipe nobody reads meanwhile could fill and stop it)
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(java_command("produce", bootstrap, "t",
                                             props={"delivery.timeout.ms": 120_000,
                                                    "linger.ms": 20}),
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
        assert proc.stdin is not None
        for start in range(0, n, 200):
            proc.stdin.write("".join(
                f"{i % 3}\t{base64.b64encode(b'k%d' % i).decode()}\t"
                f"{base64.b64encode(b'v%d' % i).decode()}\t-\t\n"
                for i in range(start, min(n, start + 200))).encode())
            proc.stdin.flush()
            time.sleep(0.01)
        proc.stdin.close()
        code = proc.wait(300)
        log.seek(0)
        assert code == 0, log.read().decode(errors="replace")[-3000:]
    elif client == "confluent":
        from confluent_kafka import Producer

        errors: list = []
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                      "linger.ms": 20, "message.timeout.ms": 120_000})
        for i in range(n):
            if i == n // 2:
                gate.wait(120)
            while True:
                try:
                    p.produce("t", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                              on_delivery=lambda e, m: errors.append(e) if e else None)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.002)  # a stream, not one burst: the kill lands in it
        assert p.flush(180) == 0 and not errors, errors[:3]
    else:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=20,
                          delivery_timeout_ms=120_000, reconnect_backoff_max_ms=500)
        futures = []
        for i in range(n):
            if i == n // 2:
                gate.wait(120)
            futures.append(p.send("t", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3))
            if i % 200 == 0:
                time.sleep(0.002)
        p.flush(180)
        for f in futures:
            f.get(60)
        p.close(30)


@pytest.mark.slow
@pytest.mark.parametrize("client", ["java", "confluent", "kafka-python"])
def test_idempotent_producers_retried_across_a_server_kill_store_each_record_once(
        tmp_path, client):
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", "3", check=True)
    port = free_port()
    servers = [start_server(d, "--listen", f"127.0.0.1:{port}")]
    killed_at: list[int] = []
    gate = threading.Event()
    n = JAVA_N if client == "java" else N

    def kill_and_restart() -> None:
        deadline = time.monotonic() + 120
        while stored(d) < n // 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        servers[0].kill()
        killed_at.append(stored(d))
        gate.set()  # the second half goes to a dead server, then to the new one
        time.sleep(0.5)  # the clients see the connection refused, and retry
        servers.append(start_server(d, "--listen", f"127.0.0.1:{port}"))

    killer = threading.Thread(target=kill_and_restart)
    killer.start()
    try:
        produce(client, f"127.0.0.1:{port}", gate, n)
        killer.join(180)
    finally:
        killer.join(180)
        for s in servers:
            s.kill()
    assert killed_at and 0 < killed_at[0] < n, killed_at  # the kill landed in the stream
    recs = held(d, "t")
    counts = Counter(r.value for r in recs)
    twice = sorted(v for v, c in counts.items() if c > 1)
    assert not twice, f"{len(twice)} records stored more than once, e.g. {twice[:3]}"
    assert len(counts) == n, f"{n - len(counts)} records missing"
    for p in range(3):
        sent = [int(r.value[1:]) for r in recs if r.partition == p]
        assert sent == sorted(sent) and len(sent) == len(range(p, n, 3)), p
