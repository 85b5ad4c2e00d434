#!/usr/bin/env python3
"""rivven tiered storage: the Spark tier job against the disk, reads across tiers, the hot cache.

  a build       a topic of --gib GiB of sealed segments: 2 partitions, segment.bytes 128 MiB
                (less for small --gib: ~4 segments per partition), 1000-byte values in calls of
                1000 records with wal.sync=none; then segment.ms is lowered for a moment and one
                record per partition rolls the last full segment, so every segment but a
                one-record active one is sealed. remote.storage.enable=true and
                local.retention.bytes=0 make every sealed segment eligible. The cold store is
                the default file://<data dir>/cold, on the same disk as the data dir.
  b baselines   what the disk allows, in this run: (1) sequential write with fdatasync, the
                sealed bytes written to one file in 8 MiB chunks, one fdatasync at the end
                (``dd bs=8M conv=fdatasync``); (2) a plain Python copy of the segment files
                (.log, .index, .timeindex; read + write in 8 MiB chunks + fdatasync per file,
                sources page-cached) -- the cold copy cannot beat either. Each runs --runs
                times (alternating; median, range), and (1) once more right after the Spark
                job, since this disk's speed varies from one second to the next.
  c tier job    ``rivven spark tier t --master local[2] --json`` as a real subprocess on a copy
                of the data dir (page-cached first): MB/s of sealed log bytes over the copy
                phase (``exec_s``: every task's copy of .log/.index/.timeindex to a temp name,
                fdatasync, rename, then the read-back of each copy for size and CRC32C --
                after Spark start-up), and over the whole run (spark-submit start-up, planning,
                the manifest commit and the local deletes included); each against baseline
                (1) and against a plain copy (2) run right before the job. Then the same job
                with the cold store in /dev/shm (tmpfs; --no-shm skips it): the copy phase
                when the disk does not limit it, i.e. the job's own cost; and the job on a
                tiny topic with the same number of tasks (~1 MiB segments): its copy phase is
                the job's fixed cost (Python workers, the first job). For reference, the
                in-process ``eng.maintenance.tier("t")`` (the same copy_segment, one segment after
                another, no Spark) on another identical copy, with a plain copy (2) right
                before it: MB/s of its copy phase (``copy_s``) and of the whole call.
  d reads       on the in-process copy, with ``eng.read_arrow`` in calls of 100,000 records,
                every partition from its start to its end, MB/s of log bytes (.log sizes):
                warm = local segments, page-cached, second of two passes in one engine;
                then the topic is tiered (all sealed segments go cold; the engine is reopened);
                cold first read = the first pass in a fresh engine (every cold segment is
                downloaded whole into .tier-cache and checked against the manifest; the cold
                objects are page-cached first), with the time spent in the downloads
                (cold.fetch: read, CRC32C, write of the cache file, no fsync) measured apart;
                cached = the second pass in that engine. cached/warm (issue target >= 50%),
                and the first read against a plain copy (b2) without fdatasync (as the
                cache's downloads) run right before it.
  e hot cache   one thread produces --hot-mib MiB (1000-byte values, calls of 100 records,
                wal.sync=none, one partition, one active segment) and after every call reads
                the new records with ``eng.read_arrow`` from where it left off (a tailing
                reader right behind the producer, same process). Timed: the reads only. With
                the default hot.max.bytes (32 MiB), then with hot.max.bytes=0 (reads go to the
                segment file, page-cached): hit rate (hot cache hits / lookups) and MB/s of log
                bytes read over the time spent in reads; then the same new batches once more
                through ``PartitionLog.batches`` (the raw CRC-checked batches under every read
                API, where the hot cache sits), timed apart. --runs runs of each setting,
                alternating, the median reported.

Before every timed phase os.sync() writes back the dirty pages of earlier steps (copies of the
data dir, downloads) and gc.collect() runs; every file of a data dir is read (page cache)
before a timed step that reads it.

Usage: python tests/bench/bench_tier.py [--gib 1.0] [--hot-mib 256] [--steps abcde] [--json]
       [--dir /tmp]
This is a benchmark script, not a pytest module.
"""

