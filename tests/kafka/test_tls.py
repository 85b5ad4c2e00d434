"""Listeners and TLS of ``rivven serve``: every client (confluent-kafka, kafka-python, kcat,
Kafka's Java client) over SSL and mutual TLS produces and consumes; an untrusted server
certificate, an untrusted client certificate and a missing required one are refused with
the error each client gives against Kafka; a client certificate's subject becomes the
principal through Kafka's ``ssl.principal.mapping.rules`` (the mapper rule for rule, the
subject as Java writes it, and once end to end); several listeners answer Metadata with
their own advertised address; bad settings stop the start with one line; TLS garbage, a
silent client and a flood of handshakes are cut off while others are served; SIGHUP
reloads a renewed certificate. Certificates are made here (tests/helpers/certs.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_rivven
from helpers.certs import Pki
from helpers.kafka import Served, start_server
from helpers.kafka_clients import (
    Rec,
    confluent_consume,
    confluent_produce,
    held,
    java,
    java_consume,
    java_produce,
    kafka_python_consume,
    kafka_python_produce,
    kcat_consume,
    kcat_produce,
)
from helpers.kafka_wire import tls_hello
from helpers.kafka_wire import wait_for as _wait_for

from engine.errors import InvalidConfig
from engine.kafka.listeners import parse, protocol_map, resolve
from engine.kafka.tls import PrincipalMapper, dn_of_name, subject_dn

CLIENTS = ("confluent", "kafka-python", "kcat", "java")
RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT"


# ------------------------------------------------------------------ the mapping rules
@pytest.mark.parametrize("rules, expect", [
    # Kafka's SslPrincipalMapperTest.testRulesSplitting, case for case
    ("", "[]"), ("DEFAULT", "[DEFAULT]"), ("RULE://", "[RULE:/]"), ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"), ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
     "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"), (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
    ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
     "/DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
     "/DEFAULT, DEFAULT]"),
])
def test_mapping_rules_split_as_kafka_splits_them(rules, expect):
    assert str(PrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expect})"


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "RULE:^CN=((.*$/$1/"])
def test_invalid_mapping_rules_are_refused_naming_the_rule(rules):
    with pytest.raises(InvalidConfig, match="ssl.principal.mapping.rules"):
        PrincipalMapper(rules)


def test_mapping_rules_give_kafkas_names():
    m = PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U", "DEFAULT"]))
    assert m.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert m.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert m.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert m.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert m.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    comma = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert comma.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    # a back reference past the groups is literal ($3 of two groups), $12 is $1 then "2"
    assert PrincipalMapper("RULE:^CN=(\\w+),O=(\\w+)$/$3-$12/").name("CN=a,O=b") == "$3-a2"
    with pytest.raises(ValueError, match="no ssl.principal.mapping.rules rule applies"):
        PrincipalMapper("RULE:^CN=x$/y/").name("CN=alice")


def test_a_subject_is_written_as_javas_x500principal_writes_it(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    def dn(*rdns: list[tuple]) -> str:
        return dn_of_name(x509.Name([x509.RelativeDistinguishedName(
            [x509.NameAttribute(oid, v) for oid, v in rdn]) for rdn in rdns]).public_bytes())

    assert dn([(NameOID.COUNTRY_NAME, "US")], [(NameOID.ORGANIZATION_NAME, "acme")],
              [(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng")],
              [(NameOID.COMMON_NAME, "alice")]) == "CN=alice,OU=eng,O=acme,C=US"
    # RFC 2253's escapes, as Java's (which escapes = and # anywhere, and edge spaces)
    assert dn([(NameOID.COMMON_NAME, ' a,b+c"d\\e<f>g;h=i#j ')]) == \
        'CN=\\ a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h\\=i\\#j\\ '
    # a multi-valued RDN; a type without an RFC 2253 keyword as OID=#hex of its DER value
    assert dn([(NameOID.DOMAIN_COMPONENT, "com")], [(NameOID.DOMAIN_COMPONENT, "acme")],
              [(NameOID.COMMON_NAME, "bob"), (NameOID.USER_ID, "b1")],
              [(NameOID.EMAIL_ADDRESS, "b@x.io")]) == \
        "1.2.840.113549.1.9.1=#16066240782e696f,CN=bob+UID=b1,DC=acme,DC=com"
    assert dn([(NameOID.COMMON_NAME, "Łukasz")]) == "CN=Łukasz"
    pki = Pki(tmp_path)
    from cryptography.hazmat.primitives import serialization
    cert = pki.client("CN=alice,OU=eng,O=acme").certificate
    assert subject_dn(cert.public_bytes(serialization.Encoding.DER)) == "CN=alice,OU=eng,O=acme"


# ------------------------------------------------------------------ listeners' settings
class _Cfg:
    listeners = ""
    advertised_listeners = ""
    listener_security_protocol_map = "PLAINTEXT:PLAINTEXT,SSL:SSL"


def test_listeners_parse_as_kafkas():
    got = parse("SASL_SSL://127.0.0.1:0, PLAINTEXT://:9092,INTERNAL://[::1]:9093",
                "internal:SSL")
    assert [(x.name, x.protocol, x.host, x.port) for x in got] == [
        ("SASL_SSL", "SASL_SSL", "127.0.0.1", 0), ("PLAINTEXT", "PLAINTEXT", "", 9092),
        ("INTERNAL", "SSL", "::1", 9093)]
    assert protocol_map("A:ssl, b:SASL_PLAINTEXT") == {"A": "SSL", "B": "SASL_PLAINTEXT"}
    for bad, what in [("INTERNAL://127.0.0.1:1", "no security protocol"),
                      ("SSL://127.0.0.1:1,SSL://127.0.0.1:2", "given twice"),
                      ("SSL://127.0.0.1", "NAME://HOST:PORT"),
                      ("SSL://127.0.0.1:70000", "NAME://HOST:PORT")]:
        with pytest.raises(InvalidConfig, match=what):
            parse(bad, "")
    cfg = _Cfg()
    cfg.advertised_listeners = "SSL://kafka.example:9093"
    a, b = resolve(None, None, ["PLAINTEXT://127.0.0.1:0", "SSL://0.0.0.0:0"], cfg)
    assert a.advertised is None and b.advertised == ("kafka.example", 9093)
    with pytest.raises(InvalidConfig, match="--advertised-listener takes one address"):
        resolve(None, ("h", 1), ["PLAINTEXT://127.0.0.1:0", "SSL://0.0.0.0:0"], _Cfg())
    with pytest.raises(InvalidConfig, match="--listen and --listener"):
        resolve(("127.0.0.1", 0), None, ["SSL://127.0.0.1:0"], _Cfg())
    cfg.advertised_listeners = "OTHER://h:1"
    with pytest.raises(InvalidConfig, match="OTHER, which is not a listener"):
        resolve(None, None, ["SSL://127.0.0.1:0"], cfg)
    [only] = resolve(("10.0.0.1", 9092), ("h", 1), [], _Cfg())
    assert (only.name, only.protocol, only.host, only.advertised) == \
        ("PLAINTEXT", "PLAINTEXT", "10.0.0.1", ("h", 1))


# ------------------------------------------------------------------ real servers
@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def _tls_settings(pki: Pki, *extra: str) -> tuple[str, ...]:
    return ("group.initial.rebalance.delay.ms=0", f"ssl.keystore.location={pki.server.pem}",
            f"ssl.truststore.location={pki.ca.cert}", "ssl.client.auth=requested",
            f"ssl.principal.mapping.rules={RULES}", "listener.security.protocol.map=MTLS:SSL",
            "listener.name.mtls.ssl.client.auth=required", *extra)


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki) -> Iterator[Served]:
    """PLAINTEXT, SSL (a client certificate requested; advertised as localhost) and MTLS
    (an SSL listener that requires one) on one data dir."""
    d = str(tmp_path_factory.mktemp("tls") / "data")
    for client in CLIENTS:
        for mode in ("ssl", "mtls"):
            run_rivven(d, "topic", "create", f"{client}-{mode}", "--partitions", "2",
                       check=True)
    s = start_server(d, settings=_tls_settings(pki, "advertised.listeners=SSL://localhost:0"),
                     listeners=("PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0",
                                "MTLS://127.0.0.1:0"))
    try:
        yield s
    finally:
        s.kill()


def _conf(client: str, ca: Path, cert=None) -> dict:
    """The client's TLS settings: the CA it trusts, and its certificate when given."""
    if client in ("confluent", "kcat"):
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
        if cert is not None:
            conf.update({"ssl.certificate.location": str(cert.cert),
                         "ssl.key.location": str(cert.key)})
    elif client == "kafka-python":
        conf = {"security_protocol": "SSL", "ssl_cafile": str(ca)}
        if cert is not None:
            conf.update({"ssl_certfile": str(cert.cert), "ssl_keyfile": str(cert.key)})
    else:  # Kafka's Java client reads PEM stores (the key and the chain in one file)
        conf = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(ca)}
        if cert is not None:
            conf.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert.pem)})
    return conf


