"""The textbook group commit in C (``group_commit.c``) on this machine: the baseline that
tells what 4 threads can gain over one here, GIL or not.

Usage: python tests/bench/bench_group_commit_c.py [--rounds 3] [--seconds 1.5] [--dir /tmp]
Needs gcc. Prints calls/s for 1, 4 and 8 threads and the ratios to 1 thread, per round, for
0 and 50 µs of work per call, on a plain and a zero-filled file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--dir", default=None, help="parent of the scratch directory")
    a = ap.parse_args()
    if shutil.which("gcc") is None:
        sys.exit("bench_group_commit_c: gcc not found; install it (apt-get install gcc)")
    scratch = tempfile.mkdtemp(prefix="rivven-gc-", dir=a.dir)
    try:
        exe = os.path.join(scratch, "group_commit")
        subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "group_commit.c")],
                       check=True)
        for zero in (0, 1):
            for work in (0, 50):
                for r in range(a.rounds):
                    out = subprocess.run([exe, scratch, str(work), str(zero), str(a.seconds)],
                                         check=True, capture_output=True, text=True).stdout
                    rate = {int(t): float(c) for t, c in (ln.split() for ln in out.splitlines())}
                    print(f"{'zero-filled' if zero else 'plain'} file, {work:2d} us work, round "
                          f"{r + 1}: 1 thread {rate[1]:,.0f} calls/s; 4 threads "
                          f"{rate[4] / rate[1]:.2f}x; 8 threads {rate[8] / rate[1]:.2f}x",
                          flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