from __future__ import annotations

import argparse
import gc
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
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import cli_exe, log, print_rows  # noqa: E402

from engine import Engine  # noqa: E402
from engine.tiering import cold  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
PARTS = 2
VALUE = 1000
CALL = 1000  # records per produce call while building
ARROW_CHUNK = 100_000
CHUNK = 8 * MIB
TARGET_TIER = 300e6  # B/s of the copy phase (issue 6)
TARGET_CACHED = 0.5  # cached read / warm read


# ------------------------------------------------------------------ helpers
def files_under(d: str, suffixes: tuple[str, ...] = ("",)) -> list[str]:
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
                  if f.endswith(suffixes))


def warm(d: str) -> None:
    """Read every file under ``d`` once, so timed steps start page-cached."""
    for p in files_under(d):
        with open(p, "rb", buffering=0) as f:
            while f.read(CHUNK):
                pass


def settle() -> None:
    """Write back every dirty page (copytree, the cache's downloads...) and collect garbage,
    so a timed step does not pay for the writes of the step before it."""
    os.sync()
    gc.collect()


def log_bytes(d: str) -> int:
    return sum(os.path.getsize(p) for p in files_under(os.path.join(d, "topics"), (".log",)))


def mbs(nbytes: int, runs: list[float]) -> str:
    """'median MB/s (min-max)' of ``nbytes`` over each of ``runs`` seconds."""
    rates = sorted(nbytes / s / 1e6 for s in runs)
    if len(rates) == 1:
        return f"{rates[0]:.0f} MB/s"
    return f"{statistics.median(rates):.0f} MB/s ({rates[0]:.0f}-{rates[-1]:.0f})"


# ------------------------------------------------------------------ a: build
def build(d: str, gib: float) -> dict[str, Any]:
    seg = max(MIB, min(128 * MIB, int(gib * GIB / PARTS / 4)))
    per_part = int(gib * GIB / PARTS / (VALUE + 40))
    payload = os.urandom(VALUE)
    values = [payload] * CALL
    t = time.perf_counter()
    with Engine.open(d, sync=False) as eng:
        eng.create_topic("t", PARTS, {"segment.bytes": str(seg),
                                      "remote.storage.enable": "true",
                                      "local.retention.bytes": "0"})
        for p in range(PARTS):
            for _ in range(0, per_part, CALL):
                eng.produce_batch("t", values, partition=p)
        # roll the last full segment: one record after segment.ms has passed
        eng.alter_topic_config("t", {"segment.ms": "1"})
        time.sleep(0.05)
        for p in range(PARTS):
            eng.produce_batch("t", [b"last"], partition=p)
        eng.alter_topic_config("t", None, ["segment.ms"])
        plan = eng.maintenance.tier("t", dry_run=True)
        ends = eng.end_offsets("t")
    sealed = sum(r["bytes"] for p in plan["partitions"] for r in p["planned"])
    segs = sum(len(p["planned"]) for p in plan["partitions"])
    out = {"segment_bytes": seg, "records": sum(ends.values()), "sealed_bytes": sealed,
           "sealed_segments": segs, "log_bytes": log_bytes(d), "build_s": time.perf_counter() - t,
           "data_bytes": sum(os.path.getsize(p) for p in files_under(os.path.join(d, "topics"),
                                                                     (".log", ".index",
                                                                      ".timeindex")))}
    log(f"built {out['records']:,} records, {segs} sealed segments of {seg / MIB:.0f} MiB: "
        f"{sealed / 1e9:.2f} GB sealed in {out['build_s']:.1f} s")
    return out


