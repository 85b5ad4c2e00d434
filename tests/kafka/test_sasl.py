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
import hashlib
import hmac
import json
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import run_rivven
from helpers.kafka import FAST, Served, start_server
from helpers.kafka_clients import (
    Rec,
    confluent_consume,
    confluent_produce,
    held,
    java,
    java_consume,
    java_popen,
    java_produce,
    kafka_python_consume,
    kafka_python_produce,
    kcat,
    kcat_consume,
    kcat_produce,
)
from helpers.kafka_wire import Wire, api_versions, metadata
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest

from engine import Engine

MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
CLIENTS = ("confluent", "kafka-python", "kcat", "java")
PASSWORD = "alice's secret ✓"
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


def _metrics(d: str) -> dict:
    return json.loads(run_rivven(d, "metrics", "--json", check=True).stdout)


def _auths(d: str, mechanism: str, result: str) -> float:
    doc = _metrics(d)
    return sum(s["value"] for s in doc.get("rivven_kafka_authentications_total", {})
               .get("samples", []) if s["labels"] == {"mechanism": mechanism, "result": result})


def _requests(d: str, api: str) -> float:
    doc = _metrics(d)
    return sum(s["value"] for s in doc.get("rivven_kafka_requests_total", {}).get("samples", [])
               if s["labels"].get("api") == api)


# ---------------------------------------------------------------------- client configs
def conf(client: str, mech: str, user: str = "alice", password: str = PASSWORD) -> Any:
    """Each client's own way to say SASL_PLAINTEXT + mechanism + user + password."""
    if client == "confluent":
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                "sasl.username": user, "sasl.password": password}
    if client == "kafka-python":
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech,
                "sasl_plain_username": user, "sasl_plain_password": password}
    if client == "kcat":
        return ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mech}",
                "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
            "sasl.jaas.config": f'{module} required username="{user}" '
                                f'password="{password}";'}


def produce_consume(client: str, bootstrap: str, topic: str, mech: str) -> list[Rec]:
    recs = [Rec(0, f"{client}-{mech}-{i}".encode(), f"v{i} ✓".encode()) for i in range(5)]
    c = conf(client, mech)
    if client == "confluent":
        confluent_produce(bootstrap, topic, recs, "none", **c)
        return confluent_consume(bootstrap, topic, **c)
    if client == "kafka-python":
        kafka_python_produce(bootstrap, topic, recs, "none", **c)
        return kafka_python_consume(bootstrap, topic, **c)
    if client == "kcat":
        kcat_produce(bootstrap, topic, recs, "none", *c)
        return kcat_consume(bootstrap, topic, *c)
    java_produce(bootstrap, topic, recs, "none", **c)
    return java_consume(bootstrap, topic, **c)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_with_each_mechanism(server, client):
    for mech in MECHS:
        topic = f"{client}-{mech}"
        got = produce_consume(client, server.bootstrap, topic, mech)
        want = held(server.data_dir, topic)
        assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in want]
        assert [r.key for r in want] == [f"{client}-{mech}-{i}".encode() for i in range(5)]


# ---------------------------------------------------------------------- refusals
def refusal(client: str, bootstrap: str, mech: str, user: str, password: str) -> str:
    """What the client reports when its authentication is refused (it must fail)."""
    if client == "confluent":
        from confluent_kafka.admin import AdminClient

        errors: list[str] = []
        a = AdminClient({"bootstrap.servers": bootstrap, **conf(client, mech, user, password),
                         "error_cb": lambda e: errors.append(str(e))})
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            a.poll(0.1)
        assert errors, "confluent-kafka reported no error"
        return errors[0]
    if client == "kafka-python":
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaTimeoutError

        seen: list[str] = []

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen.append(record.getMessage())

        h = Keep(logging.WARNING)
        logging.getLogger("kafka").addHandler(h)
        try:
            with pytest.raises(KafkaTimeoutError):
                KafkaAdminClient(bootstrap_servers=bootstrap, bootstrap_timeout_ms=1500,
                                 **conf(client, mech, user, password))
        finally:
            logging.getLogger("kafka").removeHandler(h)
        return "\n".join(seen)
    if client == "kcat":
        import subprocess

        r = subprocess.run([kcat(), "-L", "-b", bootstrap, "-m", "2",
                            *conf(client, mech, user, password)], capture_output=True,
                           timeout=60)
        assert r.returncode != 0
        return r.stderr.decode()
    out = java("admin", bootstrap, "-", props=conf(client, mech, user, password),
               input=b"list-topics\n", check=False)
    assert out and out[0].get("error") == "SaslAuthenticationException", out
    return str(out[0]["message"])


