#!/usr/bin/env python3
"""rivven multi-process produce: processes contending for one partition's flock.

P processes (each one Engine, T threads) produce calls of R records (10-byte keys, 100-byte
values) for --seconds to the same partitions (default settings: wal.sync=always), all
starting at one instant after their engines are open. Reported: records/s of all processes
together, and the spread between the fastest and the slowest process (a lock wait that wakes
late, or loses the lock to a holder that retakes it at once, starves a process).

``--code DIR`` runs the engine found in DIR (a checkout of another commit), so two versions can
be paired: ``--code /tmp/old --code .`` alternates them round by round in this one session and
reports each configuration's median and the ratio of the medians (second / first).

Usage: python tests/bench/bench_lock_contention.py [--code DIR ...] [--rounds 5]
       [--seconds 3] [--procs 2,4] [--threads 1] [--records 10] [--partitions 1]
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = r"""
import json, os, sys, threading, time
from engine import Engine, Record
data, start, seconds, threads, n, parts = sys.argv[1:7]
start, seconds, threads, n, parts = float(start), float(seconds), int(threads), int(n), int(parts)
eng = Engine.open(data)
recs = [Record(key=b"k%09d" % i, value=b"v" * 100) for i in range(n)]
counts = [0] * threads
def run(i):
    p = i % parts
    while time.time() < start:
        time.sleep(0.0005)
    while time.time() < start + seconds:
        eng.produce("t", recs, partition=p)
        counts[i] += n
ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
eng.close()
print(json.dumps(sum(counts)))
"""


def one_run(code: str, procs: int, a: argparse.Namespace) -> dict:
    d = tempfile.mkdtemp(prefix="rivven-lockbench-", dir=a.dir)
    try:
        env = dict(os.environ, PYTHONPATH=code)
        subprocess.run([sys.executable, "-c",
                        "import sys; from engine import Engine\n"
                        "with Engine.open(sys.argv[1]) as e: e.create_topic('t', int(sys.argv[2]))",
                        d, str(a.partitions)], env=env, cwd=code, check=True)
        start = time.time() + 1.5  # (every engine open by then)
        ps = [subprocess.Popen([sys.executable, "-c", CHILD, d, str(start), str(a.seconds),
                                str(a.threads), str(a.records), str(a.partitions)],
                               env=env, cwd=code, stdout=subprocess.PIPE)
              for _ in range(procs)]
        counts = [int(p.communicate()[0]) for p in ps]
        return {"rate": sum(counts) / a.seconds, "min": min(counts), "max": max(counts)}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", action="append", help="engine checkout(s) to pair (default: this)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--procs", default="2,4")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--records", type=int, default=10, help="records per produce call")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    codes = [os.path.abspath(c) for c in (a.code or [ROOT])]
    out: dict = {}
    for procs in [int(x) for x in a.procs.split(",")]:
        runs: dict[str, list] = {c: [] for c in codes}
        for r in range(a.rounds):
            for c in (codes if r % 2 == 0 else codes[::-1]):  # alternate who goes first
                runs[c].append(one_run(c, procs, a))
        res = {}
        for c in codes:
            rates = [x["rate"] for x in runs[c]]
            spread = [x["min"] / x["max"] if x["max"] else 0 for x in runs[c]]
            res[c] = {"median": statistics.median(rates), "rates": rates,
                      "min/max": statistics.median(spread)}
            print(f"{procs} procs x {a.threads} thread(s), {a.partitions} partition(s), "
                  f"{a.records} rec/call  {c}: median {res[c]['median']:,.0f} rec/s "
                  f"(runs {', '.join(f'{x:,.0f}' for x in rates)}); slowest/fastest process "
                  f"{res[c]['min/max']:.2f}", file=sys.stderr)
        if len(codes) == 2:
            ratio = res[codes[1]]["median"] / res[codes[0]]["median"]
            pairs = [b["rate"] / a_["rate"] for a_, b in zip(runs[codes[0]], runs[codes[1]])]
            res["ratio"] = ratio
            print(f"  ratio (second/first) of medians {ratio:.2f}; per round "
                  f"{', '.join(f'{x:.2f}' for x in pairs)}", file=sys.stderr)
        out[str(procs)] = res
    if a.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
