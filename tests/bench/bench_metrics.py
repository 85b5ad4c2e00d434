#!/usr/bin/env python3
"""rivven metrics: what the per-process counters cost on produce, and how long ``rivven metrics``
takes on a data dir of 1,000 partitions.

  1 produce   calls of 1000 records (10-byte keys, 100-byte values) by
              ``eng.produce_batch(topic, values, keys=keys, partition=0)`` to a topic of one
              partition, by two engines open side by side in this one process, on fresh data
              dirs, ``metrics.enabled`` true and false: ``--warmup`` calls each, then
              ``--rounds`` pairs of blocks of ``--calls`` calls, the order alternating. Done
              durable (default settings, wal.sync=always) and with wal.sync=none
              (``--calls-nosync`` per block: CPU only, where a per-call cost shows). Reports
              records/s of each over all blocks, the ratio on / off over all blocks (goal >=
              0.97), and the median, min and max of the pairs.
  2 command   a data dir of ``--topics`` x ``--partitions`` (10 x 100) partitions, ``--records``
              records produced into each (sync=False), and group ``g`` that committed offsets on
              t0. Times ``python -m rivven_cli.main --data-dir D metrics`` in a subprocess (wall
              clock, best and median of ``--runs``; its output must hold rivven_log_end_offset),
              ``--version`` of the same as the start-up baseline, and in-process
              ``Engine.open(D, read_only=True)`` then ``eng.metrics()`` twice: the first call,
              and the second (what ``rivven metrics serve`` pays per scrape). Goal: <= 1 s.

Usage: python tests/bench/bench_metrics.py [--rounds 60] [--calls 30] [--calls-nosync 60]
       [--warmup 20] [--topics 10] [--partitions 100] [--records 3] [--runs 5] [--steps 12]
       [--json] [--dir /tmp]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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

from bench_engine import log, print_rows  # noqa: E402

from engine import Engine, Record  # noqa: E402

CALL = 1000
TARGET_RATIO = 0.97  # produce with metrics on / off
TARGET_COMMAND_S = 1.0  # rivven metrics on 1,000 partitions
MODES = {"durable": {}, "nosync": {"wal.sync": "none"}}


def make_call() -> tuple[list[bytes], list[bytes]]:
    keys = [b"k%09d" % i for i in range(CALL)]
    vals = [os.urandom(50).hex().encode() for _ in range(CALL)]
    return keys, vals


# ------------------------------------------------------------------ 1 produce cost
def step_produce(a: argparse.Namespace) -> dict[str, Any]:
    """Two engines open side by side in this process, metrics on and off, each on a fresh
    data dir; ``--rounds`` pairs of blocks of ``--calls`` calls, the order alternating: the
    disk's and the machine's drift hit both alike (whole runs one after the other, on fresh
    data dirs, spread 0.65-1.57x here)."""
    keys, vals = make_call()
    out: dict[str, Any] = {}
    for mode, extra in MODES.items():
        calls = a.calls if mode == "durable" else a.calls_nosync
        dirs = {e: tempfile.mkdtemp(prefix="rivven-bench-metrics-", dir=a.dir)
                for e in ("true", "false")}
        engs = {e: Engine.open(d, settings={**extra, "metrics.enabled": e})
                for e, d in dirs.items()}
        try:
            for eng in engs.values():
                eng.create_topic("t", 1)
                for _ in range(a.warmup):
                    eng.produce_batch("t", vals, keys=keys, partition=0)
            spent = {"true": 0.0, "false": 0.0}
            ratios = []
            for r in range(a.rounds):
                took = {}
                for enabled in (("true", "false") if r % 2 == 0 else ("false", "true")):
                    eng = engs[enabled]
                    t = time.perf_counter()
                    for _ in range(calls):
                        eng.produce_batch("t", vals, keys=keys, partition=0)
                    took[enabled] = time.perf_counter() - t
                    spent[enabled] += took[enabled]
                ratios.append(took["false"] / took["true"])  # throughput on / off
            n = a.rounds * calls * CALL
            log(f"produce {mode}: {a.rounds} pairs of {calls} calls, ratio over all "
                f"{spent['false'] / spent['true']:.3f}")
        finally:
            for eng in engs.values():
                eng.close()
            for d in dirs.values():
                shutil.rmtree(d, ignore_errors=True)
        out[mode] = {"calls": calls, "rounds": a.rounds, "on": n / spent["true"], "off": n / spent["false"],
                     "ratio": spent["false"] / spent["true"],
                     "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                     "ratio_max": max(ratios)}
    return out


# ------------------------------------------------------------------ 2 rivven metrics
def fill(d: str, topics: int, partitions: int, records: int) -> None:
    recs = [Record(key=b"k%09d" % i, value=b"v" * 100) for i in range(records)]
    with Engine.open(d, sync=False) as eng:
        for t in range(topics):
            eng.create_topic(f"t{t}", partitions)
            for p in range(partitions):
                eng.produce(f"t{t}", recs, partition=p)
        c = eng.consumer("g", "t0")
        c.poll(timeout_ms=500)
        c.commit()
        c.close()


def wall(cmd: list[str], runs: int, check: str | None = None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    times = []
    size = 0
    for _ in range(runs):
        t = time.perf_counter()
        res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
        if check is not None and check.encode() not in res.stdout:
            raise SystemExit(f"{' '.join(cmd)}: no {check} in its output:\n"
                             f"{res.stdout[:2000].decode(errors='replace')}")
        size = len(res.stdout)
    return {"best": min(times), "median": statistics.median(times),
            "runs": [round(x, 4) for x in times], "stdout_bytes": size}


def step_command(a: argparse.Namespace) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="rivven-bench-metrics-cmd-", dir=a.dir)
    out: dict[str, Any] = {"partitions": a.topics * a.partitions}
    try:
        d = os.path.join(scratch, "data")
        t = time.perf_counter()
        fill(d, a.topics, a.partitions, a.records)
        out["fill_s"] = time.perf_counter() - t
        log(f"command: filled {out['partitions']} partitions in {out['fill_s']:.1f} s")
        cli = [sys.executable, "-m", "rivven_cli.main"]
        out["version"] = wall([*cli, "--version"], a.runs)
        out["command"] = wall([*cli, "--data-dir", d, "metrics"], a.runs,
                              check="rivven_log_end_offset")
        log(f"command: rivven metrics best {out['command']['best']:.3f} s, "
            f"--version best {out['version']['best']:.3f} s")
        t = time.perf_counter()
        with Engine.open(d, read_only=True) as eng:
            t1 = time.perf_counter()
            doc = eng.metrics()
            t2 = time.perf_counter()
            eng.metrics()
            t3 = time.perf_counter()
        out["open_s"], out["first_s"], out["second_s"] = t1 - t, t2 - t1, t3 - t2
        out["metrics"] = len(doc)
        out["samples"] = sum(len(m["samples"]) for m in doc.values())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


# ------------------------------------------------------------------ table
def verdict(ok: bool, goal: str) -> str:
    return f"goal {goal}: {'MET' if ok else 'MISSED'}"


def build_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if "produce" in res:
        for mode, title in (("durable", "wal.sync=always (durable)"), ("nosync", "wal.sync=none")):
            p = res["produce"][mode]
            rows += [(f"-- 1 produce_batch x {CALL}, 1 partition, {title}: {p['rounds']} pairs of "
                      f"blocks of {p['calls']} calls, two engines side by side", "", ""),
                     ("metrics.enabled=true", f"{p['on'] / 1e3:,.1f} k rec/s", "(all blocks)"),
                     ("metrics.enabled=false", f"{p['off'] / 1e3:,.1f} k rec/s", "(all blocks)"),
                     ("ratio on / off, all blocks", f"{p['ratio']:.3f} x",
                      verdict(p["ratio"] >= TARGET_RATIO, f">= {TARGET_RATIO}")),
                     ("ratio on / off, median pair", f"{p['ratio_median']:.3f} x", ""),
                     ("ratio on / off, min .. max", f"{p['ratio_min']:.3f} .. {p['ratio_max']:.3f}",
                      "")]
    if "command" in res:
        c = res["command"]
        cmd, ver = c["command"], c["version"]
        rows += [(f"-- 2 rivven metrics, {c['partitions']:,} partitions (+ group g on t0)", "", ""),
                 ("rivven metrics (subprocess), best", f"{cmd['best']:.3f} s",
                  verdict(cmd["best"] <= TARGET_COMMAND_S, f"<= {TARGET_COMMAND_S} s")),
                 ("rivven metrics (subprocess), median", f"{cmd['median']:.3f} s",
                  f"{len(cmd['runs'])} runs, {cmd['stdout_bytes']:,} B of output"),
                 ("rivven --version (start-up), best", f"{ver['best']:.3f} s", ""),
                 ("rivven --version (start-up), median", f"{ver['median']:.3f} s", ""),
                 ("metrics over start-up (medians)", f"{cmd['median'] - ver['median']:.3f} s", ""),
                 ("Engine.open(read_only=True)", f"{c['open_s']:.3f} s", "(in-process)"),
                 ("eng.metrics(), first call", f"{c['first_s']:.3f} s",
                  f"{c['metrics']} metrics, {c['samples']:,} samples"),
                 ("eng.metrics(), second call", f"{c['second_s']:.3f} s",
                  "(what metrics serve pays per scrape)"),
                 ("fill of the data dir", f"{c['fill_s']:.1f} s", "(setup, not measured)")]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=60, help="pairs of blocks (on, off)")
    ap.add_argument("--calls", type=int, default=30, help="calls per durable block")
    ap.add_argument("--calls-nosync", type=int, default=60, help="calls per wal.sync=none block")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    ap.add_argument("--records", type=int, default=3, help="records produced into each partition")
    ap.add_argument("--runs", type=int, default=5, help="runs of each subprocess")
    ap.add_argument("--steps", default="12")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None, help="where the scratch data dirs go (default: $TMPDIR)")
    a = ap.parse_args()
    res: dict[str, Any] = {}
    if "1" in a.steps:
        res["produce"] = step_produce(a)
    if "2" in a.steps:
        res["command"] = step_command(a)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print_rows(build_rows(res), sys.stdout)


if __name__ == "__main__":
    main()
