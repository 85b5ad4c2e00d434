#!/usr/bin/env python3
"""The yardstick of issue 32's performance goal: ``rivven kafka export`` / ``import`` against
tansu must reach >= 0.5x kcat producing / consuming the same records against the same broker.
This prints what kcat (and confluent-kafka's own Python loops) do against tansu, and against
``rivven serve`` beside it, for N records (10-byte keys, 100-byte values, as bench_kafka.py).

kcat is /usr/bin/kcat 1.7.1; Debian links it to librdkafka 2.0.2, which cannot read tansu's
ApiVersions reply (``helpers.tansu.kcat_env``), so against tansu kcat runs on the venv's
librdkafka (confluent-kafka's 2.16, through LD_LIBRARY_PATH): "kcat-2.16". Against rivven serve
both run. Each figure is records/s, the process's start to its exit (kcat) or the first
produce() to the end of flush() / the first poll() to the last record (Python):

  kcat -P     kcat -P -b B -t T -K '\\t' -l FILE (librdkafka defaults: acks=all, linger.ms=5)
  kcat -C     kcat -C -b B -t T -o beginning -e -q -f '%k\\t%s\\n' (stdout counted)
  kcat -C fw10  the same with -X fetch.wait.max.ms=10 (without the last fetch's 0.5 s wait)
  py produce  confluent-kafka Producer, acks=all, linger.ms=5 (bench_kafka.produce)
  py txn      the same, transactional: a transaction every --txn records, each ending with
              send_offsets_to_transaction (what export does)
  py consume  confluent-kafka Consumer, assign from 0 (bench_kafka.consume), read_committed,
              without the fetch backoff (bench_kafka.NO_BACKOFF)

The goal's ratios are export / "kcat -P" and import / "kcat -C" on tansu: once ``rivven kafka
export|import`` exist, their rows belong here, measured in the same round against the same
broker. A fresh broker per round (tansu keeps everything in memory). Usage:
  python tests/bench/bench_bridge_baseline.py [--records 1000000] [--rounds 1] [--partitions 1,8]
      [--brokers tansu,rivven] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # (tests/: helpers)

from bench_kafka import NO_BACKOFF, consume, make_records, produce  # noqa: E402
from helpers import run_rivven  # noqa: E402
from helpers.kafka import start_server  # noqa: E402
from helpers.tansu import kcat_env, start_tansu  # noqa: E402

KCAT = shutil.which("kcat") or "kcat"
# kcat -C -e ends with an empty fetch the broker holds fetch.wait.max.ms (500 ms by default):
# a fixed half second, 40% of a 1 M record run; "-C fw10" is kcat without it
FW10 = ("-X", "fetch.wait.max.ms=10")


def kcat_produce(bootstrap: str, topic: str, path: Path, n: int, env: dict[str, str] | None
                 ) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([KCAT, "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-l", str(path)],
                       capture_output=True, env=env, timeout=900)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"kcat -P to {bootstrap} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    return n / dt


def kcat_consume(bootstrap: str, topic: str, n: int, env: dict[str, str] | None,
                 *extra: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                        "-f", "%k\t%s\n", *extra], capture_output=True, env=env, timeout=900)
    dt = time.perf_counter() - t0
    got = r.stdout.count(b"\n")
    if got != n:
        raise SystemExit(f"kcat -C from {bootstrap}: {got} of {n} records (exit {r.returncode}): "
                         f"{r.stderr.decode()[-2000:]}")
    return n / dt


def txn_produce(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes],
                per_txn: int) -> float:
    """records/s of a transactional producer, a transaction every ``per_txn`` records ending
    with send_offsets_to_transaction of a group (export's loop, without the reading)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                  "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20})
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rivven-mirror-{topic}"})
    meta = group.consumer_group_metadata()
    p.init_transactions(30)
    p.list_topics(topic, 10)
    t0 = time.perf_counter()
    for s in range(0, len(keys), per_txn):
        p.begin_transaction()
        for k, v in zip(keys[s:s + per_txn], values[s:s + per_txn]):
            try:
                p.produce(topic, v, k)
            except BufferError:
                p.poll(0.001)
                p.produce(topic, v, k)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, s + per_txn)], meta, 30)
        p.commit_transaction(60)
    dt = time.perf_counter() - t0
    group.close()
    return len(keys) / dt


def create(broker: Any, kind: str, topic: str, partitions: int) -> None:
    if kind == "tansu":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(topic, partitions, -1)]).values():
            f.result(30)
    else:  # (rivven serve: the data dir, beside the server)
        run_rivven(broker.data_dir, "topic", "create", topic, "--partitions", str(partitions),
                   check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--brokers", default="tansu,rivven")
    ap.add_argument("--txn", type=int, default=50_000, help="records per transaction (py txn)")
    ap.add_argument("--only", default="kcat,py")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.records
    only = set(args.only.split(","))
    keys, values = make_records(n)
    work = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    src = work / "records.tsv"
    with open(src, "wb") as f:
        for k, v in zip(keys, values):
            f.write(k + b"\t" + v + b"\n")
    new_env = kcat_env(work)  # (kcat on librdkafka 2.16)
    res: dict[str, list[float]] = {}

    def add(name: str, fn: Any, *a: Any, **kw: Any) -> None:
        try:
            v = fn(*a, **kw)
        except (SystemExit, Exception) as e:  # noqa: BLE001 (a failed figure is reported, not fatal)
            print(f"  {name}: FAILED {e}", file=sys.stderr, flush=True)
            return
        res.setdefault(name, []).append(v)
        print(f"  {name}: {v:,.0f} rec/s", file=sys.stderr, flush=True)

    try:
        for r in range(args.rounds):
            print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
            for kind in args.brokers.split(","):
                if kind == "tansu":
                    broker = start_tansu(work / f"logs-{r}")
                    kcats = {"kcat-2.16": new_env}
                else:
                    broker = start_server(str(work / f"data-{r}"), log_dir=str(work / f"logs-{r}"))
                    kcats = {"kcat-2.0.2": None, "kcat-2.16": new_env}
                b = broker.bootstrap
                try:
                    for parts in map(int, args.partitions.split(",")):
                        if "kcat" in only:
                            for kc, env in kcats.items():
                                t = f"{kc.replace('.', '_')}-p{parts}"
                                create(broker, kind, t, parts)
                                add(f"{kind} {parts}p {kc} -P", kcat_produce, b, t, src, n, env)
                                add(f"{kind} {parts}p {kc} -C", kcat_consume, b, t, n, env)
                                add(f"{kind} {parts}p {kc} -C fw10", kcat_consume, b, t, n, env,
                                    *FW10)
                        if "py" in only:
                            t = f"py-p{parts}"
                            create(broker, kind, t, parts)
                            add(f"{kind} {parts}p py produce", produce, b, t, keys, values)
                            add(f"{kind} {parts}p py consume", consume, b, t, parts, n,
                                **{"isolation.level": "read_committed"}, **NO_BACKOFF)
                            t = f"txn-p{parts}"
                            create(broker, kind, t, parts)
                            add(f"{kind} {parts}p py txn", txn_produce, b, t, keys, values, args.txn)
                finally:
                    if kind == "tansu":
                        broker.stop()
                    else:
                        broker.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    if args.json:
        print(json.dumps({"records": n, "rounds": args.rounds, "median": med, "all": res}, indent=1))
        return
    print(f"{n:,} records (10-byte key, 100-byte value), median of {args.rounds} round(s), rec/s")
    for k, v in med.items():
        print(f"  {k:40}{v:>12,.0f}")


if __name__ == "__main__":
    main()
