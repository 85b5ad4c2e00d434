#!/usr/bin/env python3
"""rivven durability costs: WAL produce, group commit, recovery after kill -9, verify speed.

  1 durable produce   N (default 1M) records (10-byte key, 100-byte value, the records of
                      bench_engine.py) in calls of 1000 to one partition, default settings
                      (wal.sync=always: one WAL fdatasync per call, segment written after it),
                      produce_batch and produce(list of Record); against SQLite (WAL,
                      synchronous=FULL, COMMIT per 1000 rows, bench_engine.run_sqlite) run in
                      this same process; and produce_batch with {"wal.sync": "none"} for reference.
                      WAL fsyncs per call = eng.wal.fsyncs / calls (rotations and checkpoints
                      included); "all fsyncs" also counts segment, index and directory syncs.
  2 group commit      10 records (same shape) per call for --seconds, after --warmup seconds not
                      counted: 1 thread; 4 threads to the same partition; 4 threads to 4
                      partitions (one each). records/s, ratio to
                      1 thread (target >= 3x) and WAL fsyncs per call.
  3 kill -9 recovery  a child produces ~--gib GiB (1000-byte values, calls of 1000, default
                      settings plus checkpoint.interval.bytes=64 MiB) into one partition
                      (segment.bytes 1 GiB: one active segment), prints READY, and gets SIGKILL.
                      A fresh copy of that state is recovered in a fresh subprocess: Engine.open
                      (replays the dead WAL stream, loads the partition from its checkpoint) +
                      the first produce of one record. Then copies without the .checkpoint are
                      recovered the same way: the whole active segment is scanned (MB/s). Each
                      variant runs --recoveries times (a new copy each), median reported.
                      Page cache: every file is read just before each timed subprocess (warm);
                      fincore reports the residency of the .log.
  4 verify            ``rivven segment verify`` over the recovered data dir of step 3 (page
                      cached), run twice, the second reported: GB/s = bytes of .log / wall s;
                      and in-process engine.tools.verify.verify_partition (second of two runs).

Usage: python tests/bench/bench_durability.py [--records 1000000] [--runs 3] [--seconds 5]
       [--gib 1.0] [--recoveries 3] [--steps 1234] [--json] [--dir /tmp]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import CHUNK, cli_exe, log, make_records, print_rows, run_sqlite  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
TARGET_GROUP = 3.0  # 4 threads / 1 thread
CRASH_CHUNK = 1000  # records per call in the crash child
CRASH_VALUE = 1000  # value bytes in the crash child
SMALL_CALL = 10  # records per call in the group-commit test
CKPT_BYTES = 64 << 20


# ------------------------------------------------------------------ helpers
class FsyncCounter:
    """Counts every os.fsync / os.fdatasync of this process while active (the engine looks
    them up on the os module at call time)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> FsyncCounter:
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)
            self._saved[name] = real

            def wrapped(fd: int, _real: Any = real) -> None:
                with self._lock:
                    self.count += 1
                _real(fd)

            setattr(os, name, wrapped)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, real in self._saved.items():
            setattr(os, name, real)


def wal_fsyncs(eng: Any) -> int:
    return eng.wal.fsyncs if eng.wal is not None else 0


def tree_bytes(d: str, suffix: str = "") -> int:
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            if n.endswith(suffix):
                try:
                    total += os.path.getsize(os.path.join(root, n))
                except OSError:
                    pass
    return total


def warm(d: str) -> int:
    """Read every file under ``d`` (puts it in the page cache); returns bytes read."""
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                while True:
                    chunk = os.read(fd, 8 * MIB)
                    if not chunk:
                        break
                    total += len(chunk)
            finally:
                os.close(fd)
    return total


