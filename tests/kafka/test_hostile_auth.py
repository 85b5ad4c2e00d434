"""Hostile clients against a server with SASL_SSL and SASL_PLAINTEXT listeners: credential
guessing from several connections (each failure answered after
``connection.failed.authentication.delay.ms``, counted, never logged with its password,
while a legitimate client authenticates without waiting behind them); half-done handshakes
(a TLS hello, a SaslHandshake, a SCRAM client-first, half a frame, then silence: closed after
``ssl.handshake.timeout.ms`` or ``connections.max.idle.ms``); SASL frames of crafted lengths
and raw v0 tokens likewise (closed at once, the claimed size never allocated: the server's
RSS stays bounded); TLS garbage; a flood of connections from one address past
``max.connections.per.ip``. After every case the server is alive and serves a legitimate
SASL_SSL client. Raw sockets and kafka-python's protocol classes throughout."""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from helpers.certs import Pki
from helpers.kafka import FAST, Served, start_server
from helpers.kafka_sasl import (
    PASSWORD,
    Scram,
    TlsWire,
    authenticate,
    auths,
    frame,
    handshake,
    login,
    metric,
)
from helpers.kafka_wire import (
    Wire,
    api_versions,
    batch,
    metadata,
    produce,
    raw,
    rss_bytes,
    tls_hello,
)
from helpers.kafka_wire import wait_for as _wait_for
from kafka.protocol.sasl import SaslAuthenticateRequest

from engine import Engine

