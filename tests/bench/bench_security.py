#!/usr/bin/env python3
"""What TLS and SASL cost on ``rivven serve``: ``make bench-security`` prints one table
(docs/BENCHMARKS.md, "TLS and SASL on rivven serve").

One ``rivven serve`` on a fresh data dir (durable as in bench_kafka: ``wal.sync=always``)
with three listeners: PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256, user made with
``Engine.users.add``; the server's certificate from a CA made here, tests/helpers/certs.py).
The same client and load as bench_kafka: confluent-kafka (librdkafka), 10-byte keys, 100-byte
values, ``linger.ms=5``, ``acks=all``, a topic of one partition and one of eight. The
listeners take turns, round after round (a noisy machine slows all alike); figures are
medians over the rounds, ratios against PLAINTEXT (goal: SASL_SSL >= 0.7x).

  produce         records/s from the first ``produce()`` to the end of ``flush()``
  server CPU      the server process's CPU time (user + system, /proc) over the produce or
                  the consume, per record: what TLS and SASL cost the server, less noisy than
                  the rates on a shared machine; and the client's (this process's, with
                  librdkafka's threads: getrusage), which shares the 2 cores with the server
  consume         records/s of a consumer reading the round's topic from offset 0 to its end
                  (without librdkafka's fetch backoff, as bench_kafka's second consumer:
                  fetch.queue.backoff.ms=0, queued.min.messages=1000000)
  connect         ms for a fresh client to be ready: confluent-kafka's AdminClient made and
                  its ``list_topics()`` answered (librdkafka's own start included); and by
                  hand (one socket, TLS, ApiVersions, SaslHandshake, SaslAuthenticate x2 with
                  kafka-python's ScramClient, Metadata), the client's PBKDF2 included:
                  PLAINTEXT, SSL, SASL_SSL with SCRAM-SHA-256 and -512 at 4096 iterations
                  (Kafka's default and rivven's) and at 16384. Median of ``--connects``.

Usage: python tests/bench/bench_security.py [--records 300000] [--rounds 3] [--connects 30]
       [--only produce,consume,connect] [--protocols PLAINTEXT,SSL,SASL_SSL]
       [--set NAME=VALUE] [--profile FILE] [--json]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _p in (str(HERE), str(ROOT), str(ROOT / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_kafka  # noqa: E402
from bench_kafka import NO_BACKOFF, PARTITIONS, machine, make_records  # noqa: E402
from helpers.certs import Pki  # noqa: E402

from engine import Engine  # noqa: E402

READY = re.compile(r"on (\S+):(\d+) \(Kafka protocol")
LISTENER = re.compile(r"^listener (\S+) \((\w+)\) on \w+://(\S+):(\d+)", re.M)
USER, PASSWORD = "bench", "bench-password-1"
USER_16K = "bench16k"  # (the same password, 16384 iterations)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
# the connection setup cases: (label, listener, user, mechanism)
CONNECTS = (("PLAINTEXT", "PLAINTEXT", None, None),
            ("SSL", "SSL", None, None),
            ("SASL_SSL SCRAM-SHA-256 4096", "SASL_SSL", USER, "SCRAM-SHA-256"),
            ("SASL_SSL SCRAM-SHA-512 4096", "SASL_SSL", USER, "SCRAM-SHA-512"),
            ("SASL_SSL SCRAM-SHA-256 16384", "SASL_SSL", USER_16K, "SCRAM-SHA-256"),
            ("SASL_SSL SCRAM-SHA-512 16384", "SASL_SSL", USER_16K, "SCRAM-SHA-512"))


# ---------------------------------------------------------------- the server
class Server:
    """``rivven serve`` with a PLAINTEXT, an SSL and a SASL_SSL listener on free ports."""

    def __init__(self, work: Path, extra: tuple[str, ...] = (), profile: str | None = None
                 ) -> None:
        self.pki = Pki(work / "pki")
        self.data_dir = str(work / "data")
        with Engine.open(self.data_dir) as eng:
            eng.users.add(USER, PASSWORD)  # (both SCRAM mechanisms, 4096 iterations)
            eng.users.add(USER_16K, PASSWORD, iterations=16384)
        self.log = work / "serve.log"
        sets = ["group.initial.rebalance.delay.ms=0", f"ssl.keystore.location={self.pki.server.pem}",
                "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512", *extra]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(
                [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else []),
                 "-m", "rivven_cli.main", "--data-dir", self.data_dir, "serve",
                 *[a for p in PROTOCOLS for a in ("--listener", f"{p}://127.0.0.1:0")],
                 *[a for s in sets for a in ("--set", s)]],
                stdout=f, stderr=f, env=env, cwd=ROOT)
        deadline = time.monotonic() + 60
        while True:
            text = self.log.read_text(errors="replace")
            if READY.search(text):
                self.listeners = {m.group(1): f"{m.group(3).strip('[]')}:{m.group(4)}"
                                  for m in LISTENER.finditer(text)}
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"rivven serve did not start: {text}")
            time.sleep(0.05)
        missing = [p for p in PROTOCOLS if p not in self.listeners]
        if missing:
            self.stop()
            raise SystemExit(f"rivven serve has no listener {missing}: {text}")

    def conf(self, protocol: str, user: str | None = USER, mech: str = "SCRAM-SHA-256"
             ) -> dict[str, Any]:
        """confluent-kafka's settings for ``protocol``'s listener."""
        c: dict[str, Any] = {"bootstrap.servers": self.listeners[protocol]}
        if protocol != "PLAINTEXT":
            c.update({"security.protocol": protocol, "ssl.ca.location": str(self.pki.ca.cert)})
        if protocol.startswith("SASL"):
            c.update({"sasl.mechanism": mech, "sasl.username": user, "sasl.password": PASSWORD})
        return c

    def create_topic(self, topic: str, partitions: int) -> None:
        with Engine.open(self.data_dir) as eng:  # (another process beside the server)
            eng.create_topic(topic, partitions)

    def cpu_s(self) -> float:
        """The server process's CPU seconds so far (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------- throughput
