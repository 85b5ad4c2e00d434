"""SASL on ``rivven serve`` (SASL_PLAINTEXT on loopback): confluent-kafka, kafka-python, kcat
and Kafka's Java client authenticate with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, produce and
consume; a wrong password and an unknown user are refused with the error each client shows;
re-authentication (KIP-368) keeps a client working; the failed-authentication delay (other
connections served meanwhile) and counts; Kafka's rules before authentication (raw v0
tokens, only ApiVersions and SASL first, the token size limit, the mechanisms offered);
Describe/AlterUserScramCredentials through kafka-python's and confluent-kafka's admin
clients."""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from helpers.kafka import FAST, Served, start_server
from helpers.kafka_clients import Rec, held, java_popen, kafka_python_produce
from helpers.kafka_sasl import (
    CLIENTS,
    PASSWORD,
    Scram,
    authenticate,
    auths,
    conf,
    frame,
    handshake,
    metrics,
    produce_consume,
    refusal,
    refused_as,
)
from helpers.kafka_wire import Wire, api_versions, metadata
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from engine import Engine

MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
DELAY_MS = 400
LISTENER = ("SASL_PLAINTEXT://127.0.0.1:0",)


def _make(d: str, topics: list[str]) -> None:
    with Engine.open(d) as eng:
        for t in topics:
            eng.create_topic(t, 2)
        eng.users.add("alice", PASSWORD)
        eng.users.add("bob", "bob-pw", mechanisms=["SCRAM-SHA-512"])


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Served]:
    d = str(tmp_path_factory.mktemp("sasl") / "data")
    _make(d, [f"{c}-{m}" for c in CLIENTS for m in MECHS] + ["t"])
    s = start_server(d, settings=(*FAST, f"connection.failed.authentication.delay.ms={DELAY_MS}"),
                     listeners=LISTENER)
    try:
        yield s
    finally:
        s.kill()


def _requests(d: str, api: str) -> float:
    doc = metrics(d)
    return sum(s["value"] for s in doc.get("rivven_kafka_requests_total", {}).get("samples", [])
               if s["labels"].get("api") == api)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_with_each_mechanism(server, client):
    for mech in MECHS:
        topic = f"{client}-{mech}"
        got = produce_consume(client, server.bootstrap, topic, mech)
        want = held(server.data_dir, topic)
        assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in want]
        assert [r.key for r in want] == [f"{client}-{mech}-{i}".encode() for i in range(5)]


@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_and_unknown_user_refused_as_each_client_expects(server, client):
    for mech, user, password in (("SCRAM-SHA-256", "alice", "wrong-pw-1"),
                                 ("SCRAM-SHA-512", "nobody", "whatever-pw-2"),
                                 ("PLAIN", "alice", "wrong-pw-3"), ("PLAIN", "nobody", "nope-pw-4")):
        said = refusal(client, server.bootstrap, mech, user, password)
        assert refused_as(mech) in said, said
        assert password not in said
    log = server.log()
    assert "-pw-" not in log and PASSWORD not in log
    assert "User:'nobody'" in log


# ---------------------------------------------------------------------- by hand
def raw_token(w: Wire, token: bytes) -> bytes | None:
    w.send(struct.pack(">i", len(token)) + token)
    return w.read()


def test_raw_v0_tokens_after_handshake_v0_plain_and_scram(server):
    w = Wire(server.bootstrap)
    try:
        r = handshake(w, "PLAIN", version=0)
        assert r.error_code == 0 and "PLAIN" in r.mechanisms
        assert raw_token(w, b"\0alice\0" + PASSWORD.encode()) == b""
        m = w.call(metadata(["t"]), 3, 9)
        assert [t.name for t in m.topics] == ["t"]
    finally:
        w.close()
    w = Wire(server.bootstrap)
    try:
        assert handshake(w, "SCRAM-SHA-512", version=0).error_code == 0
        c = Scram("SCRAM-SHA-512", "bob", "bob-pw")
        first = raw_token(w, c.first())
        assert first is not None and first.startswith(f"r={c.nonce}".encode())
        last = raw_token(w, c.final(first))
        assert last == b"v=" + base64.b64encode(c.server_sig)
        assert w.call(metadata(["t"]), 3, 9).topics[0].name == "t"
    finally:
        w.close()
    # a wrong password over raw tokens: no answer (as Kafka), closed after the delay
    w = Wire(server.bootstrap)
    try:
        assert handshake(w, "PLAIN", version=0).error_code == 0
        t0 = time.monotonic()
        assert raw_token(w, b"\0alice\0nope") is None
        assert time.monotonic() - t0 >= DELAY_MS / 1000 * 0.9
    finally:
        w.close()


