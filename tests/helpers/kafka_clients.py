"""The four Kafka clients the Kafka-protocol tests drive against a real ``rivven serve``:
confluent-kafka (librdkafka 2.16), kafka-python 3, kcat (Debian's, librdkafka 2.0.2) and Kafka's
Java client (kafka-clients 3.9.1, through tests/kafka/java/KafkaTool.java). kcat and the Java
jars come from ``make test-setup`` (scripts/ensure-kafka-clients.sh): a test that needs one
that is missing fails, naming that command; it is never skipped.

Each client produces ``Rec``s (explicit partition, key, value, headers, timestamp: None for
the client's choice) and reads a topic from the start to the end into ``Rec``s with their
offsets, so that what each wrote and read compares with the engine's own records."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from helpers import ROOT, run_rivven

JAVA_DIR = ROOT / "tests" / "kafka" / "java"
# KafkaTool and the slf4j binding that prints the client's log lines (-Dkafkatool.log=LEVEL;
# RIVVEN_KAFKATOOL_LOG=debug in the environment for more)
JAVA_SOURCES = (JAVA_DIR / "KafkaTool.java",
                JAVA_DIR / "org" / "slf4j" / "impl" / "StaticLoggerBinder.java")
JAVA_LIB = Path(os.environ.get("RIVVEN_KAFKA_JARS", ROOT / ".cache" / "kafka-java" / "lib"))
JARS = ("kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar")
SETUP = "run `make test-setup` (scripts/ensure-kafka-clients.sh installs it)"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class Rec(NamedTuple):
    """One record as a client sent or read it (offset -1: not known yet)."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    offset: int = -1


def held(data_dir: str, topic: str, isolation: str = "read_uncommitted") -> list[Rec]:
    """What the engine holds: every record of every partition (``Engine.read``)."""
    from engine import Engine

    with Engine.open(data_dir, read_only=True) as eng:
        parts = eng.topic(topic).partitions
        return [Rec(r.partition, r.key, r.value, tuple((k, v) for k, v in r.headers),
                    r.timestamp, r.offset)
                for p in range(parts) for r in eng.read(topic, p, 0, 1_000_000, isolation)]


def rivven_consume(data_dir: str, topic: str) -> list[Rec]:
    """What ``rivven consume --json`` prints (bytes in base64)."""
    out = run_rivven(data_dir, "consume", topic, "--json", "--key-encoding", "base64",
                     "--value-encoding", "base64", check=True).stdout.decode()
    recs = []
    for line in out.splitlines():
        j = json.loads(line)
        hs = j.get("headers") or []
        pairs = hs.items() if isinstance(hs, dict) else ((h["key"], h["value"]) if isinstance(h, dict)
                                                        else tuple(h) for h in hs)
        recs.append(Rec(j["partition"], _unb64(j["key"]), _unb64(j["value"]),
                        tuple((k, _unb64(v)) for k, v in pairs), j["timestamp"], j["offset"]))
    return sorted(recs, key=_order)


def _order(r: Rec) -> tuple[int, int]:
    return (r.partition or 0, r.offset)


def first_difference(got: list[Rec], want: list[Rec]) -> str:
    """Where a client's records first differ from the engine's, in one line."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"record #{i}: read {g}, the engine holds {w}"
    return f"{len(got)} records read, the engine holds {len(want)}"


def _b64(b: bytes | None) -> str:
    return "-" if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


# ----------------------------------------------------------------------- confluent-kafka
def confluent_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str,
                      **conf: Any) -> list[tuple[int, int]]:
    from confluent_kafka import Producer

    acks: list[Any] = [None] * len(recs)

    def done(i: int):
        def cb(err: Any, msg: Any) -> None:
            acks[i] = err if err is not None else (msg.partition(), msg.offset())
        return cb

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                  "acks": "all", "compression.type": codec, **conf})
    for i, r in enumerate(recs):
        kw: dict[str, Any] = {"key": r.key, "value": r.value, "headers": list(r.headers),
                              "on_delivery": done(i)}
        if r.partition is not None:
            kw["partition"] = r.partition
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        p.produce(topic, **kw)
        p.poll(0)
    assert p.flush(60) == 0, "confluent-kafka did not deliver every record in 60 s"
    bad = [a for a in acks if not isinstance(a, tuple)]
    assert not bad, f"confluent-kafka delivery failed: {bad[:3]}"
    return acks


def confluent_consume(bootstrap: str, topic: str, timeout: float = 60, count: int | None = None,
                      **conf: Any) -> list[Rec]:
    """Every partition from the start to the high watermark, or (``count``) until that many
    records arrived (read_committed: the end is the last stable offset, and past aborted
    records and markers no record's offset reaches it)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rivven-tests-unused",
                  "enable.auto.commit": False, **conf})
    try:
        parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        end = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
               for p in parts}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        got: list[Rec] = []
        pos = {p: 0 for p in parts}
        deadline = time.monotonic() + timeout
        while (len(got) < count) if count is not None else any(pos[p] < end[p] for p in parts):
            assert time.monotonic() < deadline, \
                f"confluent-kafka not at {end} (or {count} records) in {timeout} s: {len(got)}"
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(Rec(m.partition(), m.key(), m.value(), tuple(m.headers() or ()),
                           m.timestamp()[1], m.offset()))
            pos[m.partition()] = m.offset() + 1
        return sorted(got, key=_order)
    finally:
        c.close()