def own_cpu_s() -> float:
    """This process's CPU seconds so far: the client's (librdkafka's threads included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce(conf: dict[str, Any], topic: str, keys: list[bytes], values: list[bytes]) -> float:
    """bench_kafka's produce over the listener ``conf`` names (its security settings)."""
    rest = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    return bench_kafka.produce(conf["bootstrap.servers"], topic, keys, values, **rest)


def consume(conf: dict[str, Any], topic: str, partitions: int, n: int) -> float:
    """records/s of a confluent-kafka consumer reading ``n`` records from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": False, **NO_BACKOFF})
    c.list_topics(topic, 10)
    got = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
            else:
                raise SystemExit(f"consume from {conf['bootstrap.servers']}: {m.error()}")
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise SystemExit(f"consume from {conf['bootstrap.servers']}: {got} of {n} records")
    return n / dt


# ---------------------------------------------------------------- connection setup
def connect_admin(conf: dict[str, Any]) -> float:
    """ms for a fresh AdminClient to answer ``list_topics()`` (its threads' start included)."""
    from confluent_kafka.admin import AdminClient

    t0 = time.perf_counter()
    a = AdminClient(conf)
    md = a.list_topics(timeout=10)
    dt = (time.perf_counter() - t0) * 1000
    if not md.brokers:
        raise SystemExit(f"no brokers in the metadata from {conf['bootstrap.servers']}")
    return dt


def connect_wire(address: str, tls: ssl.SSLContext | None, user: str | None,
                 mech: str | None) -> float:
    """ms for one socket to be connected, TLS'd, authenticated and answered a Metadata,
    by hand (what a Kafka client does before its first real request)."""
    from helpers.kafka_wire import Wire, api_versions, metadata
    from kafka.net.sasl.scram import ScramClient
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    def call(w: Wire, req: Any, version: int, key: int) -> Any:
        req.with_header(correlation_id=2, client_id="bench")
        return w.call(bytes(req.encode(version=version, header=True, framed=True)), key, version)

    t0 = time.perf_counter()
    w = Wire(address)
    try:
        if tls is not None:
            w.sock = tls.wrap_socket(w.sock, server_hostname="localhost")
        w.call(api_versions(3), 18, 3)
        if mech is not None and user is not None:
            if call(w, SaslHandshakeRequest(version=1, mechanism=mech), 1, 17).error_code:
                raise SystemExit(f"SaslHandshake {mech} refused")
            c = ScramClient(user, PASSWORD, mech)
            r = call(w, SaslAuthenticateRequest(version=2, auth_bytes=c.first_message()), 2, 36)
            c.process_server_first_message(r.auth_bytes)
            r = call(w, SaslAuthenticateRequest(version=2, auth_bytes=c.final_message()), 2, 36)
            if r.error_code:
                raise SystemExit(f"SASL {mech} refused: {r.error_message}")
            c.process_server_final_message(r.auth_bytes)
        md = w.call(metadata(None, 9), 3, 9)
        dt = (time.perf_counter() - t0) * 1000
    finally:
        w.close()
    if not md.brokers:
        raise SystemExit(f"no brokers in the metadata from {address}")
    return dt


# ---------------------------------------------------------------- the run
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connects", type=int, default=30, help="connections per setup case")
    ap.add_argument("--only", default="produce,consume,connect")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the server (rivven serve --set)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS),
                    help="the listeners the produce and consume go through")
    ap.add_argument("--profile", metavar="FILE",
                    help="run the server under cProfile, its stats written to FILE at the end")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    only = set(args.only.split(","))
    n = args.records
    keys, values = make_records(n)
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    res: dict[str, list[float]] = {}

    def add(name: str, v: float) -> None:
        res.setdefault(name, []).append(v)
        print(f"  {name}: {v:,.2f}", file=sys.stderr, flush=True)

    srv = None
    try:
        srv = Server(work, tuple(args.set), args.profile and os.path.abspath(args.profile))
        protocols = tuple(p for p in PROTOCOLS if p in args.protocols.split(","))
        tls = ssl.create_default_context(cafile=str(srv.pki.ca.cert))
        for r in range(args.rounds):
            k = r % len(protocols)
            order = protocols[k:] + protocols[:k]  # (each listener first in turn)
            print(f"round {r + 1} of {args.rounds}: {', '.join(order)}", file=sys.stderr,
                  flush=True)
            for parts in PARTITIONS:
                for proto in order:
                    topic = f"{proto}-p{parts}-r{r}"
                    srv.create_topic(topic, parts)
                    if "produce" in only or "consume" in only:
                        cpu, mine = srv.cpu_s(), own_cpu_s()
                        add(f"produce {parts} {proto}", produce(srv.conf(proto), topic, keys, values))
                        add(f"cpu-produce {parts} {proto}", (srv.cpu_s() - cpu) * 1e6 / n)
                        add(f"client-produce {parts} {proto}", (own_cpu_s() - mine) * 1e6 / n)
                    if "consume" in only:
                        cpu, mine = srv.cpu_s(), own_cpu_s()
                        add(f"consume {parts} {proto}", consume(srv.conf(proto), topic, parts, n))
                        add(f"cpu-consume {parts} {proto}", (srv.cpu_s() - cpu) * 1e6 / n)
                        add(f"client-consume {parts} {proto}", (own_cpu_s() - mine) * 1e6 / n)
            if "connect" in only:
                per_round = max(1, args.connects // args.rounds)
                for _ in range(per_round):
                    for label, proto, user, mech in CONNECTS:
                        add(f"admin {label}", connect_admin(srv.conf(proto, user, mech or "")))
                        add(f"wire {label}", connect_wire(
                            srv.listeners[proto], None if proto == "PLAINTEXT" else tls, user, mech))
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    if args.json:
        print(json.dumps({"machine": machine(), "records": n, "rounds": args.rounds,
                          "median": med, "all": res}, indent=1))
        return
    report(med, res, n, args.rounds)


def report(med: dict[str, float], res: dict[str, list[float]], n: int, rounds: int) -> None:
    m = machine()
    print(f"{n:,} records (10-byte key, 100-byte value), confluent-kafka {m['librdkafka']} "
          f"linger.ms=5 acks=all; median of {rounds} rounds, the listeners in turn; "
          f"{m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, Linux {m['kernel']}")
    print(f"{'':36}{'PLAINTEXT':>11}{'SSL':>11}{'SASL_SSL':>11}{'SSL/PT':>8}{'SASL_SSL/PT':>22}")

    def ratios(a: str, b: str) -> str:
        rs = [x / y for x, y in zip(res[a], res[b])]
        spread = f" ({min(rs):.2f}-{max(rs):.2f})" if len(rs) > 1 else ""
        return f"{med[a] / med[b]:.2f}x{spread}"

    for what, unit, fmt in (("produce", "rec/s", ",.0f"), ("consume", "rec/s", ",.0f"),
                            ("cpu-produce", "us/rec", ".2f"), ("cpu-consume", "us/rec", ".2f"),
                            ("client-produce", "us/rec", ".2f"),
                            ("client-consume", "us/rec", ".2f")):
        for parts in PARTITIONS:
            keys = [f"{what} {parts} {p}" for p in PROTOCOLS]
            if not all(k in med for k in keys):
                continue
            label = (what.replace("cpu-", "server CPU, ").replace("client-", "client CPU, ")
                     + f", {parts} p ({unit})")
            print(f"{label:36}" + "".join(f"{med[k]:>11{fmt}}" for k in keys)
                  + f"{med[keys[1]] / med[keys[0]]:>7.2f}x{ratios(keys[2], keys[0]):>22}")
    if any(k.startswith("admin ") for k in med):
        print(f"{'connection setup (median ms)':36}{'AdminClient':>14}{'ratio':>8}"
              f"{'by hand':>11}{'ratio':>8}")
        for label, *_ in CONNECTS:
            a, w = med[f"admin {label}"], med[f"wire {label}"]
            print(f"{label:36}{a:>14.2f}{a / med['admin PLAINTEXT']:>7.2f}x"
                  f"{w:>11.2f}{w / med['wire PLAINTEXT']:>7.2f}x")


if __name__ == "__main__":
    main()
