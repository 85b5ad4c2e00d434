"""SASL_SSL on ``rivven serve``: confluent-kafka, kafka-python, kcat and Kafka's Java client
authenticate over TLS with SCRAM-SHA-256 and SCRAM-SHA-512 (and PLAIN once), produce and
consume; a wrong password and an unknown user are refused with the error each client shows.
The same server has a PLAINTEXT listener and ACLs: alice (authenticated over SASL_SSL) may
write where an ACL lets her and is refused elsewhere, an anonymous PLAINTEXT client is
refused, and an ACL added by ``rivven acl add`` applies to alice's open connection at once.
One server for the module (the client drivers are tests/helpers/kafka_sasl.py's, shared
with test_sasl.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from helpers import run_rivven
from helpers.certs import Pki
from helpers.kafka import FAST, Served, start_server
from helpers.kafka_clients import held
from helpers.kafka_sasl import (
    CLIENTS,
    PASSWORD,
    TlsWire,
    auths,
    login,
    produce_consume,
    refusal,
    refused_as,
)
from helpers.kafka_wire import Wire, batch, fetch, metadata, produce

from engine import Engine
from engine.security.acl import Acl

SCRAMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DELAY_MS = 200
TOPIC_DENIED = 29


def _acl(rtype: str, name: str, op: str, pattern: str = "Literal") -> Acl:
    return Acl.make(rtype, name, pattern, "User:alice", "*", op, "Allow")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki) -> Iterator[Served]:
    """PLAINTEXT and SASL_SSL listeners; authorization on: alice may do anything on the
    topics ``c-*`` and any group, write (and describe) ``w-ok``; nobody has ``w-no`` or
    ``later`` (holding records)."""
    d = str(tmp_path_factory.mktemp("sasl-ssl") / "data")
    with Engine.open(d) as eng:
        for t in [f"c-{c}-{m}" for c in CLIENTS for m in SCRAMS] + ["c-confluent-PLAIN",
                                                                    "w-ok", "w-no", "later"]:
            eng.create_topic(t, 2)
        eng.users.add("alice", PASSWORD)
        eng.acls.add([_acl("Topic", "c-", "All", "Prefixed"), _acl("Group", "*", "All"),
                      _acl("Cluster", "kafka-cluster", "IdempotentWrite"),
                      _acl("Topic", "w-ok", "Write"), _acl("Topic", "w-ok", "Describe")])
        eng.produce_batch("later", [b"later-%d" % i for i in range(3)], partition=0)
    s = start_server(d, settings=(*FAST, f"ssl.keystore.location={pki.server.pem}",
                                  f"connection.failed.authentication.delay.ms={DELAY_MS}"),
                     listeners=("PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"))
    try:
        yield s
    finally:
        s.kill()


CASES = [(c, m) for c in CLIENTS for m in SCRAMS] + [("confluent", "PLAIN")]


@pytest.mark.parametrize("client, mech", CASES)
def test_each_client_produces_and_consumes_over_sasl_ssl(server, pki, client, mech):
    topic = f"c-{client}-{mech}"
    got = produce_consume(client, server.listeners["SASL_SSL"], topic, mech, ca=pki.ca.cert)
    want = held(server.data_dir, topic)
    assert [r.key for r in want] == [f"{client}-{mech}-{i}".encode() for i in range(5)]
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in want]


@pytest.mark.parametrize("client, mech", CASES)
def test_wrong_password_and_unknown_user_refused_over_sasl_ssl(server, pki, client, mech):
    fails = auths(server.data_dir, mech, "failure")
    tag = f"{client[:4]}{mech[-3:]}"
    for user, password in (("alice", f"wrong-pw-{tag}"), ("nobody", f"nobody-pw-{tag}")):
        said = refusal(client, server.listeners["SASL_SSL"], mech, user, password,
                       ca=pki.ca.cert)
        assert refused_as(mech) in said, said
        assert password not in said
    assert auths(server.data_dir, mech, "failure") >= fails + 2
    log = server.log()
    assert f"-pw-{tag}" not in log and PASSWORD not in log
    assert "User:'nobody'" in log


# ---------------------------------------------------------------------- ACLs
def _produce_code(w: Wire, topic: str) -> int:
    r = w.call(produce(topic, 0, batch(1, key=b"acl")), 0, 9)
    return r.responses[0].partition_responses[0].error_code


def test_alice_writes_where_an_acl_lets_her_and_is_refused_elsewhere(server, pki):
    from confluent_kafka import KafkaError, Producer

    results: dict[str, object] = {}
    p = Producer({"bootstrap.servers": server.listeners["SASL_SSL"],
                  "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.username": "alice", "sasl.password": PASSWORD,
                  "ssl.ca.location": str(pki.ca.cert), "message.timeout.ms": 10000,
                  "enable.idempotence": False})
    for topic in ("w-ok", "w-no"):
        p.produce(topic, b"by-confluent", partition=0,
                  on_delivery=lambda err, msg, t=topic: results.__setitem__(t, err))
    assert p.flush(30) == 0
    assert results["w-ok"] is None, results
    err = results["w-no"]
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert [r.value for r in held(server.data_dir, "w-ok")] == [b"by-confluent"]
    assert held(server.data_dir, "w-no") == []
    # by hand over SASL_SSL: the same answers
    w = TlsWire(server.listeners["SASL_SSL"], pki.ca.cert)
    try:
        assert login(w, "SCRAM-SHA-256").error_code == 0
        assert _produce_code(w, "w-ok") == 0
        assert _produce_code(w, "w-no") == TOPIC_DENIED
    finally:
        w.close()
    assert "denied User:alice from 127.0.0.1" in server.log()


def test_an_anonymous_plaintext_client_is_refused(server):
    w = Wire(server.listeners["PLAINTEXT"])
    try:
        for topic in ("w-ok", "c-confluent-PLAIN", "w-no"):
            assert _produce_code(w, topic) == TOPIC_DENIED, topic
        md = w.call(metadata(["w-ok"]), 3, 9)
        assert [t.error_code for t in md.topics] == [TOPIC_DENIED]
    finally:
        w.close()
    assert len(held(server.data_dir, "w-ok")) <= 2  # (only alice's two records)
    assert "denied User:ANONYMOUS from 127.0.0.1" in server.log()


def _fetched(w: Wire, topic: str) -> tuple[int, bytes]:
    r = w.call(fetch(topic, 0, 0), 1, 12)
    part = r.responses[0].partitions[0]
    return part.error_code, bytes(part.records or b"")


def test_an_acl_added_by_rivven_acl_applies_to_an_open_connection_at_once(server, pki):
    w = TlsWire(server.listeners["SASL_SSL"], pki.ca.cert)
    try:
        assert login(w, "SCRAM-SHA-512").error_code == 0
        code, _ = _fetched(w, "later")
        assert code == TOPIC_DENIED
        r = run_rivven(server.data_dir, "acl", "add", "--allow-principal", "User:alice",
                       "--operation", "Read", "--topic", "later", check=True)
        assert r.returncode == 0
        t0 = time.monotonic()
        code, records = _fetched(w, "later")  # (the same connection, no new login)
        assert code == 0 and b"later-2" in records, (code, records[:100])
        assert time.monotonic() - t0 < 2
        assert _produce_code(w, "later") == TOPIC_DENIED  # (Read, not Write)
    finally:
        w.close()
