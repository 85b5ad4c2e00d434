#!/usr/bin/env python3
"""``rivven kafka export`` / ``import`` against tansu beside kcat producing / consuming the same
records against the same broker, in the same round (issue 32's goal: >= 0.5x each):
``make bench-bridge`` prints one table (docs/BENCHMARKS.md, "Copies to and from Kafka").

Per round a fresh tansu (memory storage; kcat on the venv's librdkafka 2.16, since Debian's
2.0.2 cannot read tansu's ApiVersions: helpers.tansu.kcat_env) and N records of 10-byte keys
and 100-byte values over P partitions, each with a timestamp:

  export       Export of a data-dir topic into tansu, exactly once (a transaction every 200,000
               records, each with send_offsets_to_transaction), the call's start to its end
  kcat -P      kcat -P -K '\\t' -l FILE of the same records into another topic (one process per
               partition, -p P, run one after the other: the records keep their partitions)
  import       Import of the exported topic into a fresh data dir, exactly once, to its end
  kcat -C      kcat -C -o beginning -e of the exported topic (stdout counted), as kcat reads by
               default; "fw10": with -X fetch.wait.max.ms=10 (without the last fetch's 0.5 s)

The order of the pairs alternates between rounds. Usage:
  python tests/bench/bench_bridge.py [--records 1000000] [--partitions 4] [--rounds 3] [--json]
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
sys.path.insert(0, str(HERE.parent.parent))  # (the repository: engine)

from bench_bridge_baseline import FW10, KCAT, kcat_consume  # noqa: E402
from helpers.tansu import kcat_env, start_tansu  # noqa: E402

import engine  # noqa: E402
from engine.bridge.cluster import settings  # noqa: E402
from engine.bridge.copy import run  # noqa: E402
from engine.bridge.export import Export  # noqa: E402
from engine.bridge.importer import Import  # noqa: E402

SETTINGS = {"wal.sync": "always"}  # (the engine's default: each write durable)


def fill(d: str, n: int, parts: int) -> list[Path]:
    """The data dir's topic ``t``, and per partition the same records as kcat's input file."""
    per = n // parts
    files = []
    with engine.Engine.open(d, settings=SETTINGS) as eng:
        eng.create_topic("t", parts)
        for p in range(parts):
            keys = [b"key-%06d" % (p * per + i) for i in range(per)]
            values = [b"v" * 100] * per
            for s in range(0, per, 50_000):
                eng.produce_batch("t", values[s:s + 50_000], keys[s:s + 50_000],
                                  timestamps=1_700_000_000_000 + s, partition=p)
            path = Path(d).parent / f"records-{p}.tsv"
            with open(path, "wb") as f:
                f.writelines(k + b"\t" + v + b"\n" for k, v in zip(keys, values))
            files.append(path)
    return files


def copy_rate(kind: type, d: str, bootstrap: str, n: int) -> float:
    """records/s of one ``Export`` or ``Import`` run over ``d``'s topic ``t``, to its end."""
    with engine.Engine.open(d, settings=SETTINGS) as eng:
        t0 = time.perf_counter()
        r = run(kind(eng, ["t"], settings(bootstrap), "bench"))
        dt = time.perf_counter() - t0
    assert r["records"] == n, r
    return n / dt


def kcat_produce_parts(bootstrap: str, files: list[Path], n: int, env: dict[str, str]) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kcat", len(files), -1)])["kcat"].result(30)
    t0 = time.perf_counter()
    for p, path in enumerate(files):
        r = subprocess.run([KCAT, "-P", "-b", bootstrap, "-t", "kcat", "-p", str(p), "-K", "\t",
                            "-l", str(path)], capture_output=True, env=env, timeout=900)
        if r.returncode != 0:
            raise SystemExit(f"kcat -P exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.records - args.records % args.partitions
    work = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    env = kcat_env(work)
    res: dict[str, list[float]] = {}

    def add(name: str, fn: Any, *a: Any) -> None:
        v = fn(*a)
        res.setdefault(name, []).append(v)
        print(f"  {name}: {v:,.0f} rec/s", file=sys.stderr, flush=True)

    try:
        files = fill(str(work / "src"), n, args.partitions)
        for r in range(args.rounds):
            print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
            broker = start_tansu(work / f"logs-{r}")
            b = broker.bootstrap
            back = str(work / f"back-{r}")
            try:
                first: list[tuple[Any, ...]] = [
                    ("export", copy_rate, Export, str(work / "src"), b, n),
                    ("kcat -P", kcat_produce_parts, b, files, n, env)]
                then: list[tuple[Any, ...]] = [
                    ("import", copy_rate, Import, back, b, n),
                    ("kcat -C", kcat_consume, b, "t", n, env),
                    ("kcat -C fw10", kcat_consume, b, "t", n, env, *FW10)]
                for group in (first, then):
                    for job in group if r % 2 == 0 else group[::-1]:
                        add(*job)
            finally:
                broker.stop()
                shutil.rmtree(back, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    ratios = {"export / kcat -P": med["export"] / med["kcat -P"],
              "import / kcat -C": med["import"] / med["kcat -C"],
              "import / kcat -C fw10": med["import"] / med["kcat -C fw10"]}
    if args.json:
        print(json.dumps({"records": n, "partitions": args.partitions, "rounds": args.rounds,
                          "median": med, "ratios": ratios, "all": res}, indent=1))
        return
    print(f"{n:,} records over {args.partitions} partitions (10-byte key, 100-byte value), "
          f"against tansu, median of {args.rounds} rounds")
    for k, v in med.items():
        print(f"  {k:28}{v:>12,.0f} records/s")
    for k, v in ratios.items():
        print(f"  {k:28}{v:>12.2f}x")


if __name__ == "__main__":
    main()
