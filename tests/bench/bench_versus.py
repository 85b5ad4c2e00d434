#!/usr/bin/env python3
"""An existing benchmark run on an older revision and on the working tree, alternately, in
the same conditions: the ratio (tree / revision) of every number its JSON output holds,
median over the rounds. How "nothing gets slower elsewhere" is checked.

  python tests/bench/bench_versus.py --rev cb7870c --rounds 3 -- \\
      tests/bench/bench_engine.py --records 300000 --runs 1 --skip-memory --json

The benchmark script is taken from each side (the revision runs its own copy), with
PYTHONPATH pointing at that side, so the rivven command it starts is that side's too.
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
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def leaves(doc: Any, prefix: str = "") -> dict[str, float]:
    """Every number of a JSON document, by its path (lists of numbers: their median)."""
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.update(leaves(v, f"{prefix}{k}."))
    elif isinstance(doc, list) and doc and all(isinstance(x, (int, float)) for x in doc):
        out[prefix[:-1]] = statistics.median(doc)
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        out[prefix[:-1]] = float(doc)
    return out


def run(tree: str, script: list[str]) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree)
    r = subprocess.run([sys.executable, os.path.join(tree, script[0]), *script[1:]], cwd=tree,
                       env=env, capture_output=True, text=True, timeout=7200)
    if r.returncode:
        raise SystemExit(f"{script[0]} failed in {tree}: {r.stderr[-3000:]}")
    return leaves(json.loads(r.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", required=True, help="the older revision (a commit, a tag)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("script", nargs=argparse.REMAINDER,
                    help="-- the benchmark and its arguments (it must print JSON on stdout)")
    a = ap.parse_args()
    script = a.script[1:] if a.script[:1] == ["--"] else a.script
    if not script:
        ap.error("name the benchmark after --")
    old = tempfile.mkdtemp(prefix="rivven-rev-")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", old, a.rev],
                   check=True, capture_output=True)
    try:
        results: dict[str, list[dict[str, float]]] = {"rev": [], "tree": []}
        for r in range(a.rounds):
            for side, tree in (("rev", old), ("tree", ROOT)) if r % 2 == 0 else (
                    ("tree", ROOT), ("rev", old)):
                results[side].append(run(tree, script))
                sys.stderr.write(f"round {r + 1}/{a.rounds}: {side} done\n")
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", old],
                       capture_output=True)
        shutil.rmtree(old, ignore_errors=True)
    keys = sorted(set(results["rev"][0]) & set(results["tree"][0]))
    report = {}
    for k in keys:
        ratios = [t[k] / r[k] for t, r in zip(results["tree"], results["rev"])
                  if k in t and k in r and r[k]]
        if ratios:
            report[k] = {"ratio": statistics.median(ratios), "rounds": ratios,
                         "rev": statistics.median(x[k] for x in results["rev"]),
                         "tree": statistics.median(x[k] for x in results["tree"])}
    print(json.dumps({"rev": a.rev, "script": script, "rounds": a.rounds, "figures": report},
                     indent=2))


if __name__ == "__main__":
    main()