def test_kafka_python_with_a_v0_handshake(server):
    """kafka-python told the broker is 0.11 (before SaslAuthenticate) sends SaslHandshake v0 and
    raw tokens."""
    recs = [Rec(1, b"old-%d" % i, b"v") for i in range(3)]
    c = conf("kafka-python", "SCRAM-SHA-256")
    authenticates = _requests(server.data_dir, "SaslAuthenticate")
    oks = auths(server.data_dir, "SCRAM-SHA-256", "success")
    kafka_python_produce(server.bootstrap, "t", recs, "none", api_version=(0, 11, 0),
                         **{**c, "enable_idempotence": False})
    assert b"old-2" in [r.key for r in held(server.data_dir, "t")]
    # authenticated by raw tokens: no SaslAuthenticate request
    assert auths(server.data_dir, "SCRAM-SHA-256", "success") > oks
    assert _requests(server.data_dir, "SaslAuthenticate") == authenticates


def test_before_authentication_only_api_versions_and_sasl(server):
    # Metadata first: closed (logged), nothing answered
    w = Wire(server.bootstrap)
    try:
        w.send(metadata(["t"]))
        assert w.read() is None
    finally:
        w.close()
    # ApiVersions, then ApiVersions again: closed
    w = Wire(server.bootstrap)
    try:
        assert w.call(api_versions(), 18, 3).error_code == 0
        w.send(api_versions())
        assert w.read() is None
    finally:
        w.close()
    # after the handshake, a Metadata in place of SaslAuthenticate: closed
    w = Wire(server.bootstrap)
    try:
        assert handshake(w, "SCRAM-SHA-256").error_code == 0
        w.send(metadata(["t"]))
        assert w.read() is None
    finally:
        w.close()
    # a token past sasl.server.max.receive.size (524288): closed before it is read
    w = Wire(server.bootstrap)
    try:
        assert handshake(w, "PLAIN").error_code == 0
        w.send(struct.pack(">i", 1 << 20))  # (a frame announcing 1 MiB)
        assert w.closed_by_server(5)
    finally:
        w.close()
    log = server.log()
    assert "Metadata before SASL authentication completed" in log
    assert "sasl.server.max.receive.size=524288" in log


def test_unknown_mechanism_answered_with_those_offered_after_the_delay(server):
    before = auths(server.data_dir, "other", "failure")
    w = Wire(server.bootstrap)
    try:
        t0 = time.monotonic()
        r = handshake(w, "GSSAPI")
        assert time.monotonic() - t0 >= DELAY_MS / 1000 * 0.9
        assert r.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert r.mechanisms == list(MECHS)  # (loopback: PLAIN offered)
        assert w.closed_by_server(5)
    finally:
        w.close()
    assert auths(server.data_dir, "other", "failure") == before + 1
    assert "GSSAPI" not in json.dumps(metrics(server.data_dir))


def test_failed_authentication_is_delayed_counted_and_does_not_hold_up_others(server):
    fails = auths(server.data_dir, "SCRAM-SHA-256", "failure")
    oks = auths(server.data_dir, "SCRAM-SHA-256", "success")
    bad = Wire(server.bootstrap)
    try:
        assert handshake(bad, "SCRAM-SHA-256").error_code == 0
        c = Scram("SCRAM-SHA-256", "alice", "not it")
        first = authenticate(bad, c.first())
        assert first.error_code == 0
        t0 = time.monotonic()
        done: dict[str, float] = {}

        def good() -> None:  # another client, while the bad one waits
            w = Wire(server.bootstrap)
            try:
                assert handshake(w, "SCRAM-SHA-256").error_code == 0
                g = Scram("SCRAM-SHA-256", "alice", PASSWORD)
                f = authenticate(w, g.first())
                last = authenticate(w, g.final(f.auth_bytes))
                assert last.error_code == 0 and last.auth_bytes == b"v=" + base64.b64encode(
                    g.server_sig)
                done["good"] = time.monotonic() - t0
            finally:
                w.close()

        bad.send(frame(SaslAuthenticateRequest(version=2, auth_bytes=c.final(
            first.auth_bytes)), 2))
        th = threading.Thread(target=good)
        th.start()
        got = bad.read()
        waited = time.monotonic() - t0
        th.join(30)
        assert got is not None
        resp = SaslAuthenticateResponse.decode(got[5:], version=2)
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert resp.error_message == ("Authentication failed during authentication due to "
                                      "invalid credentials with SASL mechanism SCRAM-SHA-256")
        assert waited >= DELAY_MS / 1000 * 0.9
        assert done["good"] < DELAY_MS / 1000, done
        assert bad.closed_by_server(5)
    finally:
        bad.close()
    assert auths(server.data_dir, "SCRAM-SHA-256", "failure") == fails + 1
    assert auths(server.data_dir, "SCRAM-SHA-256", "success") == oks + 1