def _kcat_args(conf: dict) -> list[str]:
    return [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]


@pytest.mark.parametrize("mode", ["ssl", "mtls"])
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_over_tls(server, pki, client, mode):
    topic = f"{client}-{mode}"
    cert = pki.client(f"CN={client},OU=eng,O=acme") if mode == "mtls" else None
    bootstrap = server.listeners["MTLS" if mode == "mtls" else "SSL"]
    conf = _conf(client, pki.ca.cert, cert)
    if client == "kcat":
        sent = [Rec(1, f"k{i}".encode(), f"tls ✓ {i}".encode(), (("by", b"kcat"),))
                for i in range(20)]
        kcat_produce(bootstrap, topic, sent, "none", *_kcat_args(conf))
        got = kcat_consume(bootstrap, topic, *_kcat_args(conf))
    else:
        sent = [Rec(i % 2, f"k{i}".encode(), f"tls ✓ {i}".encode() * (1 + i % 5),
                    (("i", str(i).encode()),), 1_700_000_000_000 + i) for i in range(40)]
        if client == "confluent":
            confluent_produce(bootstrap, topic, sent, "lz4", **conf)
            got = confluent_consume(bootstrap, topic, **conf)
        elif client == "kafka-python":
            kafka_python_produce(bootstrap, topic, sent, "gzip", **conf)
            got = kafka_python_consume(bootstrap, topic, **conf)
        else:
            java_produce(bootstrap, topic, sent, "zstd", **conf)
            got = java_consume(bootstrap, topic, **conf)
            # DescribeCluster: the advertised address of the listener it came to
            [cluster] = java("admin", bootstrap, "-", props=conf, input=b"describe-cluster\n")
            [node] = cluster["nodes"]
            port = int(bootstrap.rsplit(":", 1)[1])
            assert (node["host"], node["port"]) == \
                ("127.0.0.1" if mode == "mtls" else "localhost", port)
    engine = held(server.data_dir, topic)
    assert len(engine) == len(sent)
    assert sorted((r.key, r.value) for r in engine) == sorted((r.key, r.value) for r in sent)
    assert [(r.partition, r.offset, r.key, r.value) for r in got] == \
        [(r.partition, r.offset, r.key, r.value) for r in engine]