# ------------------------------------------------------------------ b: baselines
def dd_fdatasync(d: str, nbytes: int) -> float:
    """Seconds to write ``nbytes`` to a new file in 8 MiB chunks, then fdatasync it."""
    buf = os.urandom(CHUNK)
    path = os.path.join(d, "dd.bin")
    settle()
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, buf[:min(left, CHUNK)])
        os.fdatasync(fd)
    finally:
        os.close(fd)
    dt = time.perf_counter() - t
    os.unlink(path)
    return dt


def plain_copy(src: str, dest: str, sealed: set[str], sync: bool = True) -> tuple[float, int]:
    """Seconds and bytes to copy the sealed segments' files (read + write + fdatasync each;
    without ``sync``, no fdatasync: what a download into the read cache does)."""
    paths = [p for p in files_under(os.path.join(src, "topics"), (".log", ".index", ".timeindex"))
             if os.path.splitext(p)[0] in sealed]
    os.makedirs(dest)
    buf = bytearray(CHUNK)
    total = 0
    settle()
    t = time.perf_counter()
    for i, p in enumerate(paths):
        fd = os.open(os.path.join(dest, f"{i}-{os.path.basename(p)}"),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(p, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    view = memoryview(buf)[:n]
                    while view:
                        view = view[os.write(fd, view):]
                    total += n
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)
    dt = time.perf_counter() - t
    shutil.rmtree(dest)
    return dt, total


def sealed_stems(d: str) -> set[str]:
    """Paths without suffix of the sealed segments (all but each partition's last)."""
    out: set[str] = set()
    for pdir in sorted(os.listdir(os.path.join(d, "topics", "t"))):
        full = os.path.join(d, "topics", "t", pdir)
        logs = sorted(n for n in os.listdir(full) if n.endswith(".log"))
        out.update(os.path.join(full, n[:-4]) for n in logs[:-1])
    return out


# ------------------------------------------------------------------ c: tier job
def run_spark(d: str, master: str) -> dict[str, Any]:
    env = dict(os.environ, RIVVEN_DATA_DIR=d)
    warm(d)
    settle()
    t = time.perf_counter()
    r = subprocess.run([cli_exe(), "spark", "tier", "t", "--master", master, "--json"],
                       env=env, capture_output=True, timeout=7200)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"spark tier failed: {r.stderr.decode()[-2000:]}")
    out = json.loads(r.stdout)
    moved = sum(p["bytes"] for p in out["partitions"])
    segs = sum(len(p["uploaded"]) for p in out["partitions"])
    return {"seconds": dt, "spark_s": out["spark_s"], "startup_s": out["startup_s"],
            "exec_s": out["exec_s"], "tool_s": out["seconds"], "bytes": moved,
            "segments": segs, "tasks": out["tasks"]}


def read_all(eng: Engine, parts: int) -> tuple[int, float]:
    """Every record of every partition with read_arrow; (records, seconds)."""
    settle()
    n = 0
    t = time.perf_counter()
    for p in range(parts):
        off = eng.start_offsets("t")[p]
        end = eng.end_offsets("t")[p]
        while off < end:
            tbl = eng.read_arrow("t", p, off, ARROW_CHUNK)
            if not tbl.num_rows:
                raise SystemExit(f"read stopped at t-{p} offset {off} (end {end})")
            off += tbl.num_rows
            n += tbl.num_rows
    return n, time.perf_counter() - t


