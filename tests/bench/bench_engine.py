#!/usr/bin/env python3
"""rivven against its targets, in one process, on the records of /work/shared/peers/.

Records: N (default 1M) x (10-byte key ``k%09d``, 100-byte hex value, ms timestamp), built
exactly as ``peers_bench.py`` builds them. Every figure is the median of ``--runs`` fresh runs
(a new SQLite file / data dir each run); the memory, import and ``topic list`` checks run once
(``topic list`` is itself a median of 5).

  sqlite           WAL, synchronous=FULL, executemany + COMMIT per 1000 rows; full-scan SELECT
                   (the code of peers_bench.py, unchanged)
  produce          Engine.produce(topic, [1000 Record]) per call, lists built before the timer,
                   one partition, sync=True (fdatasync per call)
  produce_batch    Engine.produce_batch(topic, values, keys=keys) per 1000 (columnar)
  read             Engine.read(topic, 0, offset, 1000) to the end, touching r.key and r.value
  read_arrow       Engine.read_arrow(topic, 0, offset, 100_000) to the end
  cli produce      ``rivven produce TOPIC --file F`` of N lines, wall time of the subprocess
  cli consume      ``rivven consume TOPIC -f '%v\\n' > /dev/null``, wall time of the subprocess
  memory           a subprocess produces 10 x N records (produce_batch, calls of 1000) and reads
                   them all back with read(); peak RSS (ru_maxrss) against the RSS after setup
  imports          ``import engine`` must not import pyspark or pyarrow; ``rivven topic list``
                   wall time on a data dir with one topic

Usage: python tests/bench/bench_engine.py [--records 1000000] [--runs 3] [--json]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

CHUNK = 1000
ARROW_CHUNK = 100_000
TARGET_PRODUCE = 3.0  # rivven produce / SQLite write
TARGET_READ = 1.3  # rivven read / SQLite full scan
FLAT_MIB = 64  # peak RSS growth over setup still called flat
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def make_records(n: int) -> tuple[list[bytes], list[bytes], list[int]]:
    """The records of peers_bench.py: same keys, values and timestamps."""
    blob = os.urandom(n * 50).hex().encode()
    keys = [b"k%09d" % i for i in range(n)]
    vals = [blob[i * 100:(i + 1) * 100] for i in range(n)]
    ts0 = 1_767_225_600_000
    tss = list(range(ts0, ts0 + n))
    return keys, vals, tss


def median_of(xs: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(xs), "runs": [round(x, 6) for x in xs]}


def cli_exe() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "rivven")
    if os.path.exists(exe):
        return exe
    found = shutil.which("rivven")
    if found is None:
        raise SystemExit("the rivven command is not installed (pip install -e .)")
    return found


def rss_now() -> int:
    """Current resident set size in bytes (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """Peak resident set size in bytes (ru_maxrss is KiB on Linux).

    Linux carries ru_maxrss across fork+exec, so a child started by a big parent inherits the
    parent's peak: ``run_all`` starts the memory child first, while this process is small, and
    the child also reports VmHWM (the peak of its own address space only).
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def vm_hwm() -> int:
    """Peak RSS of this process's own address space (VmHWM, /proc/self/status), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def snapshot(out: dict[str, Any], stage: str) -> None:
    out[f"{stage}_rss"], out[f"{stage}_peak"], out[f"{stage}_hwm"] = (
        rss_now(), rss_peak(), vm_hwm())


# ------------------------------------------------------------------ SQLite (as peers_bench.py)
def run_sqlite(d: str, keys: list[bytes], vals: list[bytes], tss: list[int]
               ) -> tuple[float, float]:
    n = len(keys)
    path = os.path.join(d, "log_FULL.db")
    for suf in ("", "-wal", "-shm"):
        if os.path.exists(path + suf):
            os.unlink(path + suf)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute('CREATE TABLE log ("offset" INTEGER PRIMARY KEY, ts INTEGER, key BLOB, '
                'value BLOB)')
    con.commit()
    sql = 'INSERT INTO log ("offset", ts, key, value) VALUES (?,?,?,?)'
    t = time.perf_counter()
    for s in range(0, n, CHUNK):
        e = s + CHUNK
        con.executemany(sql, zip(range(s, e), tss[s:e], keys[s:e], vals[s:e]))
        con.commit()
    write = n / (time.perf_counter() - t)
    con.close()
    con = sqlite3.connect(path)
    t = time.perf_counter()
    cnt = 0
    for _row in con.execute('SELECT "offset", ts, key, value FROM log ORDER BY "offset"'):
        cnt += 1
    scan = n / (time.perf_counter() - t)
    assert cnt == n, cnt
    con.close()
    for suf in ("", "-wal", "-shm"):
        if os.path.exists(path + suf):
            os.unlink(path + suf)
    return write, scan


# ------------------------------------------------------------------ rivven, Python API
def run_produce_records(d: str, batches: list[list[Any]]) -> float:
    from engine import Engine

    n = sum(map(len, batches))
    with Engine.open(d, sync=True) as eng:
        eng.create_topic("bench", partitions=1)
        t = time.perf_counter()
        for b in batches:
            eng.produce("bench", b)
        el = time.perf_counter() - t
        end = eng.end_offsets("bench")[0]
    assert end == n, (end, n)
    return n / el


def run_produce_batch(d: str, kcols: list[list[bytes]], vcols: list[list[bytes]]) -> float:
    from engine import Engine

    n = sum(map(len, vcols))
    with Engine.open(d, sync=True) as eng:
        eng.create_topic("bench", partitions=1)
        t = time.perf_counter()
        for k, v in zip(kcols, vcols):
            eng.produce_batch("bench", v, keys=k)
        el = time.perf_counter() - t
        end = eng.end_offsets("bench")[0]
    assert end == n, (end, n)
    return n / el


def read_all(eng: Any, topic: str, n: int) -> tuple[int, Any, Any]:
    """Read partition 0 with read() in calls of CHUNK, touching every key and value; returns
    (records read, last key, last value)."""
    off = 0
    k = v = None
    while off < n:
        recs = eng.read(topic, 0, off, CHUNK)
        if not recs:
            break
        for r in recs:
            k = r.key
            v = r.value
        off += len(recs)
    return off, k, v


def run_read(d: str, keys: list[bytes], vals: list[bytes]) -> float:
    from engine import Engine

    n = len(keys)
    with Engine.open(d, read_only=True) as eng:
        eng.read("bench", 0, 0, 1)  # warm-up: the first read imports pyarrow
        t = time.perf_counter()
        off, k, v = read_all(eng, "bench", n)
        el = time.perf_counter() - t
    assert off == n and k == keys[-1] and v == vals[-1], (off, k, v)
    return n / el


def run_read_arrow(d: str, keys: list[bytes], vals: list[bytes]) -> float:
    from engine import Engine

    n = len(keys)
    with Engine.open(d, read_only=True) as eng:
        eng.read_arrow("bench", 0, 0, 1)  # warm-up: imports pyarrow and pyarrow.compute
        t = time.perf_counter()
        off = 0
        tbl = None
        while off < n:
            tbl = eng.read_arrow("bench", 0, off, ARROW_CHUNK)
            if not tbl.num_rows:
                break
            off += tbl.num_rows
        el = time.perf_counter() - t
    assert off == n and tbl is not None, off
    last = tbl.slice(tbl.num_rows - 1)
    assert last.column("key")[0].as_py() == keys[-1]
    assert last.column("value")[0].as_py() == vals[-1]
    return n / el


# ------------------------------------------------------------------ rivven CLI
def run_cli(exe: str, d: str, lines_file: str, n: int, check: bool) -> tuple[float, float]:
    base = [exe, "--data-dir", d]
    subprocess.run(base + ["topic", "create", "cli"], check=True, cwd=d,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.perf_counter()
    subprocess.run(base + ["produce", "cli", "--file", lines_file, "-q"], check=True, cwd=d)
    produce = n / (time.perf_counter() - t)
    with open(os.devnull, "wb") as null:
        t = time.perf_counter()
        subprocess.run(base + ["consume", "cli", "-f", "%v\\n"], check=True, cwd=d, stdout=null)
        consume = n / (time.perf_counter() - t)
    if check:  # once, untimed: the consumed lines are the produced lines
        out = os.path.join(d, "consumed.txt")
        with open(out, "wb") as f:
            subprocess.run(base + ["consume", "cli", "-f", "%v\\n"], check=True, cwd=d, stdout=f)
        with open(out, "rb") as a, open(lines_file, "rb") as b:
            assert a.read() == b.read(), "rivven consume output differs from the produced file"
        os.unlink(out)
    return produce, consume


def wall(cmd: list[str], cwd: str, runs: int = 5) -> dict[str, Any]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=cwd, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return median_of(times)


IMPORT_PROBE = r"""
import json, sys, time, tempfile, shutil
t = time.perf_counter()
import engine
el = time.perf_counter() - t
def loaded(name):
    return any(m == name or m.startswith(name + ".") for m in sys.modules)
out = {"import_s": el, "pyspark": loaded("pyspark"), "pyarrow": loaded("pyarrow")}
d = tempfile.mkdtemp(prefix="rivven-bench-imp-", dir=sys.argv[1])
with engine.Engine.open(d) as eng:
    eng.create_topic("t", 1)
    eng.produce("t", [engine.Record(b"k", b"v")])
    out["pyarrow_after_produce"] = loaded("pyarrow")
    out["pyspark_after_produce"] = loaded("pyspark")
shutil.rmtree(d)
print(json.dumps(out))
"""


def run_imports(exe: str, scratch: str, cli_dir: str) -> dict[str, Any]:
    py = sys.executable
    r = subprocess.run([py, "-c", IMPORT_PROBE, scratch], check=True, cwd=scratch,
                       capture_output=True, text=True)
    res: dict[str, Any] = json.loads(r.stdout)
    empty = os.path.join(scratch, "one-empty-topic")
    subprocess.run([exe, "--data-dir", empty, "topic", "create", "t"], check=True, cwd=scratch,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res["python_startup_s"] = wall([py, "-c", "pass"], scratch)
    res["python_import_engine_s"] = wall([py, "-c", "import engine"], scratch)
    res["topic_list_empty_topic_s"] = wall([exe, "--data-dir", empty, "topic", "list"], scratch)
    res["topic_list_1topic_loaded_s"] = wall([exe, "--data-dir", cli_dir, "topic", "list"],
                                             scratch)
    shutil.rmtree(empty, ignore_errors=True)
    return res


# ------------------------------------------------------------------ memory (child process)
def mem_child(d: str, n: int) -> None:
    """Produce ``n`` records with produce_batch in calls of 1000, read them all with read()."""
    import pyarrow  # noqa: F401  (read() imports it on first use: part of setup, not growth)

    from engine import Engine

    blob = os.urandom(CHUNK * 50).hex().encode()
    vals = [blob[i * 100:(i + 1) * 100] for i in range(CHUNK)]
    out: dict[str, Any] = {"records": n}
    with Engine.open(d, sync=True) as eng:
        eng.create_topic("mem", partitions=1)
        snapshot(out, "setup")
        t = time.perf_counter()
        for s in range(0, n, CHUNK):
            m = min(CHUNK, n - s)
            keys = [b"k%09d" % i for i in range(s, s + m)]
            eng.produce_batch("mem", vals[:m], keys=keys)
        out["produce_rps"] = n / (time.perf_counter() - t)
        snapshot(out, "produce")
        out["end_offset"] = eng.end_offsets("mem")[0]
        out["segments"] = eng.describe_topic("mem")["partition_info"][0]["segments"]
        t = time.perf_counter()
        off, k, v = read_all(eng, "mem", n)
        out["read_rps"] = n / (time.perf_counter() - t)
        out["read_records"] = off
        out["last_ok"] = k == b"k%09d" % (n - 1) and v == vals[(n - 1) % CHUNK]
        snapshot(out, "read")
    print(json.dumps(out))


def run_memory(scratch: str, n: int) -> dict[str, Any]:
    d = os.path.join(scratch, "mem")
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mem-child", d,
                            "--records", str(n)], check=True, capture_output=True, text=True,
                           cwd=scratch)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return json.loads(r.stdout)


# ------------------------------------------------------------------ report
def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.3f} M/s"