def _refused(client: str, bootstrap: str, conf: dict) -> str:
    """What ``client`` says when it cannot get the cluster's metadata over ``bootstrap``."""
    if client == "confluent":
        from confluent_kafka.admin import AdminClient

        errors: list = []
        a = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append,
                         "logger": _Quiet(errors), **conf})
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            a.poll(0.1)
        return " ".join(str(e) for e in errors)
    if client == "kafka-python":
        from kafka import KafkaConsumer

        try:
            KafkaConsumer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000, **conf).close()
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return "connected"
    if client == "kcat":
        r = subprocess.run(["kcat", "-L", "-b", bootstrap, "-m", "2", *_kcat_args(conf)],
                           capture_output=True, timeout=60)
        return f"exit {r.returncode}: {r.stderr.decode(errors='replace')}"
    out = java("admin", bootstrap, "-", props=conf, input=b"describe-cluster\n", check=False,
               timeout=120)
    return json.dumps(out)


class _Quiet:
    """librdkafka's log lines kept (its FAIL lines carry the TLS alert), not printed."""

    def __init__(self, into: list) -> None:
        self.into = into

    def log(self, level: int, msg: str, *args: object, **kw: object) -> None:
        if "FAIL" in msg or (args and "FAIL" in str(args[0])):
            self.into.append(msg % args if args else msg)


