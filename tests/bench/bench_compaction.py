#!/usr/bin/env python3
"""rivven compaction: the Spark job on local[2] and local[1] against the in-process pass.

A compacted topic of --gib GiB of sealed segments (4 partitions, segment.bytes 64 MiB per GiB,
1000-byte values, --keys distinct keys updated at random, 1% tombstones) is copied once per
variant and compacted:

  inproc     Engine.compact() in this process (the reference: a dict of key -> last offset,
             then the same segment writer), no Spark
  local[2]   rivven spark compact --master local[2] (a real spark-submit)
  local[1]   the same on one core

Reported: total wall time, Spark start-up (until the SparkSession exists), the job after
start-up, records/s and MB/s of input log after start-up, and local[2] / local[1].

Usage: python tests/bench/bench_compaction.py [--gib 1.0] [--keys 100000] [--variants inproc,2,1]
       [--json] [--dir /tmp]
This is a benchmark script, not a pytest module.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import cli_exe, log, print_rows  # noqa: E402

from engine import Engine  # noqa: E402

PARTS = 4
VALUE = 1000


def build(d: str, gib: float, keys: int) -> dict[str, Any]:
    rng = random.Random(1)
    n = int(gib * (1 << 30) / (VALUE + 60) / 0.8)  # ~80% ends up in sealed segments
    payload = os.urandom(VALUE)
    with Engine.open(d, sync=False) as eng:
        seg = max(1 << 20, int(gib * (64 << 20)))  # ~5 segments per partition
        eng.create_topic("c", PARTS, {"cleanup.policy": "compact", "segment.bytes": str(seg),
                                      "min.cleanable.dirty.ratio": "0.01"})
        chunk = 2000
        for _ in range(0, n, chunk):
            ks = [b"key-%08d" % rng.randrange(keys) for _ in range(chunk)]
            vs = [None if rng.random() < 0.01 else payload for _ in range(chunk)]
            eng.produce_batch("c", vs, keys=ks)
        plans = eng.maintenance.compaction_plan("c")
    sealed = sum(s["bytes"] for p in plans for s in p["segments"])
    records = sum(p["cleanable_end"] - p["log_start_offset"] for p in plans)
    log(f"built {n:,} records; cleanable: {sealed / 1e9:.2f} GB, {records:,} records")
    return {"records_total": n, "cleanable_bytes": sealed, "cleanable_records": records}


def run_inproc(d: str) -> dict[str, Any]:
    t = time.perf_counter()
    with Engine.open(d) as eng:
        out = eng.maintenance.compact("c")
    dt = time.perf_counter() - t
    return {"seconds": dt, "job_s": dt, "startup_s": 0.0, "plan_s": 0.0, "exec_s": dt,
            "records_out": sum(p.get("records_out", 0) for p in out)}


def run_spark(d: str, master: str) -> dict[str, Any]:
    env = dict(os.environ, RIVVEN_DATA_DIR=d)
    t = time.perf_counter()
    r = subprocess.run([cli_exe(), "spark", "compact", "c", "--master", master, "--json"],
                       env=env, capture_output=True, timeout=7200)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"spark compact failed: {r.stderr.decode()[-2000:]}")
    out = json.loads(r.stdout)
    return {"seconds": dt, "job_s": out["job_s"], "startup_s": out["startup_s"],
            "plan_s": out["plan_s"], "exec_s": out["exec_s"],
            "spark_s": out["spark_s"], "swap_s": out["swap_s"],
            "records_out": sum(p["records_out"] for p in out["partitions"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--variants", default="inproc,2,1")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="rivven-bench-compact-", dir=a.dir)
    res: dict[str, Any] = {}
    try:
        src = os.path.join(scratch, "src")
        res["data"] = build(src, a.gib, a.keys)
        for v in a.variants.split(","):
            d = os.path.join(scratch, f"run-{v}")
            shutil.copytree(src, d)
            subprocess.run(["cat"] + [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
                                      if f.endswith(".log")], stdout=subprocess.DEVNULL)
            os.sync()  # else the copy's writeback (~1 GB) competes with the measured run
            log(f"running {v}")
            res[v] = run_inproc(d) if v == "inproc" else run_spark(d, f"local[{v}]")
            log(f"{v}: {res[v]}")
            shutil.rmtree(d)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    data = res["data"]
    rows: list[tuple[str, str, str]] = [
        ("-- input", "", ""),
        ("cleanable log", f"{data['cleanable_bytes'] / 1e9:.2f} GB",
         f"{data['cleanable_records']:,} records"),
        ("-- compaction (MB/s of input over the run: from the first Spark job to the end)", "",
         "")]
    for v in a.variants.split(","):
        r = res[v]
        name = "in process (reference)" if v == "inproc" else f"spark local[{v}]"
        mbs = data["cleanable_bytes"] / r["exec_s"] / 1e6
        rps = data["cleanable_records"] / r["exec_s"]
        rows.append((name, f"{mbs:.0f} MB/s", f"{rps / 1e6:.2f} M rec/s; run {r['exec_s']:.1f} s, "
                     f"session {r['startup_s']:.1f} s, planning {r['plan_s']:.1f} s, "
                     f"total {r['seconds']:.1f} s ({data['cleanable_bytes'] / r['seconds'] / 1e6:.0f}"
                     f" MB/s); {r['records_out']:,} survivors"))
    if "2" in res and "1" in res:
        rows.append(("local[2] / local[1]", f"{res['1']['exec_s'] / res['2']['exec_s']:.2f}x",
                     f"(whole spark-submit: {res['1']['seconds'] / res['2']['seconds']:.2f}x)"))
    if "2" in res and "inproc" in res:
        rows.append(("local[2] / in process",
                     f"{res['inproc']['exec_s'] / res['2']['exec_s']:.2f}x", ""))
    print_rows(rows, sys.stdout)


if __name__ == "__main__":
    main()
