#!/usr/bin/env python3
"""Issue 32's "the Spark path scales with tasks": ``rivven spark export`` and ``rivven spark
import`` of N records over P partitions at local[1] and local[2], against a Kafka-protocol
broker on loopback (tansu, memory storage, by default; or ``rivven serve``), beside the
one-process ``rivven kafka export|import`` of the same records.

Records as bench_kafka.py's (10-byte keys, 100-byte values), produced into a data dir
beforehand. Every run copies everything anew (a topic and a mirror name of its own); the
runs take turns round after round (a noisy machine slows them alike); figures are medians:

  total    records/s of the whole command: the process's start to its exit (Spark's session
           start-up included: seconds on a small machine)
  copy     records/s of the copy itself: Spark's first job to the last task's end (exec_s),
           or for the one-process copy its own seconds

The copies commit exactly once (transactions of <= 50,000 records). Usage:
  python tests/bench/bench_spark_bridge.py [--records 1000000] [--partitions 4] [--rounds 3]
      [--broker tansu|rivven] [--masters 'local[1],local[2]'] [--no-single] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # (tests/: helpers)
sys.path.insert(0, str(HERE.parents[1]))  # (the repository: engine)

from bench_kafka import make_records  # noqa: E402
from helpers import run_rivven  # noqa: E402


def fill(data_dir: str, topic: str, parts: int, n: int) -> None:
    """``n`` records over ``parts`` partitions, made and written 10,000 at a time (round
    robin: a chunk per partition in turn; no list of all of them in memory)."""
    from engine import Engine

    step = 10_000
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, parts)
        for i, s in enumerate(range(0, n, step)):
            keys, values = make_records(min(step, n - s))
            eng.produce_batch(topic, values, keys=keys, partition=i % parts)


def copy(data_dir: str, how: str, direction: str, topic: str, bootstrap: str, name: str,
         dest: str, n: int) -> tuple[float, float]:
    """One copy through the CLI: (total records/s, copy records/s)."""
    args = [direction, topic, "-b", bootstrap, "--name", name, "--to-topic", dest, "--json"]
    cmd = ["kafka", *args] if how == "single" else ["spark", *args, "--master", how]
    t0 = time.perf_counter()
    r = run_rivven(data_dir, *cmd, timeout=3600)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"rivven {' '.join(cmd)} exited {r.returncode}: "
                         f"{r.stderr.decode()[-3000:]}")
    out = json.loads(r.stdout)
    if out["records"] != n:
        raise SystemExit(f"rivven {' '.join(cmd)} copied {out['records']} of {n} records")
    inner = out.get("exec_s") or out["seconds"]
    return n / dt, n / inner


def start_broker(kind: str, work: Path) -> Any:
    if kind == "tansu":
        from helpers.tansu import start_tansu

        return start_tansu(work / "logs")
    from helpers.kafka import start_server

    return start_server(str(work / "cluster"), log_dir=str(work / "logs"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--broker", choices=("tansu", "rivven"), default="tansu")
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--no-single", action="store_true",
                    help="leave out the one-process rivven kafka export|import")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    hows = [*args.masters.split(","), *([] if args.no_single else ["single"])]
    work = Path(tempfile.mkdtemp(prefix="bench-spark-bridge-"))
    src = str(work / "src")
    t0 = time.perf_counter()
    fill(src, "src", parts, n)
    print(f"{n:,} records over {parts} partitions in the source data dir in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    res: dict[str, list[float]] = {}
    broker = start_broker(args.broker, work)
    try:
        for r in range(args.rounds):
            order = hows if r % 2 == 0 else hows[::-1]  # (turns: neither always first)
            print(f"round {r + 1} of {args.rounds}: {', '.join(order)}", file=sys.stderr,
                  flush=True)
            for how in order:
                tag = f"r{r}-{how.replace('[', '').replace(']', '')}"
                for direction in ("export", "import"):
                    if direction == "export":
                        got = copy(src, how, "export", "src", broker.bootstrap, f"out-{tag}",
                                   f"out-{tag}", n)
                    else:  # (the records this run exported, into a data dir of its own)
                        got = copy(str(work / f"dst-{tag}"), how, "import", f"out-{tag}",
                                   broker.bootstrap, f"in-{tag}", "back", n)
                        shutil.rmtree(work / f"dst-{tag}", ignore_errors=True)
                    for what, v in zip(("total", "copy"), got):
                        res.setdefault(f"{direction} {how} {what}", []).append(v)
                    print(f"  {direction:6} {how:9} total {got[0]:>10,.0f} rec/s   copy "
                          f"{got[1]:>10,.0f} rec/s", file=sys.stderr, flush=True)
            if args.broker == "tansu" and r + 1 < args.rounds:  # (memory: start afresh)
                broker.stop()
                broker = start_broker(args.broker, work)
    finally:
        if args.broker == "tansu":
            broker.stop()
        else:
            broker.kill()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    if args.json:
        print(json.dumps({"records": n, "partitions": parts, "rounds": args.rounds,
                          "broker": args.broker, "cpus": os.cpu_count(), "median": med,
                          "all": res}, indent=1))
        return
    print(f"{n:,} records (10-byte key, 100-byte value) over {parts} partitions, {args.broker} "
          f"on loopback, {os.cpu_count()} CPUs, median of {args.rounds} round(s), records/s")
    print(f"  {'':28}{'total':>12}{'copy':>12}")
    for direction in ("export", "import"):
        for how in hows:
            k = f"{direction} {how}"
            print(f"  {k:28}{med[k + ' total']:>12,.0f}{med[k + ' copy']:>12,.0f}")
        for how in args.masters.split(",")[1:]:
            one = args.masters.split(",")[0]
            print(f"  {direction} {how} / {one} (copy){'':4}"
                  f"{med[f'{direction} {how} copy'] / med[f'{direction} {one} copy']:>9.2f}x")


if __name__ == "__main__":
    main()