def resident(path: str) -> float | None:
    """Fraction of ``path`` in the page cache (util-linux fincore), None if unknown."""
    exe = shutil.which("fincore")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "--json", "--bytes", "--output", "RES,SIZE", path],
                           capture_output=True, text=True, check=True)
        row = json.loads(r.stdout)["fincore"][0]
        size = int(row["size"])
        return int(row["res"]) / size if size else 1.0
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError, IndexError):
        return None


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# ------------------------------------------------------------------ 1. durable produce
def produce_run(d: str, kcols: list[list[bytes]], vcols: list[list[bytes]],
                settings: dict[str, str] | None, records: bool) -> dict[str, Any]:
    from engine import Engine, Record

    n = sum(map(len, vcols))
    calls = len(vcols)
    batches = None
    if records:  # built before the timer
        batches = [[Record(key=k, value=v) for k, v in zip(kc, vc)]
                   for kc, vc in zip(kcols, vcols)]
    with Engine.open(d, settings=settings) as eng:
        eng.create_topic("bench", partitions=1)
        with FsyncCounter() as fc:
            t = time.perf_counter()
            if batches is not None:
                for b in batches:
                    eng.produce("bench", b, partition=0)
            else:
                for k, v in zip(kcols, vcols):
                    eng.produce_batch("bench", v, keys=k, partition=0)
            el = time.perf_counter() - t
        fs = wal_fsyncs(eng)
        end = eng.end_offsets("bench")[0]
    assert end == n, (end, n)
    return {"rps": n / el, "seconds": el, "calls": calls, "wal_fsyncs": fs,
            "wal_fsyncs_per_call": fs / calls, "all_fsyncs": fc.count,
            "all_fsyncs_per_call": fc.count / calls}


