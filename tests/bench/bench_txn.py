#!/usr/bin/env python3
"""rivven exactly-once: the cost of idempotence, transactions and read_committed, each as a
ratio against its baseline run in the same process, alternating (these machines are noisy).

  idempotent     eng.producer().produce, 1000 records/call, durable (wal.sync=always),
                 against eng.produce of the same calls                      goal >= 0.9x
  transaction    begin, 10 calls x 1000 records over 2 partitions, commit, against the same
                 10 calls without a transaction; commit latency p50/p99     goal >= 0.8x
  read_committed a topic where 1% of the transactions aborted, read whole with
                 read_committed against read_uncommitted                    goal >= 0.9x

Usage: python tests/bench/bench_txn.py [--rounds 5] [--calls 200] [--json] [--dir /tmp]
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
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from engine import Engine, Record  # noqa: E402

BATCH = 1000
VALUE = b"v" * 100


def records(n: int) -> list[Record]:
    return [Record(key=b"k%d" % i, value=VALUE) for i in range(n)]


def produce_rate(d: str, calls: int, idempotent: bool) -> float:
    """Records/s of ``calls`` produce calls of BATCH records to one partition."""
    recs = records(BATCH)
    with Engine.open(d) as eng:
        eng.create_topic("t", 1, if_not_exists=True)
        send = eng.producer().produce if idempotent else eng.produce
        send("t", recs[:1], partition=0)  # warm: WAL stream, partition lock
        t = time.perf_counter()
        for _ in range(calls):
            send("t", recs, partition=0)
        return calls * BATCH / (time.perf_counter() - t)


def txn_rate(d: str, txns: int, transactional: bool) -> tuple[float, list[float]]:
    """Records/s of ``txns`` rounds of 10 calls x BATCH records over 2 partitions (each round
    a transaction when ``transactional``), and the commit latencies (s)."""
    recs = records(BATCH)
    commits = []
    with Engine.open(d) as eng:
        eng.create_topic("t", 2, if_not_exists=True)
        tp = eng.producer(transactional_id="bench") if transactional else None
        t = time.perf_counter()
        for _ in range(txns):
            if tp is not None:
                tp.begin()
            for i in range(10):
                (tp.produce if tp is not None else eng.produce)("t", recs, partition=i % 2)
            if tp is not None:
                c = time.perf_counter()
                tp.commit()
                commits.append(time.perf_counter() - c)
        return txns * 10 * BATCH / (time.perf_counter() - t), commits


def build_aborted(d: str, txns: int) -> int:
    """A topic of ``txns`` transactions of 10 x BATCH records, 1% of them aborted."""
    recs = records(BATCH)
    with Engine.open(d) as eng:
        eng.create_topic("r", 1)
        tp = eng.producer(transactional_id="build")
        for n in range(txns):
            tp.begin()
            for _ in range(10):
                tp.produce("r", recs, partition=0)
            (tp.abort if n % 100 == 50 else tp.commit)()
        return eng.end_offsets("r")[0]


def read_rate(d: str, level: str) -> float:
    with Engine.open(d, read_only=True) as eng:
        t = time.perf_counter()
        offset, n = 0, 0
        end = eng.end_offsets("r")[0]
        while offset < end:
            got = eng.read_arrow("r", 0, offset, 50_000, isolation_level=level)
            if got.num_rows == 0:
                break
            n += got.num_rows
            offset = got.column("offset")[-1].as_py() + 1
        return n / (time.perf_counter() - t)


def fresh(base: str, name: str) -> str:
    d = os.path.join(base, name)
    shutil.rmtree(d, ignore_errors=True)
    return d


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    base = tempfile.mkdtemp(dir=a.dir)
    out: dict[str, Any] = {}
    try:
        plain, idem = [], []
        plain_t, txn_t, commits = [], [], []
        for r in range(a.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for flag in order:
                (idem if flag else plain).append(produce_rate(fresh(base, "p"), a.calls, flag))
            for flag in order:
                rate, lat = txn_rate(fresh(base, "x"), max(1, a.calls // 10), flag)
                (txn_t if flag else plain_t).append(rate)
                commits += lat
        d = fresh(base, "r")
        build_aborted(d, max(100, a.calls // 2))
        unc, com = [], []
        for r in range(a.rounds):
            for level in (("read_uncommitted", "read_committed") if r % 2 == 0 else
                          ("read_committed", "read_uncommitted")):
                (com if level == "read_committed" else unc).append(read_rate(d, level))
        med = statistics.median
        out = {
            "idempotent_vs_plain": med(idem) / med(plain),
            "idempotent_records_per_s": med(idem), "plain_records_per_s": med(plain),
            "transaction_vs_plain": med(txn_t) / med(plain_t),
            "commit_p50_ms": pct(commits, 0.5) * 1000, "commit_p99_ms": pct(commits, 0.99) * 1000,
            "read_committed_vs_uncommitted": med(com) / med(unc),
            "read_committed_records_per_s": med(com),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k:34s} {v:,.3f}")


if __name__ == "__main__":
    main()
