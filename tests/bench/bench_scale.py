#!/usr/bin/env python3
"""Many partitions: a data dir of 100 topics x 100 partitions (10 records each), under the
usual open-file limit of 1024 (soft and hard).

  open+produce   a fresh process: Engine.open, then one produce to one partition (imports
                 not counted), median of 5
  topic list     ``rivven topic list`` wall time, median of 5
  round robin    produce calls of 1000 records, durable, to 1,000 partitions in turn, paired
                 with the same calls to one partition (alternating blocks, same process);
                 the ratio is the target (>= 0.5)
  idle memory    RSS growth of a process that wrote to all 10,000 partitions once, per
                 partition; its open descriptors then (bounded by files.max.open)

Usage: python tests/bench/bench_scale.py [--topics 100] [--partitions 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIMIT = 1024


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def python(code: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                       capture_output=True, text=True, preexec_fn=limited, timeout=3600)
    if r.returncode:
        raise SystemExit(f"benchmark step failed: {r.stderr[-3000:]}")
    return r.stdout


def build(d: str, topics: int, partitions: int) -> float:
    t = time.perf_counter()
    python("""
        import sys
        from engine import Engine, Record
        topics, parts = int(sys.argv[2]), int(sys.argv[3])
        with Engine.open(sys.argv[1], sync=False) as eng:
            for i in range(topics):
                eng.create_topic(f"t{i:03d}", partitions=parts)
            recs = [Record(b"k", b"v" * 100)] * 10
            for i in range(topics):
                for p in range(parts):
                    eng.produce(f"t{i:03d}", recs, partition=p)
        """, d, str(topics), str(partitions))
    return time.perf_counter() - t


def open_and_produce(d: str) -> float:
    return float(python("""
        import sys, time
        from engine import Engine, Record
        t = time.perf_counter()
        with Engine.open(sys.argv[1]) as eng:
            eng.produce("t050", [Record(b"k", b"v")], partition=7)
            print(time.perf_counter() - t)
        """, d))


def topic_list(d: str) -> float:
    exe = os.path.join(os.path.dirname(sys.executable), "rivven")
    t = time.perf_counter()
    subprocess.run([exe, "--data-dir", d, "topic", "list"], check=True, stdout=subprocess.DEVNULL,
                   preexec_fn=limited, timeout=600)
    return time.perf_counter() - t


def round_robin(d: str) -> dict[str, float]:
    out = python("""
        import json, os, sys, time
        from engine import Engine, Record
        recs = [Record(b"k%09d" % i, os.urandom(50).hex().encode()) for i in range(1000)]
        rates = {"one": [], "many": []}
        with Engine.open(sys.argv[1]) as eng:
            eng.create_topic("one", partitions=1)
            eng.create_topic("many", partitions=1000)
            for p in range(1000):
                eng.produce("many", recs[:1], partition=p)
            i = 0
            for block in range(8):
                for name in ("one", "many"):
                    t = time.perf_counter()
                    for _ in range(250):
                        eng.produce(name, recs, partition=i % 1000 if name == "many" else 0)
                        i += 1
                    rates[name].append(250_000 / (time.perf_counter() - t))
        print(json.dumps(rates))
        """, d)
    rates = json.loads(out)
    one, many = statistics.median(rates["one"]), statistics.median(rates["many"])
    return {"one_partition": one, "thousand_partitions": many, "ratio": many / one}


def idle_memory(d: str) -> dict[str, float]:
    out = python("""
        import json, os, sys
        from engine import Engine, Record
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with Engine.open(sys.argv[1], sync=False) as eng:
            names = [m.name for m in eng.topics()]
            eng.produce(names[0], [Record(b"k", b"v")], partition=0)
            before = rss()
            n = 0
            for name in names:
                for p in range(eng.topic(name).partitions):
                    eng.produce(name, [Record(b"k", b"v")], partition=p)
                    n += 1
            after = rss()
            fds = len(os.listdir("/proc/self/fd"))
        print(json.dumps({"partitions": n, "bytes_per_partition": (after - before) / n,
                          "open_fds": fds}))
        """, d)
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rivven-scale-")
    try:
        d = os.path.join(root, "data")
        report: dict[str, Any] = {"partitions": a.topics * a.partitions, "nofile_limit": LIMIT}
        report["build_s"] = build(d, a.topics, a.partitions)
        report["open_first_produce_s"] = statistics.median(open_and_produce(d) for _ in range(5))
        report["topic_list_s"] = statistics.median(topic_list(d) for _ in range(5))
        report["idle"] = idle_memory(d)
        report["round_robin"] = round_robin(os.path.join(root, "rr"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps(report, indent=2))
        return
    rr, idle = report["round_robin"], report["idle"]
    print(f"{report['partitions']:,} partitions ({a.topics} topics x {a.partitions}), "
          f"open-file limit {LIMIT}")
    print(f"  Engine.open + first produce   {report['open_first_produce_s']:.3f} s")
    print(f"  rivven topic list             {report['topic_list_s']:.3f} s")
    print(f"  idle partition memory         {idle['bytes_per_partition'] / 1024:.1f} KiB "
          f"({idle['partitions']:,} written once; {idle['open_fds']} descriptors open)")
    print(f"  round robin, 1000 partitions  {rr['thousand_partitions']:,.0f} rec/s vs one "
          f"partition {rr['one_partition']:,.0f} rec/s = {rr['ratio']:.2f}x")


if __name__ == "__main__":
    main()
