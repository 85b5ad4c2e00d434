#!/usr/bin/env python3
"""rivven start-up: how long a command takes before and while it does its (small) work, and
how many of the project's modules it loads.

Commands, each a fresh ``python -m rivven_cli.main`` with PYTHONPATH = the source tree:

  python           python -c pass (the floor)
  help             rivven --help
  topic help       rivven topic --help
  topic list       rivven topic list on a data dir of --topics topics of 2 partitions
  complete cmd     a bash completion of a command name (rivven topi<TAB>)
  complete topic   a bash completion of a topic name (rivven topic describe t<TAB>)

Every figure is the median of --runs runs (default 7). With --base DIR (another checkout,
e.g. ``git worktree add /tmp/base main``) the same commands run from that tree too,
interleaved run by run (a busy machine slows both alike), and the ratio this / base is
printed. The trees are byte-compiled first (as ``make bytecode``; --no-compile to skip):
without .pyc files every run compiles every module it loads again.

Usage: python tests/bench/bench_startup.py [--base DIR] [--runs 7] [--topics 5] [--json]
This is a benchmark script, not a pytest module.
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
COUNT = ("import atexit, os, sys\n"
         "atexit.register(lambda: open(os.environ['MODULES_TO'], 'w').write(str(len("
         "[m for m in sys.modules if m.split('.')[0] in ('engine', 'rivven_cli')]))))\n"
         "from rivven_cli.main import main\nmain()\n")


def commands(data_dir: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """``{name: (rivven arguments, environment)}`` (None arguments: python -c pass)."""
    complete = {"_RIVVEN_COMPLETE": "complete_bash", "RIVVEN_DATA_DIR": data_dir}
    return {
        "python": ([], {}),
        "help": (["--help"], {}),
        "topic help": (["topic", "--help"], {}),
        "topic list": (["--data-dir", data_dir, "topic", "list"], {}),
        "complete cmd": ([], {**complete, "COMP_WORDS": "rivven topi", "COMP_CWORD": "1"}),
        "complete topic": ([], {**complete, "COMP_WORDS": "rivven topic describe t",
                                "COMP_CWORD": "3"}),
    }


def argv(name: str, args: list[str], code: str | None = None) -> list[str]:
    if name == "python":
        return [sys.executable, "-c", "pass"]
    if code is not None:
        return [sys.executable, "-c", code, *args]
    return [sys.executable, "-m", "rivven_cli.main", *args]


def env_of(tree: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RIVVEN_", "_RIVVEN"))}
    env.update(PYTHONPATH=tree, **extra)
    return env


def once(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - t


def modules(tree: str, name: str, args: list[str], extra: dict[str, str], cwd: str) -> int:
    if name == "python":
        return 0
    out = os.path.join(cwd, "modules.txt")
    subprocess.run(argv(name, args, COUNT), env=env_of(tree, {**extra, "MODULES_TO": out}),
                   cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    with open(out) as f:
        return int(f.read())


def make_data_dir(tree: str, path: str, topics: int) -> None:
    code = ("import sys\nfrom engine import Engine, Record\n"
            "with Engine.open(sys.argv[1]) as eng:\n"
            f"    for i in range({topics}):\n"
            "        eng.create_topic(f't{i}', 2)\n"
            "        eng.produce(f't{i}', [Record(value=b'v%d' % j) for j in range(100)])\n")
    subprocess.run([sys.executable, "-c", code, path], env=env_of(tree, {}), check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="another checkout to compare with (this / base)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--topics", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="do not byte-compile the trees")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    trees = {"this": ROOT} | ({"base": os.path.abspath(a.base)} if a.base else {})
    if not a.no_compile:
        for tree in trees.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", "engine", "rivven_cli"],
                           cwd=tree, check=True, stdout=subprocess.DEVNULL)
    scratch = tempfile.mkdtemp(prefix="rivven-bench-startup-")
    try:
        data_dir = os.path.join(scratch, "data")
        make_data_dir(ROOT, data_dir, a.topics)
        rows: dict[str, dict[str, Any]] = {}
        for name, (args, extra) in commands(data_dir).items():
            times: dict[str, list[float]] = {t: [] for t in trees}
            for tree in trees.values():  # (a warm-up run each: the page cache)
                once(argv(name, args), env_of(tree, extra), scratch)
            for _ in range(a.runs):
                for label, tree in trees.items():
                    times[label].append(once(argv(name, args), env_of(tree, extra), scratch))
            row: dict[str, Any] = {}
            for label, tree in trees.items():
                row[label] = {"median_s": round(statistics.median(times[label]), 4),
                              "runs_s": [round(x, 4) for x in times[label]],
                              "modules": modules(tree, name, args, extra, scratch)}
            if "base" in trees:
                row["ratio"] = round(row["this"]["median_s"] / row["base"]["median_s"], 2)
            rows[name] = row
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if a.json:
        print(json.dumps({"runs": a.runs, "trees": trees, "commands": rows}, indent=2))
        return
    print(f"median of {a.runs} runs, seconds (project modules loaded)")
    for name, row in rows.items():
        cells = [f"{row[t]['median_s']:.3f} ({row[t]['modules']:>3})" for t in trees]
        ratio = f"  this/base {row['ratio']:.2f}" if "ratio" in row else ""
        print(f"  {name:<15} " + "   ".join(f"{t}: {c}" for t, c in zip(trees, cells)) + ratio)


if __name__ == "__main__":
    main()