def step_produce(scratch: str, n: int, runs: int) -> dict[str, Any]:
    log(f"[1] building {n:,} records (10-byte keys, 100-byte values) ...")
    keys, vals, tss = make_records(n)
    kcols = [keys[s:s + CHUNK] for s in range(0, n, CHUNK)]
    vcols = [vals[s:s + CHUNK] for s in range(0, n, CHUNK)]
    variants = (("batch_always", None, False), ("records_always", None, True),
                ("batch_none", {"wal.sync": "none"}, False))
    out: dict[str, Any] = {"records": n, "sqlite_write_rps": []}
    for name, _, _ in variants:
        out[name] = []
    for run in range(runs):
        d = tempfile.mkdtemp(prefix="sqlite-", dir=scratch)
        w, _ = run_sqlite(d, keys, vals, tss)
        shutil.rmtree(d)
        out["sqlite_write_rps"].append(w)
        log(f"[1] run {run + 1}/{runs}: sqlite {w:,.0f} rec/s")
        for name, settings, records in variants:
            d = tempfile.mkdtemp(prefix=f"{name}-", dir=scratch)
            r = produce_run(d, kcols, vcols, settings, records)
            shutil.rmtree(d)
            out[name].append(r)
            log(f"[1]   {name}: {r['rps']:,.0f} rec/s, WAL fsyncs/call "
                f"{r['wal_fsyncs_per_call']:.3f}, all fsyncs/call {r['all_fsyncs_per_call']:.3f}")
    sq = median(out["sqlite_write_rps"])
    summary: dict[str, Any] = {"sqlite_write_rps": sq}
    for name, _, _ in variants:
        rs = out[name]
        mid = sorted(rs, key=lambda r: r["rps"])[len(rs) // 2]
        summary[name] = dict(mid, ratio_vs_sqlite=mid["rps"] / sq,
                             runs_rps=[round(r["rps"]) for r in rs])
    out["summary"] = summary
    return out


# ------------------------------------------------------------------ 2. group commit
def group_run(d: str, threads: int, partitions: int, seconds: float, warmup: float
              ) -> dict[str, Any]:
    """Threads produce for ``warmup`` seconds (not counted: the WAL reaches its steady state,
    writing into zero-filled files), then for ``seconds`` counted."""
    from engine import Engine

    blob = os.urandom(SMALL_CALL * 50).hex().encode()
    vals = [blob[i * 100:(i + 1) * 100] for i in range(SMALL_CALL)]
    counts = [0] * threads
    errors: list[BaseException] = []
    with Engine.open(d) as eng:
        eng.create_topic("g", partitions=partitions)
        for p in range(partitions):  # load partitions and start the WAL outside the timer
            eng.produce_batch("g", vals, keys=[b"w%09d" % i for i in range(SMALL_CALL)],
                              partition=p)
        barrier = threading.Barrier(threads + 1)
        stop = threading.Event()

        def worker(i: int) -> None:
            p = i % partitions
            keys = [b"t%d%08d" % (i, j) for j in range(SMALL_CALL)]
            try:
                barrier.wait()
                while not stop.is_set():
                    eng.produce_batch("g", vals, keys=keys, partition=p)
                    counts[i] += 1
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        barrier.wait()
        time.sleep(warmup)
        c0, f0 = list(counts), wal_fsyncs(eng)
        t0 = time.perf_counter()
        time.sleep(seconds)
        c1, fs = list(counts), wal_fsyncs(eng) - f0
        el = time.perf_counter() - t0
        stop.set()
        for t in ts:
            t.join()
        ends = eng.end_offsets("g")
    if errors:
        raise errors[0]
    assert sum(ends.values()) == (sum(counts) + partitions) * SMALL_CALL, (ends, counts)
    per = [b - a for a, b in zip(c0, c1)]
    calls = sum(per)
    return {"threads": threads, "partitions": partitions, "seconds": el, "calls": calls,
            "rps": calls * SMALL_CALL / el, "calls_per_s": calls / el, "wal_fsyncs": fs,
            "wal_fsyncs_per_call": fs / calls if calls else 0.0, "per_thread_calls": per}


def step_group(scratch: str, seconds: float, runs: int, warmup: float = 1.0
               ) -> dict[str, Any]:
    """Rounds of the three configs back to back; each ratio is taken within its round (the
    machine's speed drifts between rounds), the median of the rounds reported."""
    configs = (("1 thread, 1 partition", 1, 1), ("4 threads, same partition", 4, 1),
               ("4 threads, 4 partitions", 4, 4))
    out: dict[str, Any] = {"seconds": seconds, "warmup_seconds": warmup,
                           "records_per_call": SMALL_CALL, "configs": {}}
    rounds: list[dict[str, dict[str, Any]]] = []
    for _ in range(runs):
        got = {}
        for label, th, parts in configs:
            d = tempfile.mkdtemp(prefix="group-", dir=scratch)
            got[label] = group_run(d, th, parts, seconds, warmup)
            shutil.rmtree(d)
        rounds.append(got)
    one = configs[0][0]
    for label, _, _ in configs:
        rs = [r[label] for r in rounds]
        mid = sorted(rs, key=lambda r: r["rps"])[len(rs) // 2]
        mid["runs_rps"] = [round(r["rps"]) for r in rs]
        ratios = sorted(r[label]["rps"] / r[one]["rps"] for r in rounds)
        mid["ratio_vs_1_thread"] = ratios[len(ratios) // 2]
        mid["round_ratios"] = [round(x, 2) for x in ratios]
        out["configs"][label] = mid
        log(f"[2] {label}: {mid['rps']:,.0f} rec/s, {mid['calls_per_s']:,.0f} calls/s, "
            f"WAL fsyncs/call {mid['wal_fsyncs_per_call']:.3f}, ratio per round "
            f"{mid['round_ratios']}")
    return out


# ------------------------------------------------------------------ 3. kill -9 and recovery
def crash_child(d: str, gib: float) -> None:
    """Produce ~gib GiB with the WAL on, print READY (JSON), then wait to be killed."""
    from engine import Engine

    eng = Engine.open(d, settings={"checkpoint.interval.bytes": str(CKPT_BYTES)})
    meta = eng.create_topic("crash", partitions=1)
    seg_limit = meta.typed.segment_bytes
    target = min(int(gib * GIB), seg_limit)
    blob = os.urandom(CRASH_CHUNK * CRASH_VALUE // 2).hex().encode()
    vals = [blob[i * CRASH_VALUE:(i + 1) * CRASH_VALUE] for i in range(CRASH_CHUNK)]
    plog = eng._find.partition("crash", 0)  # (the engine's own PartitionLog: internals, measured)
    s = calls = 0
    t = time.perf_counter()
    while True:
        keys = [b"k%09d" % i for i in range(s, s + CRASH_CHUNK)]
        eng.produce_batch("crash", vals, keys=keys, partition=0)
        s += CRASH_CHUNK
        calls += 1
        size = plog.segs.active.size
        if size + 2 * (size // calls) > target:  # stay inside one segment
            break
    el = time.perf_counter() - t
    info = {"records": s, "calls": calls, "seconds": el, "segment_bytes": plog.segs.active.size,
            "segments": len(plog.segs.bases), "wal_fsyncs": eng.wal.fsyncs if eng.wal else 0,
            "rps": s / el, "mb_per_s": plog.segs.active.size / el / 1e6}
    sys.stdout.write("READY " + json.dumps(info) + "\n")
    sys.stdout.flush()
    time.sleep(3600)  # SIGKILL arrives meanwhile: no close, no final checkpoint


def recover_child(d: str) -> None:
    """Time Engine.open (dead-stream replay) and the first produce; JSON on stdout."""
    t = time.perf_counter()
    import engine
    from engine import Engine
    from engine.segments.segment import Segment

    import_s = time.perf_counter() - t
    from engine.wal import replay as wal_replay

    spent = {"segment_load_s": 0.0, "recover_wal_s": 0.0, "wal_scan_s": 0.0, "rmtree_s": 0.0}
    real_load, real_recover = Segment.load, Engine.wal_replay
    real_scan, real_rmtree = wal_replay.scan_file, shutil.rmtree

    def scan_file(path: str) -> Any:
        it = real_scan(path)
        while True:
            t0 = time.perf_counter()
            try:
                rec = next(it)
            except StopIteration:
                return
            finally:
                spent["wal_scan_s"] += time.perf_counter() - t0
            yield rec

    def rmtree(path: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_rmtree(path, *a, **k)
        finally:
            spent["rmtree_s"] += time.perf_counter() - t0

    def load(self: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_load(self, *a, **k)
        finally:
            spent["segment_load_s"] += time.perf_counter() - t0

    def recover_wal(self: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_recover(self, *a, **k)
        finally:
            spent["recover_wal_s"] += time.perf_counter() - t0

    Segment.load, Engine.wal_replay = load, recover_wal  # type: ignore[method-assign]
    wal_replay.scan_file, shutil.rmtree = scan_file, rmtree  # type: ignore[assignment]
    t0 = time.perf_counter()
    eng = Engine.open(d)
    t1 = time.perf_counter()
    eng.produce_batch("crash", [b"after-the-crash"], keys=[b"kafter0000"], partition=0)
    t2 = time.perf_counter()
    rec = eng.last_recovery
    plog = eng._find.partition("crash", 0)  # (internals, measured)
    out = {"import_s": import_s, "open_s": t1 - t0, "first_produce_s": t2 - t1,
           "total_s": t2 - t0, **spent,
           "streams": len(rec.get("streams", [])), "applied": rec.get("applied"),
           "skipped": rec.get("skipped"), "torn_tails": len(rec.get("torn_tails", [])),
           "end_offset": plog.end_offset(), "segment_bytes": plog.segs.active.size,
           "index_entries": len(plog.segs.active.index), "engine": engine.__name__}
    eng.close()
    print(json.dumps(out))


def index_position_before(pdir: str, position: int) -> int:
    """Position of the last offset-index entry at or below ``position`` (0 if none): where a
    load that trusts ``position`` starts scanning."""
    from engine.segments import filenames
    from engine.segments.index import OffsetIndex

    idx = OffsetIndex(filenames.path(pdir, 0, filenames.INDEX), writable=False)
    try:
        best = 0
        for v in idx.values:
            if v <= position:
                best = v
        return best
    finally:
        idx.close()


def timed_recovery(d: str, pdir: str) -> dict[str, Any]:
    warmed = warm(d)
    res = resident(os.path.join(pdir, "00000000000000000000.log"))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--recover-child", d],
                       capture_output=True, text=True, check=True)
    wall_s = time.perf_counter() - t
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out |= {"subprocess_wall_s": wall_s, "warmed_bytes": warmed, "log_resident": res}
    return out


def step_crash(scratch: str, gib: float, reps: int) -> dict[str, Any]:
    from engine.segments import filenames
    from engine.segments.checkpoint import read_checkpoint

    d = os.path.join(scratch, "crash")
    log(f"[3] child producing ~{gib:g} GiB (1000-byte values, calls of 1000, WAL always) ...")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--crash-child", d,
                             "--gib", str(gib)], stdout=subprocess.PIPE, text=True)
    info: dict[str, Any] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY "):
                info = json.loads(line[6:])
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if not info:
        raise SystemExit(f"crash child exited ({proc.returncode}) before READY")
    log(f"[3] READY after {info['seconds']:.1f} s ({info['mb_per_s']:.0f} MB/s); "
        f"killed with SIGKILL (returncode {proc.returncode})")
    pdir = filenames.partition_dir(d, "crash", 0)
    ckpt = read_checkpoint(pdir)
    seg_bytes = os.path.getsize(os.path.join(pdir, "00000000000000000000.log"))
    scan_from = index_position_before(pdir, ckpt["position"]) if ckpt else 0
    state = {"produce": info, "killed_returncode": proc.returncode, "checkpoint": ckpt,
             "log_bytes": seg_bytes, "wal_bytes": tree_bytes(os.path.join(d, "wal"), ".wal"),
             "wal_streams": len(next(os.walk(os.path.join(d, "wal")))[1])}
    out: dict[str, Any] = {"state": state}

    for key, drop in (("with_checkpoint", False), ("without_checkpoint", True)):
        label = "without" if drop else "with"
        if drop and ckpt is None:
            log("[3] no .checkpoint was written (under 64 MiB produced?): both scan it all")
        rs = []
        for i in range(reps):
            copy = os.path.join(scratch, f"crash-{key}-{i}")
            shutil.copytree(d, copy, symlinks=True)
            cpdir = filenames.partition_dir(copy, "crash", 0)
            if drop and ckpt is not None:
                os.unlink(os.path.join(cpdir, filenames.CHECKPOINT))
            os.sync()  # no dirty pages of the copy left to flush during the timed run
            r = timed_recovery(copy, cpdir)
            rs.append(r)
            log(f"[3] {label} checkpoint, run {i + 1}/{reps}: open {r['open_s'] * 1e3:.0f} ms "
                f"(Segment.load {r['segment_load_s'] * 1e3:.0f} ms) + first produce "
                f"{r['first_produce_s'] * 1e3:.1f} ms")
            if drop and i == reps - 1:
                out["data_dir"] = copy  # recovered: step 4 verifies it
            else:
                shutil.rmtree(copy)
        r = dict(sorted(rs, key=lambda x: x["total_s"])[len(rs) // 2])
        r["runs_total_ms"] = [round(x["total_s"] * 1e3, 1) for x in rs]
        r["all_runs"] = rs
        r["scanned_bytes"] = seg_bytes if drop else seg_bytes - scan_from
        r["mb_per_s_total"] = r["scanned_bytes"] / r["total_s"] / 1e6
        r["mb_per_s_segment_load"] = r["scanned_bytes"] / r["segment_load_s"] / 1e6
        out[key] = r
    shutil.rmtree(d)  # the pristine crashed state
    return out


# ------------------------------------------------------------------ 4. verify
def step_verify(d: str) -> dict[str, Any]:
    from engine.segments import filenames
    from engine.tools.verify import verify_partition

    exe = cli_exe()
    log_bytes = tree_bytes(os.path.join(d, "topics"), ".log")
    warm(d)
    walls = []
    for _ in range(2):
        t = time.perf_counter()
        r = subprocess.run([exe, "--data-dir", d, "segment", "verify"], capture_output=True,
                           text=True)
        walls.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise SystemExit(f"rivven segment verify failed ({r.returncode}): {r.stderr}")
    summary = (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr).strip() \
        else ""
    from engine import Engine

    empty = d + "-empty"
    Engine.open(empty).close()
    base = []
    for _ in range(2):  # the command's fixed cost: start-up on a data dir with no segments
        t = time.perf_counter()
        subprocess.run([exe, "--data-dir", empty, "segment", "verify"], capture_output=True,
                       check=True)
        base.append(time.perf_counter() - t)
    shutil.rmtree(empty)
    pdir = filenames.partition_dir(d, "crash", 0)
    inproc = []
    for _ in range(2):
        t = time.perf_counter()
        reps = verify_partition(pdir)
        inproc.append(time.perf_counter() - t)
        assert not [f for rep in reps for f in rep.findings], "verify_partition found damage"
    return {"log_bytes": log_bytes, "cli_wall_s": walls, "cli_gbps": log_bytes / walls[1] / 1e9,
            "cli_output": summary, "cli_empty_dir_s": base[1],
            "cli_gbps_minus_startup": log_bytes / max(walls[1] - base[1], 1e-9) / 1e9,
            "inprocess_s": inproc,
            "inprocess_gbps": log_bytes / inproc[1] / 1e9,
            "log_resident": resident(filenames.path(pdir, 0, filenames.LOG))}


# ------------------------------------------------------------------ report
def build_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    p = res.get("produce")
    if p:
        s = p["summary"]
        rows.append((f"-- 1. durable produce: {p['records']:,} records (10 B key, 100 B value), "
                     f"calls of {CHUNK}, 1 partition", "", ""))
        rows.append(("sqlite WAL, synchronous=FULL, commit/1000", f"{s['sqlite_write_rps']:>12,.0f} rec/s",
                     "runs: " + ", ".join(f"{x:,.0f}" for x in p["sqlite_write_rps"])))
        for key, label in (("batch_always", "produce_batch, wal.sync=always"),
                           ("records_always", "produce(1000 Record), wal.sync=always"),
                           ("batch_none", "produce_batch, wal.sync=none (reference)")):
            r = s[key]
            rows.append((label, f"{r['rps']:>12,.0f} rec/s",
                         f"{r['ratio_vs_sqlite']:.2f}x sqlite; WAL fsyncs/call "
                         f"{r['wal_fsyncs_per_call']:.3f} ({r['wal_fsyncs']}/{r['calls']}); "
                         f"all fsyncs/call {r['all_fsyncs_per_call']:.3f}"))
    g = res.get("group")
    if g:
        rows.append((f"-- 2. group commit: {g['records_per_call']} records/call, "
                     f"{g['seconds']:g} s each after {g.get('warmup_seconds', 0):g} s of warm-up, "
                     "wal.sync=always", "", ""))
        for label, c in g["configs"].items():
            verdict = ""
            if c["threads"] > 1:
                verdict = (f"; target >= {TARGET_GROUP:g}x: "
                           f"{'MET' if c['ratio_vs_1_thread'] >= TARGET_GROUP else 'MISSED'}")
            rows.append((label, f"{c['rps']:>12,.0f} rec/s",
                         f"{c['ratio_vs_1_thread']:.2f}x 1 thread{verdict}; "
                         f"{c['calls_per_s']:,.0f} calls/s; WAL fsyncs/call "
                         f"{c['wal_fsyncs_per_call']:.3f} ({1 / c['wal_fsyncs_per_call']:.2f} calls "
                         f"per fsync); runs {c['runs_rps']}"))
    c3 = res.get("crash")
    if c3:
        st = c3["state"]
        pr = st["produce"]
        ck = st["checkpoint"]
        rows.append((f"-- 3. kill -9 after {st['log_bytes'] / GIB:.3f} GiB in one segment, "
                     f"recovery in a fresh subprocess (page cache warm)", "", ""))
        rows.append(("crash child produce (1000 x 1000 B / call)",
                     f"{pr['mb_per_s']:>12,.0f} MB/s",
                     f"{pr['records']:,} records in {pr['seconds']:.1f} s, "
                     f"{pr['rps']:,.0f} rec/s, WAL fsyncs {pr['wal_fsyncs']} / {pr['calls']} calls"))
        rows.append(("state at SIGKILL", f"{st['wal_bytes'] / MIB:>9,.1f} MiB WAL",
                     f"{st['wal_streams']} dead stream(s); checkpoint at position "
                     f"{ck['position'] if ck else None:,} of {st['log_bytes']:,} "
                     f"(returncode {st['killed_returncode']})"))
        for key, label in (("with_checkpoint", "with .checkpoint"),
                           ("without_checkpoint", "without .checkpoint")):
            r = c3[key]
            res_txt = "?" if r["log_resident"] is None else f"{r['log_resident'] * 100:.0f}%"
            rows.append((f"{label}: open + first produce", f"{r['total_s'] * 1e3:>9,.0f} ms",
                         f"open {r['open_s'] * 1e3:,.0f} ms (recover_wal "
                         f"{r['recover_wal_s'] * 1e3:,.0f} ms: WAL scan {r['wal_scan_s'] * 1e3:,.0f}"
                         f" ms, Segment.load {r['segment_load_s'] * 1e3:,.0f} ms, rmtree "
                         f"{r['rmtree_s'] * 1e3:,.0f} ms) + produce "
                         f"{r['first_produce_s'] * 1e3:,.1f} ms; median of "
                         f"{r['runs_total_ms']} ms; subprocess wall "
                         f"{r['subprocess_wall_s'] * 1e3:,.0f} ms"))
            rows.append((f"{label}: segment bytes scanned", f"{r['scanned_bytes'] / MIB:>9,.1f} MiB",
                         f"WAL batches applied {r['applied']}, skipped {r['skipped']}; "
                         f"end offset {r['end_offset']:,}; .log resident {res_txt}"))
        n = c3["without_checkpoint"]
        rows.append(("recovery rate without checkpoint", f"{n['mb_per_s_total']:>9,.0f} MB/s",
                     f"active segment bytes / (open + first produce); Segment.load alone "
                     f"{n['mb_per_s_segment_load']:,.0f} MB/s; page cache warm"))
    v = res.get("verify")
    if v:
        res_txt = "?" if v["log_resident"] is None else f"{v['log_resident'] * 100:.0f}%"
        rows.append((f"-- 4. verify {v['log_bytes'] / GIB:.3f} GiB of .log (page cached, "
                     f"{res_txt} resident)", "", ""))
        rows.append(("rivven segment verify (2nd run)", f"{v['cli_gbps']:>9.3f} GB/s",
                     f"wall {v['cli_wall_s'][1]:.2f} s (1st {v['cli_wall_s'][0]:.2f} s); "
                     f"{v['cli_output']}"))
        rows.append(("  same, minus its start-up on an empty dir",
                     f"{v['cli_gbps_minus_startup']:>9.3f} GB/s",
                     f"rivven segment verify on an empty data dir: {v['cli_empty_dir_s']:.2f} s"))
        rows.append(("engine.tools.verify.verify_partition (2nd run)", f"{v['inprocess_gbps']:>9.3f} GB/s",
                     f"{v['inprocess_s'][1]:.2f} s (1st {v['inprocess_s'][0]:.2f} s)"))
    return rows


# ------------------------------------------------------------------ main
def plan_size(a: argparse.Namespace) -> float:
    """Scale --gib down when /tmp (--dir) is short of space (peak: state + one copy)."""
    free = shutil.disk_usage(a.dir).free
    gib = a.gib
    if free < 5 * GIB:
        fit = max(0.05, (free / GIB - 1.0) / 3.0)
        if fit < gib:
            log(f"only {free / GIB:.1f} GiB free in {a.dir}: --gib {gib:g} scaled to {fit:.2f}")
            gib = round(fit, 2)
    return gib


def run_all(a: argparse.Namespace) -> dict[str, Any]:
    import sqlite3

    gib = plan_size(a)
    scratch = tempfile.mkdtemp(prefix="rivven-durability-", dir=a.dir)
    res: dict[str, Any] = {"config": {
        "records": a.records, "runs": a.runs, "seconds": a.seconds, "gib": gib,
        "gib_requested": a.gib, "sqlite": sqlite3.sqlite_version,
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "scratch": scratch,
        "free_bytes": shutil.disk_usage(a.dir).free}}
    t = time.perf_counter()
    try:
        if "1" in a.steps:
            res["produce"] = step_produce(scratch, a.records, a.runs)
        if "2" in a.steps:
            res["group"] = step_group(scratch, a.seconds, a.runs, a.warmup)
        if "3" in a.steps or "4" in a.steps:
            res["crash"] = step_crash(scratch, gib, a.recoveries)
            if "4" in a.steps:
                log("[4] verify ...")
                res["verify"] = step_verify(res["crash"]["data_dir"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    res["config"]["elapsed_s"] = time.perf_counter() - t
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records in step 1")
    ap.add_argument("--runs", type=int, default=3, help="median of this many runs (steps 1, 2)")
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each step-2 run")
    ap.add_argument("--warmup", type=float, default=1.0,
                    help="step 2: seconds each run produces before it counts")
    ap.add_argument("--gib", type=float, default=1.0, help="GiB produced before the kill -9")
    ap.add_argument("--recoveries", type=int, default=3,
                    help="step 3: recoveries per variant, each on a fresh copy (median)")
    ap.add_argument("--steps", default="1234", help="which steps to run (e.g. 34)")
    ap.add_argument("--json", action="store_true", help="print JSON on stdout (table on stderr)")
    ap.add_argument("--dir", default="/tmp", help="parent of the scratch directory")
    ap.add_argument("--crash-child", help=argparse.SUPPRESS)
    ap.add_argument("--recover-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.crash_child:
        crash_child(a.crash_child, a.gib)
        return
    if a.recover_child:
        recover_child(a.recover_child)
        return
    if a.records < CHUNK or a.runs < 1 or a.recoveries < 1 or a.gib <= 0 or a.seconds <= 0:
        ap.error(f"--records must be at least {CHUNK}, --runs and --recoveries at least 1, "
                 "--gib and --seconds > 0")
    res = run_all(a)
    c = res["config"]
    out = sys.stderr if a.json else sys.stdout
    out.write(f"rivven bench_durability: {c['cpus']} CPUs, Python {c['python']}, SQLite "
              f"{c['sqlite']}, median of {c['runs']} run(s), --gib {c['gib']:g}, "
              f"{c['elapsed_s']:.0f} s\n")
    print_rows(build_rows(res), out)
    if a.json:
        sys.stdout.write(json.dumps(res, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