def test_sasl_apis_after_authentication_answer_illegal_sasl_state(server):
    w = Wire(server.bootstrap)
    try:
        assert handshake(w, "PLAIN").error_code == 0
        ok = authenticate(w, b"\0alice\0" + PASSWORD.encode())
        assert ok.error_code == 0 and ok.session_lifetime_ms == 0
        assert authenticate(w, b"\0alice\0x").error_code == 34  # ILLEGAL_SASL_STATE
        assert handshake(w, "PLAIN").error_code == 34  # (no session end: no re-auth)
        assert w.call(metadata(["t"]), 3, 9).topics[0].name == "t"
    finally:
        w.close()


# ---------------------------------------------------------------------- re-authentication
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def reauth(tmp_path_factory) -> Iterator[Served]:
    d = str(tmp_path_factory.mktemp("sasl-reauth") / "data")
    _make(d, ["t"])
    s = start_server(d, settings=(*FAST, f"connections.max.reauth.ms={REAUTH_MS}",
                                  "connection.failed.authentication.delay.ms=0"),
                     listeners=LISTENER)
    try:
        yield s
    finally:
        s.kill()


def test_session_lifetime_reauthentication_and_expiry_by_hand(reauth):
    w = Wire(reauth.bootstrap)
    try:
        assert handshake(w, "PLAIN").error_code == 0
        assert authenticate(w, b"\0alice\0" + PASSWORD.encode()).session_lifetime_ms == REAUTH_MS
        time.sleep(1.1)  # (re-authentication at most once a second)
        assert handshake(w, "PLAIN").error_code == 0
        again = authenticate(w, b"\0alice\0" + PASSWORD.encode())
        assert again.error_code == 0 and again.session_lifetime_ms == REAUTH_MS
        assert w.call(metadata(["t"]), 3, 9).topics[0].name == "t"
        time.sleep(REAUTH_MS / 1000 + 0.2)
        w.send(metadata(["t"]))  # the session ended: closed, not answered
        assert w.read() is None
    finally:
        w.close()
    # another principal on re-authentication: refused, closed
    w = Wire(reauth.bootstrap)
    try:
        assert handshake(w, "SCRAM-SHA-512").error_code == 0
        c = Scram("SCRAM-SHA-512", "alice", PASSWORD)
        assert authenticate(w, c.final(authenticate(w, c.first()).auth_bytes)).error_code == 0
        time.sleep(1.1)
        assert handshake(w, "SCRAM-SHA-512").error_code == 0
        b = Scram("SCRAM-SHA-512", "bob", "bob-pw")
        r = authenticate(w, b.final(authenticate(w, b.first()).auth_bytes))
        assert r.error_code == 58
        assert r.error_message == ("Cannot change principals during re-authentication from "
                                   "User.alice: User.bob")
        assert w.closed_by_server(5)
    finally:
        w.close()
    assert "the SASL session of User:alice ended" in reauth.log()


def test_clients_that_reauthenticate_keep_working(reauth):
    """librdkafka and the Java client re-authenticate before the session ends (KIP-368): a
    producer (confluent-kafka) and a consumer (Java) keep their connections across three
    session lifetimes; none is closed for a session that ended."""
    ended = reauth.log().count("ended (connections.max.reauth.ms")
    before = auths(reauth.data_dir, "SCRAM-SHA-256", "success")
    start = len(held(reauth.data_dir, "t"))
    consumer = java_popen("consume", reauth.bootstrap, "t",
                          props=conf("java", "SCRAM-SHA-256"),
                          opts={"min-records": start + 14, "timeout-ms": 60000})
    try:
        from confluent_kafka import Producer

        errors: list[str] = []
        p = Producer({"bootstrap.servers": reauth.bootstrap, **conf("confluent", "SCRAM-SHA-256"),
                      "linger.ms": 0, "error_cb": lambda e: errors.append(str(e))})
        for i in range(14):
            p.produce("t", b"r%d" % i, partition=0)
            assert p.flush(10) == 0
            time.sleep(0.45)
        assert not errors, errors
        out, err = consumer.communicate(timeout=90)
        assert consumer.returncode == 0, err.decode()[-2000:]
    finally:
        if consumer.poll() is None:
            consumer.kill()
    got = [json.loads(x) for x in out.decode().splitlines() if x.startswith("{")]
    assert sum(1 for j in got if "event" not in j) >= start + 14
    after = auths(reauth.data_dir, "SCRAM-SHA-256", "success")
    assert after - before >= 6, (before, after)  # (two clients, several times each)
    assert reauth.log().count("ended (connections.max.reauth.ms") == ended, reauth.log()[-3000:]


