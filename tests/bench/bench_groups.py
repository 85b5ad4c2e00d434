#!/usr/bin/env python3
"""rivven consumer groups and retention: what a group costs over plain reads, commit latency,
and how fast retention / delete-records free space.

  1 consume     N (default 1M) records (10-byte key, 100-byte value) in 4 partitions, read back
                by eng.read() over every partition (baseline), by a group Consumer's poll()
                (500 per call) and by iterating the Consumer; records/s and the ratio to
                eng.read() in the same process.
  2 commit      durable commits of one partition's offset, one per call (fdatasync each), against
                SQLite (WAL, synchronous=FULL) committing one UPSERT per transaction, in this same
                process: commits/s and the ratio.
  3 cli         ``rivven consume -f '%v\\n'`` vs ``rivven consume --group G -f '%v\\n'`` (commits
                after every chunk) of the same topic to /dev/null: records/s and ratio.
  4 retention   a partition of --segments small segments (all past retention.ms) then
                ``apply_retention``: segments/s and bytes/s freed; and delete-records of half
                of another such partition.

Usage: python tests/bench/bench_groups.py [--records 1000000] [--commits 2000] [--segments 2000]
       [--steps 1234] [--json] [--dir /tmp]
This is a benchmark script, not a pytest module.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import cli_exe, log, make_records, print_rows  # noqa: E402

from engine import Engine  # noqa: E402

PARTS = 4


def fill(d: str, n: int) -> None:
    keys, vals, _ = make_records(n)
    with Engine.open(d, sync=False) as eng:
        eng.create_topic("t", PARTS, {"retention.ms": "-1"})
        step = n // PARTS
        for p in range(PARTS):
            for s in range(p * step, (p + 1) * step, 10_000):
                eng.produce_batch("t", vals[s:s + 10_000], keys=keys[s:s + 10_000], partition=p)


def step_consume(d: str, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Engine.open(d) as eng:
        ends = eng.end_offsets("t")
        total = sum(ends.values())
        t = time.perf_counter()
        got = 0
        for p in range(PARTS):
            off = 0
            while off < ends[p]:
                recs = eng.read("t", p, off, 5000)
                got += len(recs)
                off = recs[-1].offset + 1
        out["read"] = got / (time.perf_counter() - t)
        assert got == total
        for g, how in (("poll", "poll"), ("iter", "iter")):
            with eng.consumer(g, "t", enable_auto_commit=False, max_poll_records=500) as c:
                t = time.perf_counter()
                got = 0
                if how == "poll":
                    while got < total:
                        got += len(c.poll())
                else:
                    for _ in c:
                        got += 1
                        if got == total:
                            break
                out[how] = got / (time.perf_counter() - t)
                c.commit()
        log(f"consume: read {out['read']:,.0f}/s poll {out['poll']:,.0f}/s iter {out['iter']:,.0f}/s")
    return out


def step_commit(scratch: str, commits: int) -> dict[str, Any]:
    from engine.groups.offset_store import OffsetStore

    d = os.path.join(scratch, "commit")
    store = OffsetStore(os.path.join(d, "g"))
    store.commit({("t", 0): 0})
    lat = []
    t0 = time.perf_counter()
    for i in range(commits):
        t = time.perf_counter()
        store.commit({("t", 0): i})
        lat.append(time.perf_counter() - t)
    rivven = commits / (time.perf_counter() - t0)
    con = sqlite3.connect(os.path.join(d, "offsets.db"))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE o (g TEXT, t TEXT, p INT, off INT, PRIMARY KEY (g, t, p))")
    con.commit()
    t0 = time.perf_counter()
    for i in range(commits):
        con.execute("INSERT INTO o VALUES ('g','t',0,?) ON CONFLICT DO UPDATE SET off=excluded.off",
                    (i,))
        con.commit()
    sqlite = commits / (time.perf_counter() - t0)
    con.close()
    size = os.path.getsize(os.path.join(d, "g", "offsets.log"))
    out = {"rivven": rivven, "sqlite": sqlite, "p50_ms": statistics.median(lat) * 1000,
           "p99_ms": sorted(lat)[int(len(lat) * 0.99)] * 1000, "file_bytes": size}
    log(f"commit: {rivven:,.0f}/s vs SQLite {sqlite:,.0f}/s, file {size} B")
    return out


def step_cli(d: str) -> dict[str, Any]:
    exe = cli_exe()
    env = dict(os.environ, RIVVEN_DATA_DIR=d)
    out: dict[str, Any] = {}
    with Engine.open(d, read_only=True) as eng:
        total = sum(eng.end_offsets("t").values())
    for name, extra in (("plain", []), ("group", ["--group", "cli"])):
        best = None
        for _ in range(2):
            if extra:
                subprocess.run([exe, "group", "delete", "cli", "--yes"], env=env,
                               capture_output=True)
            t = time.perf_counter()
            subprocess.run([exe, "consume", "t", "-f", "%v\\n", *extra], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        out[name] = total / best
    log(f"cli: plain {out['plain']:,.0f}/s group {out['group']:,.0f}/s")
    return out


def step_retention(scratch: str, segments: int) -> dict[str, Any]:
    d = os.path.join(scratch, "ret")
    keys, vals, _ = make_records(10 * segments)
    with Engine.open(d, sync=False) as eng:
        for topic in ("r", "dr"):
            eng.create_topic(topic, 1, {"segment.bytes": "1200", "retention.ms": "-1"})
            for s in range(0, 10 * segments, 10):  # 10 records (~1.2 KB) per segment
                eng.produce_batch(topic, vals[s:s + 10], keys=keys[s:s + 10], partition=0,
                                  timestamps=1000)
    with Engine.open(d) as eng:
        eng.alter_topic_config("r", {"retention.ms": "1000"})
        t = time.perf_counter()
        rows = eng.maintenance.apply_retention("r")
        dt = time.perf_counter() - t
        freed = sum(r["bytes"] for r in rows)
        end = eng.end_offsets("dr")[0]
        t = time.perf_counter()
        (dr,) = eng.maintenance.delete_records("dr", {0: end // 2})
        dt2 = time.perf_counter() - t
    out = {"segments": len(rows), "seconds": dt, "segments_per_s": len(rows) / dt,
           "mb_per_s": freed / dt / 1e6, "delete_records_segments": len(dr["deleted_segments"]),
           "delete_records_s": dt2}
    log(f"retention: {len(rows)} segments in {dt:.2f} s; delete-records "
        f"{len(dr['deleted_segments'])} in {dt2:.2f} s")
    return out


def build_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if "consume" in res:
        c = res["consume"]
        rows += [("-- 1 consume (1 process, 4 partitions)", "", ""),
                 ("eng.read() baseline", f"{c['read'] / 1e6:.2f} M rec/s", ""),
                 ("Consumer.poll() 500/call", f"{c['poll'] / 1e6:.2f} M rec/s",
                  f"{c['poll'] / c['read']:.2f}x read()"),
                 ("for rec in Consumer", f"{c['iter'] / 1e6:.2f} M rec/s",
                  f"{c['iter'] / c['read']:.2f}x read()")]
    if "commit" in res:
        c = res["commit"]
        rows += [("-- 2 durable offset commits (fdatasync each)", "", ""),
                 ("OffsetStore.commit", f"{c['rivven']:,.0f} /s",
                  f"{c['rivven'] / c['sqlite']:.2f}x SQLite FULL upsert ({c['sqlite']:,.0f}/s)"),
                 ("latency p50 / p99", f"{c['p50_ms']:.2f} / {c['p99_ms']:.2f} ms", ""),
                 ("offsets.log after the run", f"{c['file_bytes']} B", "(rewritten as it grows)")]
    if "cli" in res:
        c = res["cli"]
        rows += [("-- 3 rivven consume -f '%v\\n' > /dev/null", "", ""),
                 ("without a group", f"{c['plain'] / 1e6:.2f} M rec/s", ""),
                 ("--group (commit per chunk)", f"{c['group'] / 1e6:.2f} M rec/s",
                  f"{c['group'] / c['plain']:.2f}x without")]
    if "retention" in res:
        r = res["retention"]
        rows += [("-- 4 retention", "", ""),
                 ("apply_retention", f"{r['segments_per_s']:,.0f} segments/s",
                  f"{r['segments']} segments in {r['seconds']:.2f} s"),
                 ("delete_records (half the log)", f"{r['delete_records_s']:.2f} s",
                  f"{r['delete_records_segments']} segments")]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--segments", type=int, default=2000)
    ap.add_argument("--steps", default="1234")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="rivven-bench-groups-", dir=a.dir)
    res: dict[str, Any] = {}
    try:
        d = os.path.join(scratch, "data")
        if "1" in a.steps or "3" in a.steps:
            fill(d, a.records)
        if "1" in a.steps:
            res["consume"] = step_consume(d, a.records)
        if "2" in a.steps:
            res["commit"] = step_commit(scratch, a.commits)
        if "3" in a.steps:
            res["cli"] = step_cli(d)
        if "4" in a.steps:
            res["retention"] = step_retention(scratch, a.segments)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print_rows(build_rows(res), sys.stdout)


if __name__ == "__main__":
    main()
