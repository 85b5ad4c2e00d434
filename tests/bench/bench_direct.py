#!/usr/bin/env python3
"""Where direct appends (written once, straight to the segment) beat the WAL, by batch size
and by producing threads: how ``append.direct.bytes`` was chosen (docs/BENCHMARKS.md).

For each batch size, durable ``produce_batch`` calls of that many bytes run with every batch
through the WAL (``append.direct.bytes=-1``) and with every batch direct (``0``), rounds
alternating in one process; then 1 and 4 threads, each to its own partition. Prints
records/s and the direct/WAL ratio.

Usage: python tests/bench/bench_direct.py [--seconds 1.5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from engine import Engine  # noqa: E402

VALUE = 100  # bytes per value (about 112 bytes per record in a batch)
CALLS = (64, 128, 256, 384, 448, 512, 1000)  # records per call, one thread


def run(root: str, setting: str, per_call: int, threads: int, seconds: float) -> float:
    d = tempfile.mkdtemp(dir=root)
    try:
        with Engine.open(d, settings={"append.direct.bytes": setting}) as eng:
            eng.create_topic("t", partitions=threads)
            vals = [os.urandom(VALUE // 2).hex().encode() for _ in range(per_call)]
            done = [0] * threads
            stop = time.perf_counter() + seconds

            def work(p: int) -> None:
                while time.perf_counter() < stop:
                    eng.produce_batch("t", vals, partition=p)
                    done[p] += per_call

            t0 = time.perf_counter()
            ts = [threading.Thread(target=work, args=(p,)) for p in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            eng.checkpoint()
            return sum(done) / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rivven-direct-")
    cases = [(n, 1) for n in CALLS] + [(1000, 4), (128, 4)]
    try:
        print(f"{'records/call':>12} {'~batch KB':>9} {'threads':>7} {'WAL rec/s':>12} "
              f"{'direct rec/s':>12} {'direct/WAL':>10}")
        for per_call, threads in cases:
            wal, direct = [], []
            for _ in range(a.rounds):
                wal.append(run(root, "-1", per_call, threads, a.seconds))
                direct.append(run(root, "0", per_call, threads, a.seconds))
            w, dd = statistics.median(wal), statistics.median(direct)
            print(f"{per_call:>12} {per_call * (VALUE + 12) / 1000:>9.0f} {threads:>7} "
                  f"{w:>12,.0f} {dd:>12,.0f} {dd / w:>9.2f}x", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