# ----------------------------------------------------------------------- kafka-python
def kafka_python_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str,
                         **conf: Any) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    p = KafkaProducer(**{"bootstrap_servers": bootstrap, "enable_idempotence": True,
                         "acks": "all", "linger_ms": 5,
                         "compression_type": None if codec == "none" else codec, **conf})
    try:
        futs = [p.send(topic, key=r.key, value=r.value, partition=r.partition,
                       headers=list(r.headers), timestamp_ms=r.timestamp) for r in recs]
        p.flush(60)
        if conf.get("acks") == 0:  # no answer: nothing to wait for
            return []
        return [(m.partition, m.offset) for m in (f.get(60) for f in futs)]
    finally:
        p.close(30)


def kafka_python_consume(bootstrap: str, topic: str, timeout: float = 60,
                         count: int | None = None, **conf: Any) -> list[Rec]:
    """As ``confluent_consume``."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", **conf)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        assert parts, f"kafka-python sees no partitions of {topic}"
        c.assign(parts)
        c.seek_to_beginning(*parts)
        end = c.end_offsets(parts)
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while ((len(got) < count) if count is not None
               else any(c.position(tp) < end[tp] for tp in parts)):
            assert time.monotonic() < deadline, \
                f"kafka-python not at {end} (or {count} records) in {timeout} s: {len(got)}"
            for batch in c.poll(200).values():
                got += [Rec(m.partition, m.key, m.value, tuple(m.headers or ()), m.timestamp,
                            m.offset) for m in batch]
        return sorted(got, key=_order)
    finally:
        c.close()


# ----------------------------------------------------------------------- kcat
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(f"kcat is not installed: {SETUP}", pytrace=False)
    return path


def kcat_run(*args: str, input: bytes | None = None, timeout: float = 120
             ) -> subprocess.CompletedProcess:
    r = subprocess.run([kcat(), *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}"
    return r


def kcat_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str, *extra: str) -> None:
    """``kcat -P`` of records that share their partition and headers (kcat's -p and -H apply
    to a whole run; it sets no timestamps): keys and values must not hold a tab or a newline."""
    parts = {r.partition for r in recs}
    headers = {r.headers for r in recs}
    assert len(parts) == 1 and len(headers) == 1, "kcat: one partition and one header set a run"
    lines = []
    for r in recs:
        assert r.key is not None and r.value is not None and r.timestamp is None
        assert not any(c in r.key + r.value for c in b"\t\n"), "kcat: no tab or newline"
        lines.append(r.key + b"\t" + r.value)
    hs = [a for k, v in next(iter(headers)) for a in ("-H", f"{k}={(v or b'').decode()}")]
    part = next(iter(parts))
    kcat_run("-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", f"compression.codec={codec}",
             "-X", "enable.idempotence=true", "-X", "acks=all",
             *(["-p", str(part)] if part is not None else []), *hs, *extra,
             input=b"\n".join(lines) + b"\n")


def kcat_consume(bootstrap: str, topic: str, *extra: str) -> list[Rec]:
    """``kcat -C -J -e`` from the beginning: keys, values and header values as kcat prints
    them (text: the records compared with kcat must be UTF-8)."""
    out = kcat_run("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q",
                   *extra).stdout.decode()
    recs = []
    for line in out.splitlines():
        j = json.loads(line)
        hs = j.get("headers") or []
        pairs = tuple((hs[i], None if hs[i + 1] is None else hs[i + 1].encode())
                      for i in range(0, len(hs), 2))
        recs.append(Rec(j["partition"], None if j["key"] is None else j["key"].encode(),
                        None if j["payload"] is None else j["payload"].encode(), pairs,
                        j["ts"], j["offset"]))
    return sorted(recs, key=_order)


# ----------------------------------------------------------------------- Kafka's Java client
def java_classpath() -> str:
    """The jars and KafkaTool's classes: compiled once per source version (a directory named
    by the source's hash under the temp dir, made whole by a rename: parallel workers share)."""
    missing = [j for j in JARS if not (JAVA_LIB / j).is_file()]
    if missing:
        pytest.fail(f"Kafka's Java client is not installed ({', '.join(missing)} missing in "
                    f"{JAVA_LIB}): {SETUP}", pytrace=False)
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail(f"javac is not installed (KafkaTool.java is compiled by the tests): {SETUP}",
                    pytrace=False)
    jars = os.pathsep.join(str(JAVA_LIB / j) for j in JARS)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in JAVA_SOURCES)).hexdigest()[:16]
    classes = Path(tempfile.gettempdir()) / f"rivven-kafkatool-{digest}"
    if not (classes / "KafkaTool.class").is_file():
        work = Path(tempfile.mkdtemp(prefix="rivven-kafkatool-build-"))
        r = subprocess.run([javac, "-nowarn", "-d", str(work), "-cp", jars,
                            *map(str, JAVA_SOURCES)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"javac KafkaTool.java failed: {r.stderr}"
        try:
            os.rename(work, classes)
        except OSError:  # another worker's copy got there first: the same classes
            shutil.rmtree(work, ignore_errors=True)
    return os.pathsep.join([str(classes), jars])


def java_command(cmd: str, bootstrap: str, *args: str, props: dict[str, Any] | None = None,
                 opts: dict[str, Any] | None = None) -> list[str]:
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dkafkatool.log={os.environ.get('RIVVEN_KAFKATOOL_LOG', 'warn')}",
            "-cp", java_classpath(), "KafkaTool", cmd, bootstrap, *args,
            *(f"-P{k}={v}" for k, v in (props or {}).items()),
            *(f"--{k}={v}" for k, v in (opts or {}).items())]


def java(cmd: str, bootstrap: str, *args: str, props: dict[str, Any] | None = None,
         opts: dict[str, Any] | None = None, input: bytes | None = None,
         timeout: float = 180, check: bool = True) -> list[dict]:
    """Run KafkaTool: its JSON lines (``check``: a failure is an AssertionError with its
    output)."""
    r = subprocess.run(java_command(cmd, bootstrap, *args, props=props, opts=opts),
                       input=input, capture_output=True, timeout=timeout)
    lines = [json.loads(x) for x in r.stdout.decode().splitlines() if x.startswith("{")]
    if check and r.returncode != 0:
        raise AssertionError(f"KafkaTool {cmd} {' '.join(args)} exited {r.returncode}: "
                             f"{r.stdout.decode()[-2000:]} {r.stderr.decode()[-3000:]}")
    return lines


def java_admin(bootstrap: str, *calls: str, **props: Any) -> list[dict]:
    """AdminClient calls in one JVM (``"create-topic t 3"``, ...): one answer each, in order
    (``{"error": exception class, "message": ...}`` for a call that failed)."""
    out = java("admin", bootstrap, "-", props=props, input="\n".join(calls).encode() + b"\n")
    assert len(out) == len(calls), out
    return out


def java_popen(cmd: str, bootstrap: str, *args: str, props: dict[str, Any] | None = None,
               opts: dict[str, Any] | None = None, stderr: Any = None) -> subprocess.Popen:
    """KafkaTool running (group, eos): a line on its stdin (or closing it) stops it."""
    opts = {"stdin-stop": "true", **(opts or {})}
    return subprocess.Popen(java_command(cmd, bootstrap, *args, props=props, opts=opts),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr if stderr is not None else subprocess.PIPE)


def java_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str,
                 abort: bool = False, **props: Any) -> list[tuple[int, int]]:
    """(``transactional.id`` in ``props``: in one transaction, committed or aborted.)"""
    return java_produce_runs(bootstrap, topic, [(codec, recs)], abort, **props)