# ---------------------------------------------------------------------- the admin APIs
def test_kafka_python_admin_describes_and_alters_scram_credentials(server):
    from kafka import KafkaAdminClient
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, **conf("kafka-python", "PLAIN"))
    try:
        got = a.describe_user_scram_credentials(["alice", "bob", "zed"])
        assert {i["mechanism"].name: i["iterations"] for i in got["alice"]["credential_infos"]} \
            == {"SCRAM_SHA_256": 4096, "SCRAM_SHA_512": 4096}
        assert [i["mechanism"].name for i in got["bob"]["credential_infos"]] == ["SCRAM_SHA_512"]
        assert "does not exist" in got["zed"]["error"]
        errs = a.alter_user_scram_credentials([
            UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256, "carol-pw",
                                         iterations=8192),
            UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_256, "d",
                                         iterations=1000),
            UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])
        assert errs["carol"] is None
        assert "Too few iterations" in errs["dave"]
        assert "does not exist" in errs["bob"]
        assert a.describe_user_scram_credentials(["carol"])["carol"]["credential_infos"][0][
            "iterations"] == 8192
    finally:
        a.close()
    # carol, made over the wire, authenticates
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": server.bootstrap,
                      **conf("confluent", "SCRAM-SHA-256", "carol", "carol-pw")}).list_topics(
        timeout=20)
    assert "t" in md.topics
    with Engine.open(server.data_dir, read_only=True) as eng:
        assert eng.users.describe("carol")["credentials"] == [
            {"mechanism": "SCRAM-SHA-256", "iterations": 8192}]
        assert eng.users.credential("dave", "SCRAM-SHA-256") is None


def test_confluent_admin_describes_and_alters_scram_credentials(server):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    a = AdminClient({"bootstrap.servers": server.bootstrap, **conf("confluent", "SCRAM-SHA-512")})
    fut = a.alter_user_scram_credentials([
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                 4096), b"erin-pw", b"salt" * 8),
        UserScramCredentialUpsertion("erin2", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  20000), b"x", b"salt" * 8)])
    fut["erin"].result(20)
    with pytest.raises(Exception, match="Too many iterations"):
        fut["erin2"].result(20)
    d = a.describe_user_scram_credentials(["erin"])
    desc = d["erin"].result(20)
    assert [(i.mechanism, i.iterations) for i in desc.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    assert "erin" in a.describe_user_scram_credentials().result(20)
    with pytest.raises(Exception, match="does not exist"):
        a.describe_user_scram_credentials(["nobody-at-all"])["nobody-at-all"].result(20)
    # erin authenticates with the password the client salted
    assert handshake_ok(server.bootstrap, "SCRAM-SHA-512", "erin", "erin-pw")
    a.alter_user_scram_credentials([UserScramCredentialDeletion(
        "erin", ScramMechanism.SCRAM_SHA_512)])["erin"].result(20)
    assert not handshake_ok(server.bootstrap, "SCRAM-SHA-512", "erin", "erin-pw")


def handshake_ok(bootstrap: str, mech: str, user: str, password: str) -> bool:
    w = Wire(bootstrap)
    try:
        assert handshake(w, mech).error_code == 0
        c = Scram(mech, user, password)
        return authenticate(w, c.final(authenticate(w, c.first()).auth_bytes)).error_code == 0
    finally:
        w.close()


def test_plain_refused_without_tls_off_loopback(tmp_path):
    """A SASL_PLAINTEXT listener reached over a non-loopback address offers no PLAIN (a
    password in clear on the network) unless --insecure."""
    addr = _non_loopback()
    if addr is None:
        pytest.fail("this machine has no non-loopback IPv4 address to test with",
                    pytrace=False)
    d = str(tmp_path / "data")
    _make(d, ["t"])
    s = start_server(d, settings=(*FAST, "connection.failed.authentication.delay.ms=0"),
                     listeners=(f"SASL_PLAINTEXT://{addr}:0",))
    try:
        w = Wire(s.bootstrap)
        try:
            r = handshake(w, "PLAIN")
            assert r.error_code == 33 and "PLAIN" not in r.mechanisms, r
        finally:
            w.close()
        assert "PLAIN refused: this listener has no TLS" in s.log()
    finally:
        s.kill()


def _non_loopback() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("10.255.255.255", 1))
            ip = u.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip
