#!/usr/bin/env python3
"""Idempotent produce against plain produce (issue 15), and plain produce old code vs new.

  ratio    one Engine (sync=True: an fdatasync per call), two topics of one partition;
           ``Producer.produce_batch`` (idempotent: format-2 batches, sequence checks) and
           ``Engine.produce_batch`` (plain) take turns of ``--turn`` calls of 1000 records
           (10-byte keys, 100-byte values, as ``rivven bench produce``), for ``--records`` each.
           Reports records/s of each and idempotent / plain (goal >= 0.9).
  oldnew   plain produce in a subprocess per run, alternating ``--code OLD`` and ``--code NEW``
           (source trees put first on PYTHONPATH), ``--runs`` each; medians and NEW / OLD.

Usage:
  python tests/bench/bench_idempotence.py ratio [--records 1000000] [--turn 50] [--runs 3]
  python tests/bench/bench_idempotence.py oldnew --code /tmp/old --code . [--runs 5]
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

CALL = 1000
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def data() -> tuple[list[bytes], list[bytes]]:
    vals = [os.urandom(50).hex().encode() for _ in range(CALL)]
    keys = [b"k%09d" % i for i in range(CALL)]
    return keys, vals


def ratio_run(records: int, turn: int) -> dict[str, float]:
    from engine import Engine

    keys, vals = data()
    d = tempfile.mkdtemp(prefix="rivven-bench-idem-")
    spent = {"plain": 0.0, "idempotent": 0.0}
    done = {"plain": 0, "idempotent": 0}
    try:
        with Engine.open(d) as eng:
            eng.create_topic("plain", 1)
            eng.create_topic("idem", 1)
            p = eng.producer()
            calls = {"plain": lambda: eng.produce_batch("plain", vals, keys=keys),
                     "idempotent": lambda: p.produce_batch("idem", vals, keys=keys)}
            for name in calls:  # warm up both paths (first segment, WAL stream, state)
                calls[name]()
            while min(done.values()) < records:
                for name, call in calls.items():
                    t = time.perf_counter()
                    for _ in range(turn):
                        call()
                    spent[name] += time.perf_counter() - t
                    done[name] += turn * CALL
            assert eng.end_offsets("idem")[0] == done["idempotent"] + CALL
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {k: done[k] / spent[k] for k in spent}


def plain_run(records: int) -> float:
    from engine import Engine

    keys, vals = data()
    d = tempfile.mkdtemp(prefix="rivven-bench-plain-")
    try:
        with Engine.open(d) as eng:
            eng.create_topic("t", 1)
            eng.produce_batch("t", vals, keys=keys)
            t = time.perf_counter()
            for _ in range(records // CALL):
                eng.produce_batch("t", vals, keys=keys)
            return records / (time.perf_counter() - t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["ratio", "oldnew", "_plain"])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--turn", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--code", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.mode == "_plain":
        print(json.dumps(plain_run(a.records)))
        return
    if a.mode == "ratio":
        sys.path.insert(0, ROOT)
        runs = [ratio_run(a.records, a.turn) for _ in range(a.runs)]
        out = {k: round(statistics.median(r[k] for r in runs)) for k in runs[0]}
        out["ratios"] = [round(r["idempotent"] / r["plain"], 3) for r in runs]
        out["ratio"] = round(statistics.median(out["ratios"]), 3)
    else:
        if len(a.code) != 2:
            ap.error("oldnew needs --code OLD --code NEW")
        rates: dict[str, list[float]] = {c: [] for c in a.code}
        for _ in range(a.runs):
            for c in a.code:
                env = dict(os.environ, PYTHONPATH=os.path.abspath(c))
                res = subprocess.run([sys.executable, __file__, "_plain", "--records",
                                      str(a.records)], env=env, cwd=os.path.abspath(c),
                                     capture_output=True, text=True, check=True)
                rates[c].append(float(res.stdout))
        old, new = a.code
        out = {"old": round(statistics.median(rates[old])), "new": round(statistics.median(rates[new])),
               "old_runs": [round(x) for x in rates[old]], "new_runs": [round(x) for x in rates[new]]}
        out["ratio"] = round(out["new"] / out["old"], 3)
    print(json.dumps(out, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