# what each client says against Kafka too: librdkafka (confluent-kafka and kcat) names the
# TLS failure or the server's alert; Kafka's Java client throws SslAuthenticationException;
# kafka-python finds no broker it can bootstrap from
EXPECT = {
    "untrusted-server": {"confluent": "certificate verify failed",
                         "kcat": "certificate verify failed"},
    "untrusted-client": {"confluent": "alert unknown ca", "kcat": "alert unknown ca"},
    "no-client-cert": {"confluent": "alert certificate required",
                       "kcat": "alert certificate required"},
}


@pytest.mark.parametrize("case", list(EXPECT))
@pytest.mark.parametrize("client", CLIENTS)
def test_an_untrusted_or_missing_certificate_is_refused_with_the_clients_error(
        server, pki, client, case):
    other = pki.untrusted()
    if case == "untrusted-server":  # the client trusts another CA than the server's
        bootstrap, conf = server.listeners["SSL"], _conf(client, other.ca.cert)
    elif case == "untrusted-client":  # a certificate of a CA the server does not trust
        bootstrap = server.listeners["MTLS"]
        conf = _conf(client, pki.ca.cert, other.client("CN=mallory,OU=eng,O=acme"))
    else:  # no certificate on a listener that requires one
        bootstrap, conf = server.listeners["MTLS"], _conf(client, pki.ca.cert)
    said = _refused(client, bootstrap, conf)
    if client == "java":
        assert "SslAuthenticationException" in said, said
    elif client == "kafka-python":
        assert "Unable to bootstrap" in said, said
    else:
        assert EXPECT[case][client] in said.lower(), said
        if client == "kcat":  # (kcat's librdkafka 2.0.2 sometimes crashes as it exits after
            # the refusal, SIGSEGV: the refusal and its reason are what is checked)
            assert said.startswith(("exit 1", "exit -11")), said


def _metric(d: str, name: str, **labels: str) -> float:
    doc = json.loads(run_rivven(d, "metrics", "--json", check=True).stdout)
    return sum(s["value"] for s in doc.get(name, {}).get("samples", [])
               if all(s["labels"].get(k) == v for k, v in labels.items()))


def _closed(sock: socket.socket) -> bool:
    """The server closed it (a FIN, or a reset), after what it sent (a TLS alert)."""
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _tls_client(address: str, ca: Path, cert=None) -> ssl.SSLSocket:
    host, port = address.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    s = socket.create_connection((host, int(port)), timeout=10)
    return ctx.wrap_socket(s, server_hostname=host)


def _metadata_broker(bootstrap: str, **conf) -> tuple[str, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=20)
    [b] = md.brokers.values()
    return b.host, b.port