def run_inproc(d: str, records: int, baseline: Any = None) -> dict[str, Any]:
    """d: warm reads, c: eng.maintenance.tier() in process, d: the first and the second read after it.
    ``baseline(sync)`` (the plain copy) runs right before the tier call (with fdatasync) and
    before the first cold read (without); its seconds are kept."""
    out: dict[str, Any] = {"log_bytes": log_bytes(d)}
    warm(d)
    with Engine.open(d) as eng:
        eng.read_arrow("t", 0, 0, 1)  # imports pyarrow
        for name in ("warm_1", "warm"):
            n, out[f"{name}_s"] = read_all(eng, PARTS)
            assert n == records, (n, records)
    log(f"warm read: {out['log_bytes'] / out['warm_s'] / 1e6:.0f} MB/s")
    if baseline is not None:
        out["plain_before_s"] = baseline(True)
    warm(d)
    settle()
    t = time.perf_counter()
    with Engine.open(d) as eng:
        res = eng.maintenance.tier("t")
    out["tier_s"] = time.perf_counter() - t
    out["tier_copy_s"] = res["copy_s"]
    out["tier_bytes"] = res["plan_bytes"]
    out["tier_segments"] = res["tasks"]
    log(f"in-process tier: {out['tier_bytes'] / out['tier_copy_s'] / 1e6:.0f} MB/s copy phase")
    cache = os.path.join(d, ".tier-cache")
    assert not os.path.exists(cache) or not os.listdir(cache)
    if baseline is not None:
        out["plain_before_cold_s"] = baseline(False)
    warm(os.path.join(d, "cold"))
    with Engine.open(d) as eng:
        st = eng.maintenance.tier_status("t")
        out["cold_bytes"] = sum(r["cold_bytes"] for r in st)
        out["local_bytes_after"] = sum(r["local_bytes"] for r in st)
        eng.read_arrow("t", 0, eng.end_offsets("t")[0] - 1, 1)
        fetch = cold.fetch
        spent = [0.0]

        def timed_fetch(uri: str, dest: str) -> tuple[int, int]:
            t = time.perf_counter()
            try:
                return fetch(uri, dest)
            finally:
                spent[0] += time.perf_counter() - t

        cold.fetch = timed_fetch  # (the cache looks it up on the module at each download)
        try:
            n, out["cold_s"] = read_all(eng, PARTS)
        finally:
            cold.fetch = fetch
        out["fetch_s"] = spent[0]
        assert n == records, (n, records)
        out["downloads"] = eng.cold_cache.stats()
        n, out["cached_s"] = read_all(eng, PARTS)
        assert n == records, (n, records)
    log(f"cold first read: {out['log_bytes'] / out['cold_s'] / 1e6:.0f} MB/s, cached: "
        f"{out['log_bytes'] / out['cached_s'] / 1e6:.0f} MB/s")
    return out


# ------------------------------------------------------------------ e: hot cache
def run_hot(d: str, mib: int, hot: str | None) -> dict[str, Any]:
    settings = {"wal.sync": "none"}
    if hot is not None:
        settings["hot.max.bytes"] = hot
    payload = os.urandom(VALUE)
    values = [payload] * 100
    calls = mib * MIB // (VALUE * 100)
    read_s = raw_s = 0.0
    got = nbytes = 0
    with Engine.open(d, settings=settings) as eng:
        eng.create_topic("h", 1)
        eng.read_arrow("h", 0, 0, 1)
        plog = eng._find.partition("h", 0)  # (the engine's own PartitionLog: internals, measured)
        settle()
        off = raw = 0
        t0 = time.perf_counter()
        for _ in range(calls):
            eng.produce_batch("h", values, partition=0)
            t = time.perf_counter()
            tbl = eng.read_arrow("h", 0, off, ARROW_CHUNK)
            t1 = time.perf_counter()
            for ref in plog.batches(raw, 1 << 20):  # the same bytes, below read_arrow
                raw = ref.header.next_offset
                nbytes += ref.header.size
            raw_s += time.perf_counter() - t1
            read_s += t1 - t
            off += tbl.num_rows
            got += tbl.num_rows
        wall = time.perf_counter() - t0
        assert got == calls * 100 and raw == got, (got, raw, calls)
        st = eng.maintenance.tier_status("h")[0]
    seg = log_bytes(d)
    return {"hot_max_bytes": hot or "default", "records": got, "log_bytes": seg,
            "batch_bytes": nbytes, "read_s": read_s, "batches_s": raw_s, "wall_s": wall,
            "hits": st["hot_hits"], "misses": st["hot_misses"], "hit_rate": st["hot_hit_rate"]}