def java_produce_runs(bootstrap: str, topic: str, runs: list[tuple[str, list[Rec]]],
                      abort: bool = False, **props: Any) -> list[tuple[int, int]]:
    """One JVM, one producer per ``(codec, records)`` run: the acks in order."""
    lines = []
    for codec, recs in runs:
        lines.append(f"!compression.type={codec}")
        for r in recs:
            hs = ",".join(f"{base64.b64encode(k.encode()).decode()}:{_b64(v)}"
                          for k, v in r.headers)
            lines.append("\t".join(["-" if r.partition is None else str(r.partition),
                                     _b64(r.key), _b64(r.value),
                                     "-" if r.timestamp is None else str(r.timestamp), hs]))
    out = java("produce", bootstrap, topic, props=props, opts={"abort": "true"} if abort else None,
               input=("\n".join(lines) + "\n").encode())
    return [(j["partition"], j["offset"]) for j in out]


def java_record(j: dict) -> Rec:
    return Rec(j["partition"], _unb64(j["key"]), _unb64(j["value"]),
               tuple((h["key"], _unb64(h["value"])) for h in j["headers"]), j["timestamp"],
               j["offset"])


def java_consume(bootstrap: str, topic: str, **props: Any) -> list[Rec]:
    return java_consume_topics(bootstrap, [topic], **props)[topic]