DELAY_MS = 1000
IDLE_MS = 2000
TLS_TIMEOUT_MS = 1000
PER_IP = 24
MAX_RECEIVE = 524288  # (sasl.server.max.receive.size's default)
SASL_FAILED = 58


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki) -> Iterator[Served]:
    d = str(tmp_path_factory.mktemp("hostile") / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", 1)
        eng.users.add("alice", PASSWORD)
    s = start_server(d, settings=(*FAST, f"ssl.keystore.location={pki.server.pem}",
                                  f"connection.failed.authentication.delay.ms={DELAY_MS}",
                                  f"connections.max.idle.ms={IDLE_MS}",
                                  f"ssl.handshake.timeout.ms={TLS_TIMEOUT_MS}",
                                  f"max.connections.per.ip={PER_IP}"),
                     listeners=("SASL_SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"))
    try:
        yield s
    finally:
        s.kill()


def serves(server: Served, pki: Pki, mech: str = "SCRAM-SHA-256") -> float:
    """A legitimate SASL_SSL client logs in, asks Metadata and produces: the seconds its
    login took."""
    w = TlsWire(server.listeners["SASL_SSL"], pki.ca.cert)
    try:
        t0 = time.monotonic()
        assert login(w, mech).error_code == 0
        took = time.monotonic() - t0
        assert [t.name for t in w.call(metadata(["t"]), 3, 9).topics] == ["t"]
        r = w.call(produce("t", 0, batch(1, key=b"legit")), 0, 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        return took
    finally:
        w.close()


@pytest.fixture(autouse=True)
def still_serving(server, pki) -> Iterator[None]:
    yield
    assert server.proc.poll() is None, server.log()[-3000:]
    serves(server, pki)


def _sock(address: str, source: str | None = None) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source is not None:
        s.bind((source, 0))
    s.settimeout(10)
    s.connect((host, int(port)))
    return s


def _closed_within(s: socket.socket, within: float) -> float | None:
    """Seconds until the server closed ``s`` (EOF or reset; what it sent first is read and
    dropped), None if it did not within ``within``."""
    t0 = time.monotonic()
    s.settimeout(0.1)
    while time.monotonic() - t0 < within:
        try:
            if not s.recv(1 << 16):
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except (ConnectionError, ssl.SSLError):
            return time.monotonic() - t0
    return None


# ---------------------------------------------------------------------- guessing
def test_credential_guessing_is_delayed_counted_not_logged_and_holds_up_no_one(server, pki):
    """Six connections guess four passwords each, one after another (a failure closes the
    connection: each guess is a new one): PLAIN over SASL_SSL, SCRAM-SHA-256 over
    SASL_PLAINTEXT. Every guess is answered SASL_AUTHENTICATION_FAILED after the delay and
    counted; meanwhile a legitimate client logs in three times, each well within the delay."""
    d = server.data_dir
    before = {m: auths(d, m, "failure") for m in ("PLAIN", "SCRAM-SHA-256")}
    secret = uuid.uuid4().hex[:10]
    waits: list[float] = []
    errors: list[BaseException] = []

    def guesser(i: int) -> None:
        try:
            for j in range(4):
                pw = f"guess-{secret}-{i}-{j}"
                if i % 2 == 0:
                    w: Wire = TlsWire(server.listeners["SASL_SSL"], pki.ca.cert)
                    assert handshake(w, "PLAIN").error_code == 0
                    token = b"\0alice\0" + pw.encode()
                else:
                    w = Wire(server.listeners["SASL_PLAINTEXT"])
                    assert handshake(w, "SCRAM-SHA-256").error_code == 0
                    c = Scram("SCRAM-SHA-256", "alice", pw)
                    first = authenticate(w, c.first())
                    assert first.error_code == 0
                    token = c.final(first.auth_bytes)
                try:
                    t0 = time.monotonic()
                    r = authenticate(w, token)
                    waits.append(time.monotonic() - t0)
                    assert r.error_code == SASL_FAILED, r
                    assert pw not in (r.error_message or "")
                    assert w.closed_by_server(5)
                finally:
                    w.close()
        except BaseException as e:  # (seen by the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=guesser, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # (the guessers are in their delay)
    legit = [serves(server, pki, mech) for mech in ("SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256")]
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(waits) == 24
    assert min(waits) >= DELAY_MS / 1000 * 0.9, waits
    assert max(legit) < DELAY_MS / 1000 / 2, legit
    assert _wait_for(lambda: auths(d, "PLAIN", "failure") == before["PLAIN"] + 12
                     and auths(d, "SCRAM-SHA-256", "failure") == before["SCRAM-SHA-256"] + 12)
    log = server.log()
    assert secret not in log and PASSWORD not in log
    assert "of User:'alice' from 127.0.0.1:" in log  # (who was tried, and from where)
    # (a failed authentication's close is counted as such)
    assert metric(d, "rivven_kafka_connections_closed_total", reason="authentication") >= 24


# ---------------------------------------------------------------------- half-done handshakes
def test_half_done_handshakes_are_closed_after_their_limits(server, pki):
    """A TLS ClientHello then nothing: closed after ssl.handshake.timeout.ms. A SaslHandshake
    then nothing (over SASL_SSL), a SCRAM client-first then nothing (SASL_PLAINTEXT), half a
    SaslAuthenticate frame then nothing: closed after connections.max.idle.ms. A legitimate
    client is served meanwhile."""
    hello = _sock(server.listeners["SASL_SSL"])
    hello.sendall(tls_hello())
    sasl = TlsWire(server.listeners["SASL_SSL"], pki.ca.cert)
    assert handshake(sasl, "SCRAM-SHA-256").error_code == 0
    first = Wire(server.listeners["SASL_PLAINTEXT"])
    assert handshake(first, "SCRAM-SHA-512").error_code == 0
    assert authenticate(first, Scram("SCRAM-SHA-512", "alice", PASSWORD).first()).error_code == 0
    half = Wire(server.listeners["SASL_PLAINTEXT"])
    assert handshake(half, "PLAIN").error_code == 0
    whole = frame(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0" + b"x" * 100), 2)
    half.send(whole[:60])
    t0 = time.monotonic()
    assert serves(server, pki) < 0.5  # (served while those hang)
    try:
        took = _closed_within(hello, 5)
        assert took is not None and TLS_TIMEOUT_MS / 1000 * 0.8 <= time.monotonic() - t0, took
        for w in (sasl, first, half):
            assert w.closed_by_server(5)
        waited = time.monotonic() - t0
        assert IDLE_MS / 1000 * 0.9 <= waited < IDLE_MS / 1000 + 3, waited
    finally:
        for s in (hello, sasl, first, half):
            s.close()
    # (a close is logged when the connection's task ends, which may be just after the client
    # saw it: the lines are waited for)
    said = (f"no TLS handshake in ssl.handshake.timeout.ms={TLS_TIMEOUT_MS}",
            f"idle for connections.max.idle.ms={IDLE_MS}",
            f"not received whole: nothing more of it for connections.max.idle.ms={IDLE_MS}")
    log = _wait_for(lambda: (lambda text: text if all(x in text for x in said) else "")(
        server.log()), 10) or server.log()
    for x in said:
        assert x in log, (x, log[-3000:])


# ---------------------------------------------------------------------- crafted lengths
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


LENGTHS = {"2^31-1": 2**31 - 1, "-1": -1, "-2^31": -2**31, "0": 0, "7": 7,
           "past the limit": MAX_RECEIVE + 1}


def _wire(server: Served, pki: Pki, listener: str) -> Wire:
    return (TlsWire(server.listeners[listener], pki.ca.cert) if listener == "SASL_SSL"
            else Wire(server.listeners[listener]))


def _closed_at_once(w: Wire, what: str) -> None:
    t0 = time.monotonic()
    assert w.closed_by_server(5), what
    assert time.monotonic() - t0 < 0.9, (what, time.monotonic() - t0)  # (< the delay)


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_frames_of_crafted_lengths_are_closed_at_once_with_memory_bounded(server, pki,
                                                                               listener):
    """Each length as the first frame, after ApiVersions and a SaslHandshake, and as a raw
    token after a SaslHandshake v0 (0 and 7 there are tokens: a failed authentication,
    closed after the delay); a SaslAuthenticate whose auth_bytes claim 2 GiB inside a small
    frame (v1: an int32 length; v2: a compact length). None allocates what it claims."""
    rss0 = rss_bytes(server.proc.pid)
    cases = 0
    for name, n in LENGTHS.items():
        for stage in ("first", "after the handshake", "raw v0 token"):
            w = _wire(server, pki, listener)
            try:
                if stage == "after the handshake":
                    assert w.call(api_versions(), 18, 3).error_code == 0
                    assert handshake(w, "SCRAM-SHA-256").error_code == 0
                elif stage == "raw v0 token":
                    assert handshake(w, "SCRAM-SHA-256", version=0).error_code == 0
                w.send(struct.pack(">i", n) + b"\x00" * 16)
                if stage == "raw v0 token" and 0 <= n <= 16:  # (a token: a failed SCRAM)
                    t0 = time.monotonic()
                    assert w.closed_by_server(DELAY_MS / 1000 + 5)
                    assert time.monotonic() - t0 >= DELAY_MS / 1000 * 0.9
                else:
                    _closed_at_once(w, f"{name} {stage}")
                cases += 1
            finally:
                w.close()
    huge = 2**31 - 1
    for version, body, flexible in ((1, struct.pack(">i", huge) + b"abc", False),
                                    (2, _uvarint(huge + 1) + b"abc\x00", True),
                                    (0, struct.pack(">i", huge) + b"abc", False)):
        w = _wire(server, pki, listener)
        try:
            assert handshake(w, "PLAIN").error_code == 0
            w.send(raw(36, version, body, flexible=flexible))
            _closed_at_once(w, f"SaslAuthenticate v{version} claiming {huge} bytes")
            cases += 1
        finally:
            w.close()
    assert cases == len(LENGTHS) * 3 + 3
    grew = rss_bytes(server.proc.pid) - rss0
    assert grew < 50 << 20, f"the server's RSS grew {grew >> 20} MiB"
    log = server.log()
    assert f"before SASL authentication completed (sasl.server.max.receive.size={MAX_RECEIVE})" \
        in log


# ---------------------------------------------------------------------- TLS garbage
def test_tls_garbage_is_cut_off(server, pki):
    """Random bytes, an HTTP request, a TLS record header claiming 16 KiB then nothing on
    the SASL_SSL listener: closed (the last after ssl.handshake.timeout.ms), counted as TLS
    failures. On the SASL_PLAINTEXT listener an HTTP request and a TLS hello read as frame
    lengths past sasl.server.max.receive.size: closed at once."""
    d = server.data_dir
    before = metric(d, "rivven_kafka_authentications_total", mechanism="TLS", result="failure")
    rss0 = rss_bytes(server.proc.pid)
    tls = server.listeners["SASL_SSL"]
    socks = []
    for data in (os.urandom(4096), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"\x16\x03\x01\x40\x00"):
        s = _sock(tls)
        s.sendall(data)
        socks.append(s)
    try:
        for s, within in zip(socks, (1.5, 1.5, TLS_TIMEOUT_MS / 1000 + 2), strict=True):
            assert _closed_within(s, within) is not None
        for data in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", tls_hello()):
            s = _sock(server.listeners["SASL_PLAINTEXT"])
            socks.append(s)
            s.sendall(data)
            took = _closed_within(s, 2)
            assert took is not None and took < 0.9, took
    finally:
        for s in socks:
            s.close()
    assert _wait_for(lambda: metric(d, "rivven_kafka_authentications_total", mechanism="TLS",
                                    result="failure") >= before + 3)
    assert rss_bytes(server.proc.pid) - rss0 < 50 << 20


# ---------------------------------------------------------------------- a flood
def test_a_flood_from_one_address_is_refused_past_the_limit_and_others_are_served(server,
                                                                                   pki):
    """40 connections from 127.0.0.2 (20 to each listener, none of them saying anything):
    the first max.connections.per.ip=24 are taken, the 16 others refused at once and counted
    (reason refused); a client from 127.0.0.1 is served meanwhile."""
    d = server.data_dir
    refused0 = metric(d, "rivven_kafka_connections_closed_total", reason="refused")
    flood = []
    try:
        for i in range(40):
            name = "SASL_PLAINTEXT" if i % 2 else "SASL_SSL"
            flood.append(_sock(server.listeners[name], source="127.0.0.2"))
        time.sleep(0.3)
        readable, _, _ = select.select(flood, [], [], 0)  # (the refused: closed at once)
        assert len(readable) == 40 - PER_IP
        assert all(_closed_within(s, 0.5) is not None for s in readable)
        assert serves(server, pki) < 0.5
        assert _wait_for(lambda: metric(d, "rivven_kafka_connections_closed_total",
                                        reason="refused") == refused0 + 40 - PER_IP)
    finally:
        for s in flood:
            s.close()
    assert f"max.connections.per.ip={PER_IP} reached for 127.0.0.2" in server.log()