def test_the_principal_is_the_mapped_subject_and_failures_are_counted(server, pki):
    """End to end: alice's subject through the rules (User:alice), bob's (no rule but
    DEFAULT) as it is; the server counts certificates accepted and handshakes refused."""
    d = server.data_dir
    before_ok = _metric(d, "rivven_kafka_authentications_total", mechanism="TLS",
                        result="success")
    alice = pki.client("CN=Alice,OU=eng,O=acme")
    bob = pki.client("CN=bob,OU=ops,O=acme")
    for who in (alice, bob):
        conf = _conf("confluent", pki.ca.cert, who)
        assert _metadata_broker(server.listeners["MTLS"], **conf)[1] > 0
    lines = _wait_for(lambda: [x for x in server.log().splitlines()
                               if "TLS client certificate from" in x])
    assert any(x.endswith("on listener MTLS: User:alice") for x in lines), lines
    assert any(x.endswith("on listener MTLS: User:CN=bob,OU=ops,O=acme") for x in lines), lines
    assert _wait_for(lambda: _metric(d, "rivven_kafka_authentications_total", mechanism="TLS",
                                     result="success") >= before_ok + 2)
    # a refused handshake: counted, and logged with the client's address and the reason
    before = _metric(d, "rivven_kafka_authentications_total", mechanism="TLS",
                     result="failure")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        c = _tls_client(server.listeners["MTLS"], pki.ca.cert)
        c.recv(1)  # (TLS 1.3: the server's refusal comes after the client's finish)
    assert _wait_for(lambda: _metric(d, "rivven_kafka_authentications_total", mechanism="TLS",
                                     result="failure") >= before + 1)
    assert "on listener MTLS: TLS handshake failed: PEER_DID_NOT_RETURN_A_CERTIFICATE" in \
        server.log()


def test_each_listener_answers_its_own_advertised_address(server, pki):
    plain = server.listeners["PLAINTEXT"]
    tls = server.listeners["SSL"]
    assert plain != tls and plain == server.bootstrap
    assert _metadata_broker(plain) == ("127.0.0.1", int(plain.rsplit(":", 1)[1]))
    # (advertised.listeners=SSL://localhost:0: this host, the port it is bound to)
    assert _metadata_broker(tls, **_conf("confluent", pki.ca.cert)) == \
        ("localhost", int(tls.rsplit(":", 1)[1]))
    # FindCoordinator too: a group consumer of each listener commits through its own
    from confluent_kafka import Consumer, TopicPartition

    for address, conf in ((plain, {}), (tls, _conf("confluent", pki.ca.cert))):
        c = Consumer({"bootstrap.servers": address, "group.id": "g-" + address[-5:],
                      "enable.auto.commit": False, **conf})
        try:
            c.commit(offsets=[TopicPartition("confluent-ssl", 0, 0)], asynchronous=False)
        finally:
            c.close()


def test_plaintext_and_tls_clients_share_the_server_while_tls_garbage_is_cut_off(server, pki):
    """Garbage on the TLS listener and a client that says nothing: their connections end;
    a TLS client is served meanwhile."""
    host, port = server.listeners["SSL"].rsplit(":", 1)
    junk = socket.create_connection((host, int(port)), timeout=10)
    junk.sendall(b"\x00\x00\x00\x10GET / HTTP/1.1\r\n\r\n" * 4)
    t0 = time.monotonic()
    assert _closed(junk)  # (no answer to garbage: closed a moment later)
    assert time.monotonic() - t0 < 5
    junk.close()
    silent = socket.create_connection((host, int(port)), timeout=10)
    c = _tls_client(server.listeners["SSL"], pki.ca.cert)
    assert c.version() in ("TLSv1.3", "TLSv1.2")
    assert c.version() == "TLSv1.3"  # (preferred when the client has it)
    c.close()
    assert _metadata_broker(server.listeners["SSL"], **_conf("confluent", pki.ca.cert))
    silent.close()


