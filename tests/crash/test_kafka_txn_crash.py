"""Exactly-once through Kafka's protocol while processes die: confluent-kafka's
consume-transform-produce loop (tests/kafka_ctp_driver.py: transactions with
``send_offsets_to_transaction`` and random aborts) against ``rivven serve``, the client and
the server killed with -9 at random for 24 rounds; afterwards a read_committed consumer sees
every input exactly once, no aborted attempt's record, and the group's offsets are the input's
end. Also an idempotent producer sending through server kills: no duplicate, no gap."""

import os
import random
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from helpers import ROOT
from helpers.kafka import FAST, start_server

from engine import Engine

DRIVER = str(ROOT / "tests" / "kafka_ctp_driver.py")
SETTINGS = (*FAST, "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")


def restart(served, data_dir, port):
    served.kill()
    return start_server(data_dir, "--listen", f"127.0.0.1:{port}", settings=SETTINGS)


def driver(bootstrap, data_dir, seed, aborts, log):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, DRIVER, bootstrap, data_dir, "ctp", "g", str(seed),
                             aborts], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


@pytest.mark.slow
def test_consume_transform_produce_is_exactly_once_through_kills_of_client_and_server(
        tmp_path):
    d = str(tmp_path / "data")
    n = 3000
    with Engine.open(d) as eng:
        eng.create_topic("in", 2)
        eng.create_topic("out", 3)
        for at in range(0, n, 40):  # (batches of 20 per partition: fetches mix them)
            eng.produce_batch("in", [b"v%d" % i for i in range(at, at + 40)],
                              keys=[b"k%d" % i for i in range(at, at + 40)],
                              partitions=[i % 2 for i in range(at, at + 40)])
    aborts = str(tmp_path / "aborts")
    rng = random.Random(int(os.environ.get("RIVVEN_TEST_SEED", "30")))
    served = start_server(d, settings=SETTINGS)
    port = served.bootstrap.rsplit(":", 1)[1]
    log = open(tmp_path / "driver.log", "ab")
    proc = None
    kills = {"client": 0, "server": 0}
    try:
        for rnd in range(24):
            if proc is None or proc.poll() is not None:
                proc = driver(served.bootstrap, d, rnd, aborts, log)
            time.sleep(rng.uniform(0.3, 2.5))
            victim = rng.choice(("client", "server", "both"))
            if victim in ("client", "both"):
                proc.kill()
                proc.wait(30)
                kills["client"] += 1
            if victim in ("server", "both"):
                served = restart(served, d, port)
                kills["server"] += 1
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        # the last instance runs to the end
        last = driver(served.bootstrap, d, 999, aborts, log)
        assert last.wait(600) == 0, (tmp_path / "driver.log").read_text()[-4000:]
        check(d, served.bootstrap, n, aborts)
        # a kill is no reason for a client to fail for good (a transaction that outlived
        # its timeout while the server was down is fenced: that one is Kafka's answer too)
        fatal = [line for line in (tmp_path / "driver.log").read_text().splitlines()
                 if line.startswith("FATAL") and "_FENCED" not in line]
        assert fatal == []
        assert kills["client"] >= 5 and kills["server"] >= 5
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        served.kill()
        log.close()


def check(d, bootstrap, n, aborts_file):
    with open(aborts_file) as f:
        aborted = {line.strip().encode() for line in f if line.strip()}
    assert aborted  # (random aborts happened)
    with Engine.open(d, read_only=True) as eng:
        out = [r for q in range(3) for r in eng.read("out", q, 0, 1_000_000,
                                                      isolation_level="read_committed")]
        everything = [r for q in range(3) for r in eng.read("out", q, 0, 1_000_000)]
        keys = [r.key for r in out]
        assert len(keys) == n and len(set(keys)) == n  # every input exactly once
        assert {r.key for r in out} == {b"%d:%d" % (i % 2, i // 2) for i in range(n)}
        for r in out:  # the transformed value of its own input
            p, o = r.key.split(b":")
            i = int(o) * 2 + int(p)
            assert r.value.rsplit(b":", 1)[1] == b"v%d" % i
        tags = {r.value.rsplit(b":", 1)[0] for r in out}
        assert not tags & aborted  # aborted never
        assert {r.value.rsplit(b":", 1)[0] for r in everything} & aborted  # (but written)
        assert eng.groups.committed("g") == {("in", 0): n // 2, ("in", 1): n // 2}
        assert eng.txn.find_hanging() == []
    # what a read_committed Kafka consumer sees is the same
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition("out", q, 0) for q in range(3)])
    seen, eof = [], set()
    deadline = time.monotonic() + 60
    while len(eof) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            eof.add(m.partition())
            continue
        seen.append(m.key())
    c.close()
    assert sorted(seen) == sorted(keys)


@pytest.mark.slow
def test_an_idempotent_producer_through_server_kills_writes_each_record_once(tmp_path):
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", 2)
    served = start_server(d, settings=SETTINGS)
    port = served.bootstrap.rsplit(":", 1)[1]
    rng = random.Random(5)
    p = Producer({"bootstrap.servers": served.bootstrap, "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 120000,
                  "reconnect.backoff.max.ms": 200})
    failed = []
    n = 0
    try:
        for _ in range(8):
            stop = time.monotonic() + rng.uniform(0.5, 1.5)
            while time.monotonic() < stop:
                p.produce("t", value=b"%d" % n, partition=n % 2,
                          on_delivery=lambda err, m: err and failed.append(err))
                n += 1
                if n % 50 == 0:
                    p.poll(0.01)
            served = restart(served, d, port)
        assert p.flush(120) == 0 and failed == []
        with Engine.open(d, read_only=True) as eng:
            for q in (0, 1):
                got = [int(r.value) for r in eng.read("t", q, 0, 10_000_000)]
                assert got == list(range(q, n, 2))  # once each, in order
    finally:
        served.kill()
