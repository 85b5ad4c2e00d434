"""Exactly once through Kafka's protocol with Kafka's own Java client: its
consume-transform-produce loop (KafkaTool eos: read_committed consumer in a group, each poll's
records written in one transaction with ``sendOffsetsToTransaction(offsets,
consumer.groupMetadata())``, a third of the transactions aborted at random) runs for 20 rounds,
each ended by a kill -9 of the client, of ``rivven serve`` (started again on the same port),
or of both, at a random moment; then it runs to the end. A read_committed reader of the
output sees every input exactly once (an aborted or a half-done transaction's records never),
and the group's committed offsets are the input's end."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import Counter

import pytest
from helpers import run_rivven
from helpers.kafka import FAST, start_server
from helpers.kafka_clients import (
    Rec,
    confluent_produce,
    first_difference,
    held,
    java,
    java_consume,
    java_popen,
)

from engine import Engine

ROUNDS = 20
PER_ROUND = 200  # inputs produced at each round's start: every kill lands in work
# a dead member leaves the group after 1.5 s, not Kafka's default 45 s
SETTINGS = (*FAST, "group.min.session.timeout.ms=1000")
PROPS = {"max.poll.records": 25, "session.timeout.ms": 1500, "heartbeat.interval.ms": 300,
         "transaction.timeout.ms": 5000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_java_transactional_loop_killed_at_random_leaves_every_input_once(tmp_path):
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "in", "--partitions", "6", check=True)
    run_rivven(d, "topic", "create", "out", "--partitions", "3", check=True)
    port = free_port()
    listen = ("--listen", f"127.0.0.1:{port}")
    bootstrap = f"127.0.0.1:{port}"
    server = start_server(d, *listen, settings=SETTINGS)
    rng = random.Random(30)
    kills: Counter = Counter()
    events: list[bytes] = []  # every round's output lines
    try:
        for rnd in range(ROUNDS):
            first = rnd * PER_ROUND
            confluent_produce(bootstrap, "in", [Rec(i % 6, b"k%d" % i, b"v%d" % i)
                                                for i in range(first, first + PER_ROUND)], "lz4")
            loop = java_popen("eos", bootstrap, "eos", "in", "out", "txn-eos", props=PROPS,
                              opts={"abort-rate": 0.3, "seed": rnd, "idle-ms": 60_000})
            # (its output read as it comes: a full pipe would stall it)
            reader = threading.Thread(target=lambda p=loop, out=events: out.extend(p.stdout))
            reader.start()
            time.sleep(rng.uniform(2.0, 5.0))  # start, join, a few transactions
            what = rng.choice(("client", "server", "both"))
            kills[what] += 1
            if what in ("server", "both"):
                server.kill()
            if what in ("client", "both"):
                loop.kill()
            if what == "server":  # the client sees its server gone: it may fail or wait
                time.sleep(rng.uniform(0, 1.0))
            server = start_server(d, *listen, settings=SETTINGS) if what != "client" \
                else server
            loop.kill()
            loop.wait(30)
            reader.join(30)
        # to the end: until 5 s without a record
        out = java("eos", bootstrap, "eos", "in", "out", "txn-eos", props=PROPS,
                   opts={"abort-rate": 0.3, "seed": 99, "idle-ms": 5000}, timeout=600)
        assert out[-1]["event"] == "done", out[-3:]
        # what a read_committed client reads is what the engine holds at read_committed
        committed = held(d, "out", "read_committed")
        by_client = java_consume(bootstrap, "out", **{"isolation.level": "read_committed"})
        assert by_client == committed, first_difference(by_client, committed)
    finally:
        server.kill()
    assert kills["server"] + kills["both"] >= 3 and kills["client"] + kills["both"] >= 3, kills
    # the rounds did work (transactions committed and aborted before their kills)
    done = Counter(json.loads(x)["event"] for x in events if x.startswith(b"{"))
    assert done["committed"] >= ROUNDS and done["aborted"] >= 5, done
    srcs = Counter(dict(r.headers)["src"] for r in committed)
    twice = [s for s, n in srcs.items() if n > 1]
    assert not twice, f"{len(twice)} inputs in the output more than once, e.g. {twice[:3]}"
    want = {f"{r.partition}:{r.offset}".encode() for r in held(d, "in")}
    assert set(srcs) == want, f"{len(want - set(srcs))} inputs missing from the output"
    with Engine.open(d, read_only=True) as eng:
        ends = {p: eng.offsets.of_partition("in", p)[1] for p in range(6)}
    group = json.loads(run_rivven(d, "group", "describe", "eos", "--json", check=True).stdout)
    committed_offsets = {p["partition"]: p["current_offset"] for p in group["partitions"]}
    assert committed_offsets == ends, (committed_offsets, ends)