@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_and_unknown_user_refused_as_each_client_expects(server, client):
    for mech, user, password in (("SCRAM-SHA-256", "alice", "wrong-pw-1"),
                                 ("SCRAM-SHA-512", "nobody", "whatever-pw-2"),
                                 ("PLAIN", "alice", "wrong-pw-3"), ("PLAIN", "nobody", "nope-pw-4")):
        said = refusal(client, server.bootstrap, mech, user, password)
        want = ("Authentication failed: Invalid username or password" if mech == "PLAIN" else
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {mech}")
        assert want in said, said
        assert password not in said
    log = server.log()
    assert "-pw-" not in log and PASSWORD not in log
    assert "User:'nobody'" in log


# ---------------------------------------------------------------------- by hand
def _call(w: Wire, req: Any, version: int, key: int, corr: int = 1) -> Any:
    req.with_header(correlation_id=corr, client_id="sasl-test")
    return w.call(bytes(req.encode(version=version, header=True, framed=True)), key, version)


def handshake(w: Wire, mech: str, version: int = 1) -> Any:
    return _call(w, SaslHandshakeRequest(version=version, mechanism=mech), version, 17)


def authenticate(w: Wire, token: bytes, version: int = 2) -> Any:
    return _call(w, SaslAuthenticateRequest(version=version, auth_bytes=token), version, 36)


class Scram:
    """The client's side of SCRAM (RFC 5802), for the hand-made connections."""

    def __init__(self, mech: str, user: str, password: str) -> None:
        self.algo = "sha256" if mech.endswith("256") else "sha512"
        self.user, self.password = user, password.encode()
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n={user},r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.algo, self.password, base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.algo).digest()
        stored = hashlib.new(self.algo, client_key).digest()
        without = f"c=biws,r={attrs['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without}".encode()
        sig = hmac.new(stored, auth, self.algo).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self.server_sig = hmac.new(hmac.new(salted, b"Server Key", self.algo).digest(), auth,
                                   self.algo).digest()
        return f"{without},p={base64.b64encode(proof).decode()}".encode()


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
    oks = _auths(server.data_dir, "SCRAM-SHA-256", "success")
    kafka_python_produce(server.bootstrap, "t", recs, "none", api_version=(0, 11, 0),
                         **{**c, "enable_idempotence": False})
    assert b"old-2" in [r.key for r in held(server.data_dir, "t")]
    # authenticated by raw tokens: no SaslAuthenticate request
    assert _auths(server.data_dir, "SCRAM-SHA-256", "success") > oks
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
    before = _auths(server.data_dir, "other", "failure")
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
    assert _auths(server.data_dir, "other", "failure") == before + 1
    assert "GSSAPI" not in json.dumps(_metrics(server.data_dir))


def test_failed_authentication_is_delayed_counted_and_does_not_hold_up_others(server):
    fails = _auths(server.data_dir, "SCRAM-SHA-256", "failure")
    oks = _auths(server.data_dir, "SCRAM-SHA-256", "success")
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

        bad.send(_frame(SaslAuthenticateRequest(version=2, auth_bytes=c.final(
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
    assert _auths(server.data_dir, "SCRAM-SHA-256", "failure") == fails + 1
    assert _auths(server.data_dir, "SCRAM-SHA-256", "success") == oks + 1


def _frame(req: Any, version: int, corr: int = 7) -> bytes:
    req.with_header(correlation_id=corr, client_id="sasl-test")
    return bytes(req.encode(version=version, header=True, framed=True))


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
    before = _auths(reauth.data_dir, "SCRAM-SHA-256", "success")
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
    after = _auths(reauth.data_dir, "SCRAM-SHA-256", "success")
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