def build_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    s, rv, c = res["sqlite"], res["rivven"], res["cli"]
    rows: list[tuple[str, str, str]] = []

    def rate(name: str, fig: dict[str, Any], unit: str = "rec/s") -> None:
        runs = ", ".join(f"{x / 1e6:.3f}" for x in fig["runs"])
        rows.append((name, f"{fig['median']:>13,.0f} {unit}", f"runs (M): {runs}"))

    rows.append(("-- SQLite baseline (WAL, synchronous=FULL)", "", ""))
    rate("sqlite insert, commit per 1000", s["write_rps"])
    rate("sqlite full-scan SELECT", s["scan_rps"])
    rows.append(("-- rivven Python API (1 partition)", "", ""))
    rate("produce(list of 1000 Record), sync", rv["produce_rps"])
    rate("produce_batch(1000 keys/values), sync", rv["produce_batch_rps"])
    rate("read(offset, 1000), touch key+value", rv["read_rps"])
    rate("read_arrow(offset, 100_000)", rv["read_arrow_rps"])
    gbs = rv["read_arrow_gbps"]
    rows.append(("read_arrow key+value bytes", f"{gbs['median']:>13.3f} GB/s",
                 "runs: " + ", ".join(f"{x:.3f}" for x in gbs["runs"])))
    rows.append(("-- rivven CLI (subprocess wall time)", "", ""))
    rate("rivven produce --file (lines)", c["produce_lps"], "lines/s")
    rate("rivven consume -f '%v\\n' > /dev/null", c["consume_rps"])
    m = res.get("memory")
    if m:
        mb = 1 << 20
        rows.append((f"-- memory: {m['records']:,} records, produce_batch x1000 then read()",
                     "", ""))
        rows.append(("RSS after setup (engine+pyarrow)", f"{m['setup_rss'] / mb:>10.1f} MiB",
                     f"ru_maxrss {m['setup_peak'] / mb:.1f} MiB, "
                     f"VmHWM {m['setup_hwm'] / mb:.1f} MiB"))
        rows.append(("after produce: RSS", f"{m['produce_rss'] / mb:>10.1f} MiB",
                     f"ru_maxrss {m['produce_peak'] / mb:.1f} MiB, {m['segments']} "
                     f"segment(s), {m['produce_rps']:,.0f} rec/s"))
        rows.append(("after read: RSS", f"{m['read_rss'] / mb:>10.1f} MiB",
                     f"ru_maxrss {m['read_peak'] / mb:.1f} MiB, VmHWM "
                     f"{m['read_hwm'] / mb:.1f} MiB, {m['read_rps']:,.0f} rec/s"))
        rows.append(("peak RSS (ru_maxrss) - RSS after setup",
                     f"{m['growth'] / mb:>10.1f} MiB",
                     f"{'flat' if m['flat'] else 'NOT FLAT'} (limit {FLAT_MIB} MiB); read back "
                     f"{m['read_records']:,}, last record ok={m['last_ok']}"))
    i = res.get("imports")
    if i:
        rows.append(("-- imports and CLI start-up", "", ""))
        rows.append(("import engine loads pyspark / pyarrow",
                     f"{i['pyspark']} / {i['pyarrow']}",
                     f"{'OK' if not (i['pyspark'] or i['pyarrow']) else 'FAIL'}; "
                     f"{i['import_s'] * 1e3:.0f} ms in-process; after a produce: "
                     f"pyarrow {i['pyarrow_after_produce']}"))
        for key, label in (("python_startup_s", "python -c pass"),
                           ("python_import_engine_s", "python -c 'import engine'"),
                           ("topic_list_empty_topic_s", "rivven topic list (1 empty topic)"),
                           ("topic_list_1topic_loaded_s",
                            f"rivven topic list (1 topic, {res['config']['records']:,} rec)")):
            f = i[key]
            rows.append((label, f"{f['median'] * 1e3:>10.0f} ms",
                         "median of 5: " + ", ".join(f"{x * 1e3:.0f}" for x in f["runs"])))
    rows.append(("-- ratios (targets)", "", ""))
    for label, key, target in (("produce / sqlite write", "produce_vs_sqlite_write",
                                TARGET_PRODUCE),
                               ("produce_batch / sqlite write", "produce_batch_vs_sqlite_write",
                                TARGET_PRODUCE),
                               ("read / sqlite scan", "read_vs_sqlite_scan", TARGET_READ),
                               ("read_arrow / sqlite scan", "read_arrow_vs_sqlite_scan", None)):
        x = res["ratios"][key]
        verdict = "" if target is None else (
            f"target >= {target}x: {'MET' if x >= target else 'MISSED'}")
        rows.append((label, f"{x:>10.2f} x", verdict))
    rows.append(("read_arrow GB/s (key+value)", f"{gbs['median']:>10.3f} GB/s", ""))
    return rows


