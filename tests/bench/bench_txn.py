#!/usr/bin/env python3
"""rivven transactions: what a transaction costs over the same produce calls without one.

One round is 10 produce calls of 1000 records (100-byte values, 10-byte keys) to a topic of
2 partitions, durable (wal.sync=always): each call to one partition, alternating
(``--spread``: each call's records spread over both by key):
  plain   eng.produce_batch, each call durable when it returns
  txn     begin, the same calls through a TransactionalProducer, commit (durable on return)
Rounds alternate plain / txn in one process; it prints records/s of each, the ratio
txn / plain (issue 15's bar: >= 0.8), and the commit latency p50 / p99.

Usage: python tests/bench/bench_txn.py [--rounds 200] [--json] [--dir /tmp]
This is a benchmark script, not a pytest module.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from engine import Engine  # noqa: E402

CALLS, RECORDS = 10, 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--spread", action="store_true")
    args = ap.parse_args()
    d = tempfile.mkdtemp(dir=args.dir, prefix="bench-txn-")
    vals = [os.urandom(50).hex().encode() for _ in range(RECORDS)]
    keys = [b"k%09d" % i for i in range(RECORDS)]
    times = {"plain": 0.0, "txn": 0.0}

    def part(i: int) -> int | None:
        return None if args.spread else i % 2

    commits = []
    try:
        with Engine.open(d) as eng:
            eng.create_topic("plain", 2, {"retention.ms": "-1"})
            eng.create_topic("txn", 2, {"retention.ms": "-1"})
            tp = eng.producer(transactional_id="bench")
            for _ in range(args.rounds):
                t = time.perf_counter()
                for i in range(CALLS):
                    eng.produce_batch("plain", vals, keys=keys, partition=part(i))
                times["plain"] += time.perf_counter() - t
                t = time.perf_counter()
                tp.begin()
                for i in range(CALLS):
                    tp.produce_batch("txn", vals, keys=keys, partition=part(i))
                c = time.perf_counter()
                tp.commit()
                end = time.perf_counter()
                commits.append((end - c) * 1000)
                times["txn"] += end - t
    finally:
        shutil.rmtree(d, ignore_errors=True)
    n = args.rounds * CALLS * RECORDS
    commits.sort()
    out = {"plain_records_per_s": round(n / times["plain"]),
           "txn_records_per_s": round(n / times["txn"]),
           "ratio": round(times["plain"] / times["txn"], 3),
           "commit_ms_p50": round(statistics.median(commits), 3),
           "commit_ms_p99": round(commits[min(len(commits) - 1, int(len(commits) * 0.99))], 3)}
    print(json.dumps(out, indent=2) if args.json else
          "\n".join(f"{k:22} {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