def java_consume_topics(bootstrap: str, topics: list[str], **props: Any) -> dict[str, list[Rec]]:
    """Every partition of each topic from the start to the end, in one JVM."""
    out = java("consume", bootstrap, ",".join(topics), props=props)
    got: dict[str, list[Rec]] = {t: [] for t in topics}
    for j in out:
        if "event" not in j:
            got[j["topic"]].append(java_record(j))
    return {t: sorted(rs, key=_order) for t, rs in got.items()}


# ----------------------------------------------------------------------- group members
class Member:
    """A running group member: KafkaTool's ``group`` (events: assigned, revoked, record,
    committed, commit-failed, closed) or ``kcat -G`` (records only: kcat prints no
    rebalance and commits on its own every auto.commit.interval.ms). ``events`` fills from
    a reader thread."""

    def __init__(self, name: str, argv: list[str], kind: str) -> None:
        import threading

        self.name, self.kind = name, kind
        self.events: list[dict] = []
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stderr = b""
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read_err(self) -> None:
        """stderr kept; kcat's rebalance lines ("% Group G rebalanced (memberid M): assigned:
        t [0], t [3]" / "revoked: ...") become assigned/revoked events."""
        import re

        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line
            m = re.search(rb"rebalanced .*: (assigned|revoked): (.*)$", line.strip())
            if self.kind == "kcat" and m:
                parts = [{"topic": t.decode(), "partition": int(p)}
                         for t, p in re.findall(rb"(\S+) \[(\d+)\]", m.group(2))]
                self.events.append({"event": m.group(1).decode(), "partitions": parts})

    def assigned(self) -> set[tuple[str, int]]:
        """The partitions held now, by the assigned/revoked events (eager protocols revoke
        everything and assign anew; cooperative ones add and take away some)."""
        held: set[tuple[str, int]] = set()
        for e in list(self.events):
            tps = {(p["topic"], p["partition"]) for p in e.get("partitions", ())}
            if e.get("event") == "assigned":
                held |= tps
            elif e.get("event") == "revoked":
                held -= tps
        return held

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if self.kind == "kcat":  # kcat -J: a record
                j = {"event": "record", "topic": j["topic"], "partition": j["partition"],
                     "offset": j["offset"]}
            self.events.append(j)

    def records(self) -> list[tuple[str, int, int]]:
        return [(e["topic"], e["partition"], e["offset"]) for e in list(self.events)
                if e.get("event") == "record"]

    def stop(self, timeout: float = 60) -> int:
        """Leave the group as a client closing does (KafkaTool: a stdin line; kcat: SIGTERM)."""
        import signal

        if self.proc.poll() is None:
            if self.kind == "kcat":
                self.proc.send_signal(signal.SIGTERM)
            else:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
        self.proc.wait(timeout)
        self._reader.join(10)
        self._err_reader.join(10)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(10)
        self._err_reader.join(10)


def java_member(name: str, bootstrap: str, group: str, topics: str, **props: Any) -> Member:
    props = {"client.id": name, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
             "max.poll.records": 20, **props}
    return Member(name, java_command("group", bootstrap, group, topics, props=props,
                                     opts={"stdin-stop": "true"}), "java")


def kcat_member(name: str, bootstrap: str, group: str, topics: str, **conf: Any) -> Member:
    conf = {"client.id": name, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "auto.commit.interval.ms": 200, "auto.offset.reset": "earliest", **conf}
    xs = [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]
    return Member(name, [kcat(), "-b", bootstrap, "-G", group, "-J", "-u", *xs,
                         *topics.split(",")], "kcat")