def print_rows(rows: list[tuple[str, str, str]], out: Any) -> None:
    """Aligned rows; a row ``("-- title", "", "")`` is a section heading."""
    body = [r for r in rows if not (r[0].startswith("--") and not r[1])]
    w0 = max(len(r[0]) for r in body)
    w1 = max(len(r[1]) for r in body)
    for a, b, c in rows:
        if a.startswith("--") and not b:
            out.write(f"\n{a}\n")
        else:
            out.write(f"  {a:<{w0}}  {b:>{w1}}  {c}".rstrip() + "\n")
    out.flush()


# ------------------------------------------------------------------ main
def run_all(a: argparse.Namespace) -> dict[str, Any]:
    from engine import Record

    n = a.records
    exe = cli_exe()
    scratch = tempfile.mkdtemp(prefix="rivven-bench-", dir=a.dir)
    res: dict[str, Any] = {"config": {
        "records": n, "runs": a.runs, "key_bytes": 10, "value_bytes": 100,
        "sqlite": sqlite3.sqlite_version, "python": sys.version.split()[0],
        "cpus": os.cpu_count(), "scratch": scratch}}
    try:
        if not a.skip_memory:  # first, while this process is small (see rss_peak)
            mn = a.memory_records or n * 10
            log(f"memory: producing and reading {mn:,} records in a subprocess ...")
            m = run_memory(scratch, mn)
            m["growth"] = m["read_peak"] - m["setup_rss"]
            m["flat"] = m["growth"] < FLAT_MIB << 20
            res["memory"] = m
        log(f"building {n:,} records (10-byte keys, 100-byte values) ...")
        keys, vals, tss = make_records(n)
        kv_bytes = sum(map(len, keys)) + sum(map(len, vals))
        kcols = [keys[s:s + CHUNK] for s in range(0, n, CHUNK)]
        vcols = [vals[s:s + CHUNK] for s in range(0, n, CHUNK)]
        lines_file = os.path.join(scratch, "lines.txt")
        with open(lines_file, "wb") as f:
            f.write(b"\n".join(vals) + b"\n")

        sw, ss, pr, pb, rd, ra, cp, cc = ([] for _ in range(8))
        cli_dir = ""
        for run in range(a.runs):
            log(f"run {run + 1}/{a.runs}: sqlite ...")
            d = tempfile.mkdtemp(prefix="sqlite-", dir=scratch)
            w, s = run_sqlite(d, keys, vals, tss)
            shutil.rmtree(d)
            sw.append(w)
            ss.append(s)
            log(f"  sqlite write {w:,.0f}/s scan {s:,.0f}/s; rivven produce ...")
            d = tempfile.mkdtemp(prefix="api-", dir=scratch)
            # built before the timer, per run: 1M live Record tuples would tax the garbage
            # collector during every other measurement (SQLite included)
            batches = [[Record(key=k, value=v) for k, v in zip(kc, vc)]
                       for kc, vc in zip(kcols, vcols)]
            pr.append(run_produce_records(d, batches))
            del batches
            log(f"  produce {pr[-1]:,.0f}/s; read ...")
            rd.append(run_read(d, keys, vals))
            ra.append(run_read_arrow(d, keys, vals))
            log(f"  read {rd[-1]:,.0f}/s read_arrow {ra[-1]:,.0f}/s; produce_batch ...")
            shutil.rmtree(d)
            d = tempfile.mkdtemp(prefix="api-batch-", dir=scratch)
            pb.append(run_produce_batch(d, kcols, vcols))
            shutil.rmtree(d)
            log(f"  produce_batch {pb[-1]:,.0f}/s; CLI ...")
            if cli_dir:
                shutil.rmtree(cli_dir)
            cli_dir = tempfile.mkdtemp(prefix="cli-", dir=scratch)
            p, c = run_cli(exe, cli_dir, lines_file, n, check=run == 0)
            cp.append(p)
            cc.append(c)
            log(f"  cli produce {p:,.0f} lines/s consume {c:,.0f}/s")

        res["sqlite"] = {"write_rps": median_of(sw), "scan_rps": median_of(ss)}
        res["rivven"] = {
            "produce_rps": median_of(pr), "produce_batch_rps": median_of(pb),
            "read_rps": median_of(rd), "read_arrow_rps": median_of(ra),
            "read_arrow_gbps": median_of([x * kv_bytes / n / 1e9 for x in ra]),
        }
        res["cli"] = {"produce_lps": median_of(cp), "consume_rps": median_of(cc)}
        log("imports and topic list ...")
        res["imports"] = run_imports(exe, scratch, cli_dir)
        sm, rm = res["sqlite"], res["rivven"]
        res["ratios"] = {
            "produce_vs_sqlite_write": rm["produce_rps"]["median"] / sm["write_rps"]["median"],
            "produce_batch_vs_sqlite_write":
                rm["produce_batch_rps"]["median"] / sm["write_rps"]["median"],
            "read_vs_sqlite_scan": rm["read_rps"]["median"] / sm["scan_rps"]["median"],
            "read_arrow_vs_sqlite_scan":
                rm["read_arrow_rps"]["median"] / sm["scan_rps"]["median"],
            "read_arrow_gbps": rm["read_arrow_gbps"]["median"],
            "targets": {"produce_vs_sqlite_write": TARGET_PRODUCE,
                        "read_vs_sqlite_scan": TARGET_READ},
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records per run")
    ap.add_argument("--runs", type=int, default=3, help="median of this many runs")
    ap.add_argument("--json", action="store_true", help="print JSON on stdout (table on stderr)")
    ap.add_argument("--memory-records", type=int, default=0,
                    help="records for the memory check (default: 10 x --records)")
    ap.add_argument("--skip-memory", action="store_true", help="skip the memory check")
    ap.add_argument("--dir", default="/tmp", help="parent of the scratch directory")
    ap.add_argument("--mem-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.records < CHUNK or a.runs < 1:
        ap.error(f"--records must be at least {CHUNK} and --runs at least 1")
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    if a.mem_child:
        mem_child(a.mem_child, a.records)
        return
    res = run_all(a)
    c = res["config"]
    rows = build_rows(res)
    out = sys.stderr if a.json else sys.stdout
    out.write(f"rivven bench_engine: {c['records']:,} records (10 B key, 100 B value), "
              f"median of {c['runs']} run(s); {c['cpus']} CPUs, Python {c['python']}, "
              f"SQLite {c['sqlite']}\n")
    print_rows(rows, out)
    if a.json:
        sys.stdout.write(json.dumps(res, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