# ------------------------------------------------------------------ report
def rows_of(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    data = res.get("data")
    mb = 1e6
    base = None
    pcb = res["plain_copy"]["bytes"] if "plain_copy" in res else 0
    if data:
        rows += [("-- input", "", ""),
                 ("sealed log", f"{data['sealed_bytes'] / 1e9:.2f} GB",
                  f"{data['sealed_segments']} segments of {data['segment_bytes'] / MIB:.0f} MiB, "
                  f"{data['records']:,} records, {PARTS} partitions")]
    if "dd" in res:
        base = res["dd"]["bytes"] / res["dd"]["seconds"]
        pc = res["plain_copy"]
        after = res["dd"].get("after_spark")
        rows += [("-- disk baselines (same run; median of --runs, range)", "", ""),
                 ("write + fdatasync, 8 MiB chunks", f"{base / mb:.0f} MB/s",
                  mbs(res["dd"]["bytes"], res["dd"]["runs"]) + (
                      f"; right after the Spark job: {res['dd']['bytes'] / after / mb:.0f} MB/s"
                      if after else "")),
                 ("plain copy of the segment files", f"{pc['bytes'] / pc['seconds'] / mb:.0f} MB/s",
                  mbs(pc["bytes"], pc["runs"]) + "; read + write + fdatasync per file")]
    if "spark" in res:
        s = res["spark"]
        copy = s["bytes"] / s["exec_s"]
        rows += [("-- tiering (MB/s of sealed log bytes)", "", ""),
                 ("spark tier local[2]: copy phase", f"{copy / mb:.0f} MB/s",
                  f"exec {s['exec_s']:.1f} s, {s['tasks']} tasks" + (
                      f"; {copy / base:.2f}x write+fdatasync" if base else "") + (
                      f"; {s['plain_before_s'] * copy / res['plain_copy']['bytes']:.2f}x the "
                      f"plain copy run just before ({pcb / s['plain_before_s'] / mb:.0f}"
                      " MB/s)" if s.get("plain_before_s") else "") +
                  f"; target >= 300 MB/s: {'MET' if copy >= TARGET_TIER else 'MISSED'}"),
                 ("spark tier local[2]: whole run", f"{s['bytes'] / s['seconds'] / mb:.0f} MB/s",
                  f"{s['seconds']:.1f} s: spark-submit {s['spark_s']:.1f} s (session "
                  f"{s['startup_s']:.1f} s), manifest + deletes "
                  f"{s['tool_s'] - s['spark_s']:.1f} s")]
    if "spark_tiny" in res:
        t = res["spark_tiny"]
        rows.append(("spark tier local[2], tiny segments", f"{t['exec_s']:.1f} s",
                     f"copy phase of {t['tasks']} tasks of ~1 MiB ({t['bytes'] / 1e6:.1f} MB): "
                     f"the job's fixed cost (Python workers, first job); whole run "
                     f"{t['seconds']:.1f} s"))
        if "spark" in res and res["spark"]["exec_s"] > t["exec_s"]:
            s = res["spark"]
            rows.append(("... copy phase minus that fixed cost",
                         f"{s['bytes'] / (s['exec_s'] - t['exec_s']) / mb:.0f} MB/s",
                         f"{s['exec_s'] - t['exec_s']:.1f} s"))
    if "spark_shm" in res:
        s = res["spark_shm"]
        rows.append(("spark tier local[2], cold store in memory",
                     f"{s['bytes'] / s['exec_s'] / mb:.0f} MB/s",
                     f"copy phase, exec {s['exec_s']:.1f} s (/dev/shm: what the job does when "
                     f"the disk does not limit it); whole run {s['seconds']:.1f} s"))
    if "inproc" in res:
        r = res["inproc"]
        copy = r["tier_bytes"] / r["tier_copy_s"]
        rows += [("in-process eng.maintenance.tier(): copy phase", f"{copy / mb:.0f} MB/s",
                  f"{r['tier_copy_s']:.1f} s" + (f"; {copy / base:.2f}x write+fdatasync" if base
                                                  else "") + (
                      f"; {r['plain_before_s'] * copy / res['plain_copy']['bytes']:.2f}x the "
                      f"plain copy run just before ({pcb / r['plain_before_s'] / mb:.0f}"
                      " MB/s)" if r.get("plain_before_s") else "")),
                 ("in-process eng.maintenance.tier(): whole call",
                  f"{r['tier_bytes'] / r['tier_s'] / mb:.0f} MB/s", f"{r['tier_s']:.1f} s")]
        lb = r["log_bytes"]
        w, c, k = lb / r["warm_s"], lb / r["cold_s"], lb / r["cached_s"]
        rows += [("-- reads (read_arrow, 100k records/call, MB/s of log)", "", ""),
                 ("warm (local, page-cached)", f"{w / mb:.0f} MB/s", f"{r['warm_s']:.2f} s"),
                 ("cold, first read (downloads)", f"{c / mb:.0f} MB/s",
                  f"{r['cold_s']:.2f} s, of which downloads (cold.fetch of "
                  f"{r['downloads']['downloaded_bytes'] / 1e9:.2f} GB) {r['fetch_s']:.2f} s = "
                  f"{r['downloads']['downloaded_bytes'] / r['fetch_s'] / mb:.0f} MB/s" + (
                      f"; first read {c * r['plain_before_cold_s'] / res['plain_copy']['bytes']:.2f}x"
                      " a plain copy without fdatasync run just before ("
                      f"{res['plain_copy']['bytes'] / r['plain_before_cold_s'] / mb:.0f} MB/s)"
                      if r.get("plain_before_cold_s") else "")),
                 ("cold, cached (second read)", f"{k / mb:.0f} MB/s",
                  f"{r['cached_s']:.2f} s; cached/warm {k / w:.2f} (target >= 0.5: "
                  f"{'MET' if k / w >= TARGET_CACHED else 'MISSED'})")]
    if "hot" in res:
        rows.append(("-- hot cache: tailing read_arrow behind produce_batch (100 records/call)",
                     "", ""))
        for h in res["hot"]:
            rate = "-" if h["hit_rate"] is None else f"{100 * h['hit_rate']:.1f}% hits"
            rows.append((f"hot.max.bytes={h['hot_max_bytes']}: read_arrow",
                         f"{h['log_bytes'] / h['read_s'] / mb:.0f} MB/s",
                         f"{rate} ({h['hits']:,} hits, {h['misses']:,} misses, both APIs); "
                         f"reads {h['read_s']:.2f} s of {h['wall_s']:.2f} s; "
                         + mbs(h["log_bytes"], h["read_s_runs"])))
            rows.append((f"hot.max.bytes={h['hot_max_bytes']}: PartitionLog.batches",
                         f"{h['batch_bytes'] / h['batches_s'] / mb:.0f} MB/s",
                         mbs(h["batch_bytes"], h["batches_s_runs"])))
        if len(res["hot"]) == 2:
            a, b = res["hot"]
            rows.append(("hot on / off", f"{b['read_s'] / a['read_s']:.2f}x",
                         f"read_arrow; PartitionLog.batches {b['batches_s'] / a['batches_s']:.2f}x"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--hot-mib", type=int, default=256)
    ap.add_argument("--steps", default="abcde")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=3, help="runs of each disk baseline")
    ap.add_argument("--shm", action=argparse.BooleanOptionalAction, default=True,
                    help="also run the Spark job with the cold store in /dev/shm (memory)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="rivven-bench-tier-", dir=a.dir)
    res: dict[str, Any] = {}
    try:
        src = os.path.join(scratch, "src")
        if set(a.steps) & set("abcd"):
            res["data"] = build(src, a.gib)
        if "b" in a.steps:
            nbytes = res["data"]["sealed_bytes"]
            runs = []
            copies = []
            warm(src)
            for _ in range(a.runs):
                runs.append(dd_fdatasync(scratch, nbytes))
                copies.append(plain_copy(src, os.path.join(scratch, "plain"),
                                         sealed_stems(src)))
            res["dd"] = {"bytes": nbytes, "seconds": statistics.median(runs), "runs": runs}
            res["plain_copy"] = {"bytes": copies[0][1],
                                 "seconds": statistics.median(c[0] for c in copies),
                                 "runs": [c[0] for c in copies]}
            log(f"write + fdatasync: {mbs(nbytes, runs)}; plain copy: "
                f"{mbs(copies[0][1], res['plain_copy']['runs'])}")
        def plain(sync: bool = True) -> float:
            warm(src)
            return plain_copy(src, os.path.join(scratch, "plain"), sealed_stems(src), sync)[0]

        if "c" in a.steps:
            d = os.path.join(scratch, "run-spark")
            shutil.copytree(src, d)
            before = plain() if "b" in a.steps else None
            log(f"running rivven spark tier --master {a.master}")
            res["spark"] = run_spark(d, a.master)
            res["spark"]["plain_before_s"] = before
            log(f"spark: {res['spark']}")
            shutil.rmtree(d)
            if "dd" in res:  # the disk again, right after the job (it varies)
                res["dd"]["after_spark"] = dd_fdatasync(scratch, res["dd"]["bytes"])
        if "c" in a.steps:  # the same number of tasks on ~1 MiB segments: the fixed cost
            d = os.path.join(scratch, "run-spark-tiny")
            tiny = build(d, 8 / 1024)
            res["spark_tiny"] = {**run_spark(d, a.master), "sealed_segments":
                                 tiny["sealed_segments"]}
            log(f"spark (tiny): {res['spark_tiny']}")
            shutil.rmtree(d)
        if "c" in a.steps and a.shm:
            d = os.path.join(scratch, "run-spark-shm")
            shutil.copytree(src, d)
            shm = tempfile.mkdtemp(prefix="rivven-bench-cold-", dir="/dev/shm")
            try:
                with Engine.open(d) as eng:
                    eng.alter_topic_config("t", {"remote.storage.uri": f"file://{shm}"})
                log(f"running rivven spark tier --master {a.master}, cold store in {shm}")
                res["spark_shm"] = run_spark(d, a.master)
                log(f"spark (shm): {res['spark_shm']}")
            finally:
                shutil.rmtree(shm, ignore_errors=True)
                shutil.rmtree(d)
        if set(a.steps) & set("cd"):
            d = os.path.join(scratch, "run-inproc")
            shutil.copytree(src, d)
            res["inproc"] = run_inproc(d, res["data"]["records"],
                                       plain if "b" in a.steps else None)
            shutil.rmtree(d)
        if "e" in a.steps:
            runs: dict[str | None, list[dict[str, Any]]] = {None: [], "0": []}
            for i in range(a.runs):  # alternating, median of the read times
                for hot in (None, "0"):
                    d = os.path.join(scratch, f"hot-{hot}-{i}")
                    runs[hot].append(run_hot(d, a.hot_mib, hot))
                    log(f"hot {hot}: {runs[hot][-1]}")
                    shutil.rmtree(d)
            res["hot"] = []
            for rs in runs.values():
                med = sorted(rs, key=lambda r: r["read_s"])[len(rs) // 2]
                res["hot"].append({**med, "read_s_runs": [r["read_s"] for r in rs],
                                   "batches_s": statistics.median(r["batches_s"] for r in rs),
                                   "batches_s_runs": [r["batches_s"] for r in rs]})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print_rows(rows_of(res), sys.stdout)


if __name__ == "__main__":
    main()