def test_a_flood_of_bad_handshakes_does_not_hold_up_a_good_client(server, pki):
    """Sixty connections at once on the TLS listener — garbage, half a hello, nothing at
    all — while a client connects, asks Metadata and gets its answer quickly; the garbage
    is cut off within a second."""
    host, port = server.listeners["SSL"].rsplit(":", 1)
    hello = tls_hello()
    bad = []
    for i in range(60):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall([b"\x16\x03\x01\xff\xff" + os.urandom(200), hello[:len(hello) // 2],
                   b""][i % 3])
        bad.append(s)
    t0 = time.monotonic()
    assert _metadata_broker(server.listeners["SSL"], **_conf("confluent", pki.ca.cert))
    assert time.monotonic() - t0 < 5
    t0 = time.monotonic()
    assert all(_closed(s) for s in bad[::3])  # (the garbage: refused with an alert)
    assert time.monotonic() - t0 < 3
    for s in bad:
        s.close()


# ------------------------------------------------------------------ the start's checks
def _serve(d: str, *args: str) -> subprocess.CompletedProcess:
    return run_rivven(d, "serve", *args, "--status-interval", "60")


@pytest.mark.parametrize("args, code, expect", [
    (["--listener", "INTERNAL://127.0.0.1:0"], 2, "listener INTERNAL has no security "
                                                  "protocol"),
    (["--listener", "SSL://127.0.0.1:0"], 2, "listener SSL uses TLS but has no certificate"),
    (["--listener", "SSL://127.0.0.1:0", "--set", "ssl.keystore.location=/nonexistent.pem"], 2,
     "ssl.keystore.location=/nonexistent.pem (listener SSL): cannot read it"),
    (["--listener", "PLAINTEXT://0.0.0.0:0"], 2, "add --insecure"),
    (["--listen", "127.0.0.1:0", "--listener", "SSL://127.0.0.1:0"], 2,
     "--listen and --listener"),
])
def test_bad_listener_settings_stop_the_start_with_one_line(tmp_path, args, code, expect):
    r = _serve(str(tmp_path / "d"), *args)
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert expect in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_bad_certificate_files_name_the_setting_and_the_file(tmp_path, pki):
    d = str(tmp_path / "d")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    enc = pki.server.encrypted_pem("s3cret")
    other = pki.issue("CN=other")
    for extra, expect in [
        ([f"ssl.keystore.location={junk}"], f"ssl.keystore.location={junk} (listener SSL): "
                                            "not a PEM certificate chain and private key"),
        ([f"ssl.keystore.location={enc}"], "the private key is encrypted: set ssl.key.password"),
        ([f"ssl.keystore.location={enc}", "ssl.key.password=wrong"],
         "ssl.key.password is wrong or missing"),
        ([f"ssl.certificate.location={pki.server.cert}", f"ssl.key.location={other.key}"],
         "the private key does not match the certificate"),
        ([f"ssl.keystore.location={pki.server.pem}", f"ssl.truststore.location={junk}"],
         f"ssl.truststore.location={junk} (listener SSL): no PEM CA certificate"),
        ([f"ssl.keystore.location={pki.server.pem}", "ssl.client.auth=required"],
         "needs ssl.truststore.location"),
        ([f"ssl.keystore.location={pki.server.pem}", "ssl.enabled.protocols=TLSv1.1"],
         "give TLSv1.2 and/or TLSv1.3"),
        ([f"ssl.keystore.location={pki.server.pem}", "ssl.cipher.suites=NOPE"],
         "no cipher suite OpenSSL knows"),
        ([f"ssl.keystore.location={pki.server.pem}", "ssl.principal.mapping.rules=default"],
         "invalid rule 'default'"),
        ([f"ssl.keystore.location={pki.server.pem}",
          "listener.name.ssl.ssl.handshake.timeout.ms=soon"],
         "ssl.handshake.timeout.ms='soon' (listener SSL): give a whole number"),
        # a listener's own setting wins over the server's
        ([f"ssl.keystore.location={pki.server.pem}",
          "listener.name.ssl.ssl.keystore.location=/missing/ssl.pem"],
         "ssl.keystore.location=/missing/ssl.pem (listener SSL): cannot read it"),
    ]:
        sets = [a for x in extra for a in ("--set", x)]
        r = _serve(d, "--listener", "SSL://127.0.0.1:0", *sets)
        err = r.stderr.decode()
        assert r.returncode == 2 and expect in err, (extra, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "s3cret" not in err and "wrong" not in err.replace("is wrong", "")


def test_an_encrypted_key_a_tls_listener_on_any_address_and_sighup_reloading(tmp_path, pki):
    """An encrypted key with its password serves; an SSL or SASL_PLAINTEXT listener on
    0.0.0.0 needs no --insecure (SCRAM sends no password; PLAIN there is the SASL part's to
    refuse); SIGHUP reads the certificate files again (new connections get the renewed
    certificate; one that no longer loads keeps the old, with a log line)."""
    d = str(tmp_path / "d")
    live = tmp_path / "live.pem"
    enc = pki.server.encrypted_pem("s3cret")
    live.write_bytes(enc.read_bytes())
    s = start_server(d, settings=("ssl.key.password=s3cret",
                                  f"ssl.keystore.location={live}"),
                     listeners=("SSL://0.0.0.0:0", "SASL_PLAINTEXT://0.0.0.0:0"))
    try:
        address = "127.0.0.1:" + s.listeners["SSL"].rsplit(":", 1)[1]

        def serial() -> int:
            with _tls_client(address, pki.ca.cert) as c:
                der = c.getpeercert(binary_form=True)
            from cryptography import x509

            return x509.load_der_x509_certificate(der).serial_number

        assert serial() == pki.server.certificate.serial_number
        renewed = pki.issue("CN=localhost,O=rivven", server=True, stem="renewed")
        live.write_bytes(renewed.encrypted_pem("s3cret").read_bytes())
        s.proc.send_signal(signal.SIGHUP)
        assert _wait_for(lambda: "listener SSL reloaded its certificate files" in s.log())
        assert serial() == renewed.certificate.serial_number
        live.write_text("broken\n")
        s.proc.send_signal(signal.SIGHUP)
        assert _wait_for(lambda: "listener SSL keeps its certificates" in s.log())
        assert serial() == renewed.certificate.serial_number
        assert s.proc.poll() is None
    finally:
        assert s.stop() == 0
    assert "s3cret" not in s.log()


def test_connection_limits_apply_before_the_handshake_and_a_silent_one_times_out(tmp_path,
                                                                                 pki):
    """max.connections.per.ip counts connections still in their handshake: the third from
    one address is refused at once; a handshake not done in ssl.handshake.timeout.ms is cut
    off and counted; then a client gets in."""
    d = str(tmp_path / "d")
    s = start_server(d, settings=(f"ssl.keystore.location={pki.server.pem}",
                                  "max.connections.per.ip=2",
                                  "listener.name.ssl.ssl.handshake.timeout.ms=1000"),
                     listeners=("SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"))
    try:
        host, port = s.listeners["SSL"].rsplit(":", 1)
        silent = [socket.create_connection((host, int(port)), timeout=10) for _ in range(2)]
        time.sleep(0.3)
        third = socket.create_connection((host, int(port)), timeout=10)
        t0 = time.monotonic()
        assert _closed(third)  # (refused: closed before any handshake)
        assert time.monotonic() - t0 < 0.9
        for x in silent:
            assert _closed(x)  # (cut off after 1 s)
        assert time.monotonic() - t0 < 5
        assert _wait_for(lambda: "no TLS handshake in ssl.handshake.timeout.ms=1000" in s.log())
        assert "max.connections.per.ip=2 reached" in s.log()
        for name in ("SSL", "SASL_SSL"):  # (SASL_SSL: TLS first, then SASL)
            with _tls_client(s.listeners[name], pki.ca.cert) as c:
                assert c.version() == "TLSv1.3"
        assert _wait_for(lambda: _metric(d, "rivven_kafka_authentications_total",
                                         mechanism="TLS", result="failure") >= 2)
    finally:
        assert s.stop() == 0
