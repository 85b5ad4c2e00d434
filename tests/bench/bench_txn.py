#!/usr/bin/env python3
"""rivven transactions: what a transaction costs over the same produce calls without one.

One round is 10 produce calls of 1000 records (100-byte values, 10-byte keys) to a topic of
2 partitions, durable (wal.sync=always): each call to one partition, alternating
(``--spread``: each call's records spread over both by key):
  plain   eng.produce_batch, each call durable when it returns
  txn     begin, the same calls through a TransactionalProducer, commit (durable on return)
``--offsets`` adds a group's offsets to each round, as a consume-transform-produce loop does:
plain commits them after its calls (the group's offsets.log, fdatasynced), txn sends them
with ``send_offsets`` before its commit.
Each mode has an Engine (data dir) of its own in the same process, so that each pays for its
own checkpoints (every 64 MiB of its WAL, the default): in one shared Engine a checkpoint
(fsync of every partition written, ~50 ms here) lands in whichever mode's call crosses the
threshold, and at this fixed rhythm successive ones keep landing in the same mode's turn.
Rounds alternate plain / txn, which one goes first alternating too. It prints records/s of
each, the ratio txn / plain (issue 15's bar: >= 0.8; per run, and the median of ``--runs``),
and the commit latency p50 / p99 over all runs.

Usage: python tests/bench/bench_txn.py [--rounds 300] [--runs 5] [--spread] [--offsets]
       [--json] [--dir /tmp]
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


def run(rounds: int, spread: bool, base: str | None, commits: list[float],
        offsets: bool = False) -> dict[str, float]:
    from engine.groups.membership import group_dir
    from engine.groups.offset_store import OffsetStore

    vals = [os.urandom(50).hex().encode() for _ in range(RECORDS)]
    keys = [b"k%09d" % i for i in range(RECORDS)]
    times = {"plain": 0.0, "txn": 0.0}

    def part(i: int) -> int | None:
        return None if spread else i % 2

    d = tempfile.mkdtemp(dir=base, prefix="bench-txn-")
    try:
        with Engine.open(os.path.join(d, "plain")) as plain, \
                Engine.open(os.path.join(d, "txn")) as eng:
            plain.create_topic("t", 2, {"retention.ms": "-1"})
            eng.create_topic("t", 2, {"retention.ms": "-1"})
            tp = eng.producer(transactional_id="bench")
            store = OffsetStore(group_dir(os.path.join(d, "plain"), "g"))
            done = [0]

            def plain_round() -> None:
                t = time.perf_counter()
                for i in range(CALLS):
                    plain.produce_batch("t", vals, keys=keys, partition=part(i))
                if offsets:
                    done[0] += 1
                    store.commit({("in", 0): done[0]})
                times["plain"] += time.perf_counter() - t

            def txn_round() -> None:
                t = time.perf_counter()
                tp.begin()
                for i in range(CALLS):
                    tp.produce_batch("t", vals, keys=keys, partition=part(i))
                if offsets:
                    tp.send_offsets("g", {("in", 0): done[0] + 1})
                c = time.perf_counter()
                tp.commit()
                end = time.perf_counter()
                commits.append((end - c) * 1000)
                times["txn"] += end - t

            for r in range(rounds):
                for f in ((plain_round, txn_round) if r % 2 == 0 else (txn_round, plain_round)):
                    f()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    n = rounds * CALLS * RECORDS
    return {"plain": n / times["plain"], "txn": n / times["txn"],
            "ratio": times["plain"] / times["txn"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--spread", action="store_true")
    ap.add_argument("--offsets", action="store_true")
    args = ap.parse_args()
    commits: list[float] = []
    runs = [run(args.rounds, args.spread, args.dir, commits, args.offsets)
            for _ in range(args.runs)]
    med = statistics.median
    commits.sort()
    out = {"plain_records_per_s": round(med(r["plain"] for r in runs)),
           "txn_records_per_s": round(med(r["txn"] for r in runs)),
           "ratios": [round(r["ratio"], 3) for r in runs],
           "ratio": round(med(r["ratio"] for r in runs), 3),
           "commit_ms_p50": round(med(commits), 3),
           "commit_ms_p99": round(commits[min(len(commits) - 1, int(len(commits) * 0.99))], 3)}
    print(json.dumps(out, indent=2) if args.json else
          "\n".join(f"{k:22} {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
