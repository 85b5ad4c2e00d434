"""SASL for the Kafka-protocol tests (tests/kafka/test_sasl.py, test_sasl_ssl.py,
test_hostile_auth.py): each client's configuration for SASL_PLAINTEXT or (with a CA)
SASL_SSL, a produce-and-consume round, what each client says when refused, the client side
of SCRAM by hand, raw SaslHandshake/SaslAuthenticate calls over a ``Wire`` (or a
``TlsWire``), and the authentication counts of ``rivven metrics``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from helpers import run_rivven
from helpers.kafka_clients import (
    Rec,
    confluent_consume,
    confluent_produce,
    java,
    java_consume,
    java_produce,
    kafka_python_consume,
    kafka_python_produce,
    kcat,
    kcat_consume,
    kcat_produce,
)
from helpers.kafka_wire import Wire

CLIENTS = ("confluent", "kafka-python", "kcat", "java")
PASSWORD = "alice's secret ✓"


# ---------------------------------------------------------------------- client configs
def conf(client: str, mech: str, user: str = "alice", password: str = PASSWORD,
         ca: Path | None = None) -> Any:
    """Each client's own way to say SASL_PLAINTEXT (or, with ``ca``, SASL_SSL trusting that
    CA) + mechanism + user + password (kcat: its -X arguments)."""
    proto = "SASL_PLAINTEXT" if ca is None else "SASL_SSL"
    if client in ("confluent", "kcat"):
        c = {"security.protocol": proto, "sasl.mechanism": mech, "sasl.username": user,
             "sasl.password": password}
        if ca is not None:
            c["ssl.ca.location"] = str(ca)
        if client == "kcat":
            c["sasl.mechanisms"] = c.pop("sasl.mechanism")
            return [a for k, v in c.items() for a in ("-X", f"{k}={v}")]
        return c
    if client == "kafka-python":
        c = {"security_protocol": proto, "sasl_mechanism": mech,
             "sasl_plain_username": user, "sasl_plain_password": password}
        if ca is not None:
            c["ssl_cafile"] = str(ca)
        return c
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    c = {"security.protocol": proto, "sasl.mechanism": mech,
         "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'}
    if ca is not None:  # (Kafka's Java client reads a PEM truststore)
        c.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)})
    return c


def produce_consume(client: str, bootstrap: str, topic: str, mech: str,
                    ca: Path | None = None) -> list[Rec]:
    """Five records produced by ``client`` as alice, then every record of the topic as it
    consumes them."""
    recs = [Rec(0, f"{client}-{mech}-{i}".encode(), f"v{i} ✓".encode()) for i in range(5)]
    c = conf(client, mech, ca=ca)
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


def refusal(client: str, bootstrap: str, mech: str, user: str, password: str,
            ca: Path | None = None) -> str:
    """What the client reports when its authentication is refused (it must fail)."""
    c = conf(client, mech, user, password, ca)
    if client == "confluent":
        from confluent_kafka.admin import AdminClient

        errors: list[str] = []
        a = AdminClient({"bootstrap.servers": bootstrap, **c,
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
                KafkaAdminClient(bootstrap_servers=bootstrap, bootstrap_timeout_ms=1500, **c)
        finally:
            logging.getLogger("kafka").removeHandler(h)
        return "\n".join(seen)
    if client == "kcat":
        r = subprocess.run([kcat(), "-L", "-b", bootstrap, "-m", "2", *c], capture_output=True,
                           timeout=60)
        assert r.returncode != 0
        return r.stderr.decode()
    out = java("admin", bootstrap, "-", props=c, input=b"list-topics\n", check=False)
    assert out and out[0].get("error") == "SaslAuthenticationException", out
    return str(out[0]["message"])


def refused_as(mech: str) -> str:
    """Kafka's message to a client whose credentials are wrong (the same for an unknown
    user: it does not tell which)."""
    if mech == "PLAIN":
        return "Authentication failed: Invalid username or password"
    return ("Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mech}")


# ---------------------------------------------------------------------- by hand
class TlsWire(Wire):
    """A ``Wire`` over TLS (a SASL_SSL or SSL listener), trusting ``ca``."""

    def __init__(self, bootstrap: str, ca: Path, timeout: float = 10.0,
                 source: str | None = None) -> None:
        super().__init__(bootstrap, timeout=timeout, source=source)
        ctx = ssl.create_default_context(cafile=str(ca))
        self.sock = ctx.wrap_socket(self.sock, server_hostname=bootstrap.rpartition(":")[0])


def frame(req: Any, version: int, corr: int = 7) -> bytes:
    req.with_header(correlation_id=corr, client_id="sasl-test")
    return bytes(req.encode(version=version, header=True, framed=True))


def call(w: Wire, req: Any, version: int, key: int, corr: int = 1) -> Any:
    return w.call(frame(req, version, corr), key, version)


def handshake(w: Wire, mech: str, version: int = 1) -> Any:
    return call(w, SaslHandshakeRequest(version=version, mechanism=mech), version, 17)


def authenticate(w: Wire, token: bytes, version: int = 2) -> Any:
    return call(w, SaslAuthenticateRequest(version=version, auth_bytes=token), version, 36)


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


def login(w: Wire, mech: str, user: str = "alice", password: str = PASSWORD) -> Any:
    """SaslHandshake and SaslAuthenticate (v2) on ``w``: the last SaslAuthenticate answer."""
    assert handshake(w, mech).error_code == 0
    if mech == "PLAIN":
        return authenticate(w, b"\0" + user.encode() + b"\0" + password.encode())
    c = Scram(mech, user, password)
    first = authenticate(w, c.first())
    assert first.error_code == 0, first
    return authenticate(w, c.final(first.auth_bytes))


# ---------------------------------------------------------------------- metrics
def metrics(d: str) -> dict:
    return json.loads(run_rivven(d, "metrics", "--json", check=True).stdout)


def metric(d: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (``rivven metrics``)."""
    return sum(s["value"] for s in metrics(d).get(name, {}).get("samples", [])
               if all(s["labels"].get(k) == v for k, v in labels.items()))


def auths(d: str, mechanism: str, result: str) -> float:
    return sum(s["value"] for s in metrics(d).get("rivven_kafka_authentications_total", {})
               .get("samples", []) if s["labels"] == {"mechanism": mechanism, "result": result})
