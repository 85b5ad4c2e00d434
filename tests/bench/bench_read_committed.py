#!/usr/bin/env python3
"""rivven read_committed: reading a topic where 1% of the transactions aborted, with
read_committed against read_uncommitted in the same process, alternating (goal >= 0.9x).

A topic of --txns transactions of 10 x 1000 records (100-byte values) on one partition, 1% of
them aborted, is read whole with read_arrow at each isolation level in turn.

Usage: python tests/bench/bench_read_committed.py [--rounds 5] [--txns 200] [--json] [--dir /tmp]
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

from engine import Engine, Record  # noqa: E402

BATCH = 1000
VALUE = b"v" * 100


def records(n: int) -> list[Record]:
    return [Record(key=b"k%d" % i, value=VALUE) for i in range(n)]

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--txns", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    base = tempfile.mkdtemp(dir=a.dir)
    try:
        d = os.path.join(base, "r")
        build_aborted(d, a.txns)
        unc, com = [], []
        for r in range(a.rounds):
            for level in (("read_uncommitted", "read_committed") if r % 2 == 0 else
                          ("read_committed", "read_uncommitted")):
                (com if level == "read_committed" else unc).append(read_rate(d, level))
        med = statistics.median
        out = {"read_committed_vs_uncommitted": med(com) / med(unc),
               "read_committed_records_per_s": med(com),
               "read_uncommitted_records_per_s": med(unc)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for k_, v in out.items():
            print(f"{k_:34s} {v:,.3f}")


if __name__ == "__main__":
    main()
