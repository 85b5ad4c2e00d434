#!/usr/bin/env python3
"""rivven beside LMDB, SQLite and a plain file, in one process, on the same records:
``make bench`` prints one side-by-side table (docs/BENCHMARKS.md says how to read it).

Records as /work/shared/peers/ makes them: 10-byte keys, 100-byte values, calls of 1000, one
fdatasync per call for every store (LMDB: its default sync commit; SQLite: WAL, synchronous
FULL; the plain file: length-prefixed batches, write + fdatasync; rivven: wal.sync=always).
Every store runs once per round, the rounds interleaved (a noisy machine slows all alike);
figures are medians over the rounds, in records per second unless marked. Each rivven
produce mode runs in a fresh engine and its time includes the checkpoint at the end (the
fsync of its segments, which a steady stream pays every checkpoint.interval.bytes of WAL).

  produce        1000 records per call (rivven: produce(list of Record))
  produce_batch  rivven produce_batch(values, keys=keys)
  produce_arrow  rivven produce_arrow(pyarrow Table of 1000 rows); "100k": of 100,000 rows,
                 against the plain file writing (and fdatasyncing) 100,000 records per call
  produce 4 threads
                 4 threads, each producing its quarter of the records in calls of 1000 to its
                 own partition of one 4-partition topic (one Engine); the plain file: 4 threads,
                 each with a file of its own (write + fdatasync per 1000-record body)
  read           records as Python objects: rivven read() (Record, key and value touched),
                 LMDB cursor (key, value) tuples, SQLite SELECT rows, the file decoded to bytes
  read_arrow     rivven read_arrow(offset, 100,000) (a pyarrow Table, zero-copy per batch)
  latency        p50/p99/p999 ms of one durable 1000-record call (rivven produce, LMDB commit,
                 SQLite commit, file write+fdatasync)
  cpu/call       rivven produce CPU per 1000-record call with wal.sync=none (process time)

Usage: python tests/bench/bench_peers.py [--records 500000] [--rounds 3] [--json]
Needs lmdb (pip install -e '.[bench]').
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import struct
import sys
import tempfile
import threading
import time
from typing import Any

CHUNK = 1000
BIG = 100_000
THREADS = 4


def make_records(n: int) -> tuple[list[bytes], list[bytes]]:
    blob = os.urandom(n * 50).hex().encode()
    return [b"k%09d" % i for i in range(n)], [blob[i * 100:(i + 1) * 100] for i in range(n)]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed_calls(calls: list[Any]) -> tuple[float, list[float]]:
    lat = []
    t0 = time.perf_counter()
    for c in calls:
        t = time.perf_counter()
        c()
        lat.append(time.perf_counter() - t)
    return time.perf_counter() - t0, lat


def in_threads(parts: list[list[Any]]) -> None:
    """Run each list of calls on a thread of its own, all at once; the first error is raised."""
    errors: list[BaseException] = []

    def run(calls: list[Any]) -> None:
        try:
            for c in calls:
                c()
        except BaseException as e:  # (re-raised on the main thread below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(calls,)) for calls in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def quarters(n: int) -> list[range]:
    """The chunk starts of each thread's share: consecutive quarters of the records."""
    per = n // THREADS
    return [range(i * per, (i + 1) * per, CHUNK) for i in range(THREADS)]


# ---------------------------------------------------------------- the stores
def run_rivven(d: str, keys: list[bytes], vals: list[bytes]) -> dict[str, Any]:
    import pyarrow as pa

    from engine import Engine, Record

    n = len(keys)
    out: dict[str, Any] = {}
    recs = [[Record(keys[i], vals[i]) for i in range(s, s + CHUNK)] for s in range(0, n, CHUNK)]
    tables = [pa.table({"key": pa.array(keys[s:s + CHUNK], pa.binary()),
                        "value": pa.array(vals[s:s + CHUNK], pa.binary())})
              for s in range(0, n, CHUNK)]
    big = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary())})

    def mode(topic: str, calls: list[Any], partitions: int = 1,
             threaded: list[list[Any]] | None = None) -> tuple[float, list[float]]:
        # each mode in an engine of its own, its time ending with the checkpoint that makes
        # the segments durable too: every mode pays it alike (one that ran after another
        # would pay for the other's data too)
        with Engine.open(os.path.join(d, topic), sync=True) as eng:
            eng.create_topic(topic, partitions=partitions)
            engines[topic] = eng
            t0 = time.perf_counter()
            lat: list[float] = []
            if threaded is None:
                _, lat = timed_calls(calls)
            else:
                in_threads(threaded)
            eng.checkpoint()
            return time.perf_counter() - t0, lat

    engines: dict[str, Any] = {}
    el, lat = mode("p", [lambda b=b: engines["p"].produce("p", b) for b in recs])
    out["produce"], out["latency"] = n / el, lat
    el, _ = mode("b", [lambda s=s: engines["b"].produce_batch("b", vals[s:s + CHUNK],
                                                               keys=keys[s:s + CHUNK])
                       for s in range(0, n, CHUNK)])
    out["produce_batch"] = n / el
    el, _ = mode("a", [lambda t=t: engines["a"].produce_arrow("a", t) for t in tables])
    out["produce_arrow"] = n / el
    el, _ = mode("x", [lambda s=s: engines["x"].produce_arrow("x", big.slice(s, BIG))
                       for s in range(0, n, BIG)])
    out["produce_arrow_100k"] = n / el
    el, _ = mode("t", [], partitions=THREADS, threaded=[
        [lambda b=recs[s // CHUNK], i=i: engines["t"].produce("t", b, partition=i) for s in q]
        for i, q in enumerate(quarters(n))])
    out["produce_4threads"] = n / el
    d = os.path.join(d, "p")
    with Engine.open(d, read_only=True) as eng:
        eng.read_arrow("p", 0, 0, 1)  # (pyarrow imported before the clock)
        t = time.perf_counter()
        off = got = 0
        while off < n:
            rs = eng.read("p", 0, off, CHUNK)
            touched = [(r.key, r.value) for r in rs]  # (what a reader does with a record)
            assert len(touched) == len(rs)
            off = rs[-1].offset + 1
            got += len(rs)
        out["read"] = got / (time.perf_counter() - t)
        t = time.perf_counter()
        off = batches = 0
        while off < n:
            tbl = eng.read_arrow("p", 0, off, BIG)
            off += tbl.num_rows
            batches += tbl.column("value").num_chunks
        el = time.perf_counter() - t
        out["read_arrow"] = n / el
        out["read_arrow_batch_us"] = el / batches * 1e6
    with Engine.open(d + "-none", sync=False) as eng:
        eng.create_topic("c", partitions=1)
        for b in recs[:20]:
            eng.produce("c", b)
        cpu = []
        for b in recs:
            c = time.process_time()
            eng.produce("c", b)
            cpu.append(time.process_time() - c)
        out["cpu_us"] = statistics.median(cpu) * 1e6
    return out


def run_lmdb(d: str, keys: list[bytes], vals: list[bytes]) -> dict[str, Any]:
    import lmdb

    n = len(keys)
    okeys = [struct.pack(">Q", i) for i in range(n)]
    env = lmdb.open(d, map_size=4 << 30)

    def commit(s: int) -> None:
        with env.begin(write=True) as txn:
            txn.cursor().putmulti(zip(okeys[s:s + CHUNK], vals[s:s + CHUNK]), append=True)

    el, lat = timed_calls([lambda s=s: commit(s) for s in range(0, n, CHUNK)])
    t = time.perf_counter()
    with env.begin() as txn:
        got = sum(1 for _ in txn.cursor())
    rd = got / (time.perf_counter() - t)
    env.close()
    return {"produce": n / el, "latency": lat, "read": rd}


def run_sqlite(d: str, keys: list[bytes], vals: list[bytes]) -> dict[str, Any]:
    n = len(keys)
    path = os.path.join(d, "log.db")
    os.makedirs(d, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute('CREATE TABLE log ("offset" INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)')
    con.commit()
    sql = 'INSERT INTO log ("offset", ts, key, value) VALUES (?,?,?,?)'

    def commit(s: int) -> None:
        con.executemany(sql, zip(range(s, s + CHUNK), range(s, s + CHUNK), keys[s:s + CHUNK],
                                 vals[s:s + CHUNK]))
        con.commit()

    el, lat = timed_calls([lambda s=s: commit(s) for s in range(0, n, CHUNK)])
    t = time.perf_counter()
    got = sum(1 for _ in con.execute('SELECT "offset", ts, key, value FROM log ORDER BY "offset"'))
    rd = got / (time.perf_counter() - t)
    con.close()
    return {"produce": n / el, "latency": lat, "read": rd}


def run_file(d: str, keys: list[bytes], vals: list[bytes]) -> dict[str, Any]:
    n = len(keys)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "log.bin")
    out: dict[str, Any] = {}

    def create(name: str) -> int:
        return os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(fd: int, s: int, m: int = CHUNK) -> None:
        # (the packing is timed too: rivven's encoding is)
        ks, vs = keys[s:s + m], vals[s:s + m]
        fmt = f"<{len(ks)}i"
        body = b"".join((struct.pack(fmt, *map(len, ks)), struct.pack(fmt, *map(len, vs)),
                         b"".join(ks), b"".join(vs)))
        os.write(fd, struct.pack("<ii", len(body), len(ks)) + body)
        os.fdatasync(fd)

    fd = create("log.bin")
    el, lat = timed_calls([lambda s=s: write(fd, s) for s in range(0, n, CHUNK)])
    os.close(fd)
    out["produce"], out["latency"] = n / el, lat
    fd = create("log-100k.bin")
    el, _ = timed_calls([lambda s=s: write(fd, s, BIG) for s in range(0, n, BIG)])
    os.close(fd)
    out["produce_100k"] = n / el
    fds = [create(f"log-t{i}.bin") for i in range(THREADS)]
    t0 = time.perf_counter()
    in_threads([[lambda s=s, fd=fd: write(fd, s) for s in q] for fd, q in zip(fds, quarters(n))])
    out["produce_4threads"] = n / (time.perf_counter() - t0)
    for fd in fds:
        os.close(fd)
    t = time.perf_counter()
    with open(path, "rb") as f:
        buf = f.read()
    p = got = 0
    while p < len(buf):
        blen, m = struct.unpack_from("<ii", buf, p)
        q = p + 8
        kl = struct.unpack_from(f"<{m}i", buf, q)
        vl = struct.unpack_from(f"<{m}i", buf, q + 4 * m)
        q += 8 * m
        ks, vs = [], []
        for ln in kl:
            ks.append(buf[q:q + ln])
            q += ln
        for ln in vl:
            vs.append(buf[q:q + ln])
            q += ln
        got += len(list(zip(ks, vs)))
        p += 8 + blen
    out["read"] = got / (time.perf_counter() - t)
    return out


def fdatasync_ms(d: str, count: int = 200) -> float:
    path = os.path.join(d, "sync.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    blob = os.urandom(110_000)
    times = []
    for _ in range(count):
        os.write(fd, blob)
        t = time.perf_counter()
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------- the table
STORES = (("rivven", run_rivven), ("lmdb", run_lmdb), ("sqlite", run_sqlite), ("file", run_file))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n = a.records - a.records % BIG or BIG
    keys, vals = make_records(n)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in STORES}
    root = tempfile.mkdtemp(prefix="rivven-bench-")
    try:
        sync_ms = fdatasync_ms(root)
        for r in range(a.rounds):
            for name, fn in STORES:
                d = os.path.join(root, f"{name}-{r}")
                runs[name].append(fn(d, keys, vals))
                shutil.rmtree(d, ignore_errors=True)
                shutil.rmtree(d + "-none", ignore_errors=True)
                sys.stderr.write(f"round {r + 1}/{a.rounds}: {name} done\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def med(store: str, key: str) -> float | None:
        xs = [x[key] for x in runs[store] if key in x]
        return statistics.median(xs) if xs else None

    def lat(store: str, q: float) -> float:
        return pct([v for x in runs[store] for v in x["latency"]], q) * 1e3

    report: dict[str, Any] = {"records": n, "rounds": a.rounds, "fdatasync_ms": sync_ms,
                              "stores": {}}
    for name, _ in STORES:
        row = {k: med(name, k) for k in ("produce", "produce_batch", "produce_arrow",
                                          "produce_arrow_100k", "produce_100k", "produce_4threads",
                                          "read", "read_arrow", "read_arrow_batch_us", "cpu_us")}
        row.update({"p50_ms": lat(name, 0.5), "p99_ms": lat(name, 0.99),
                    "p999_ms": lat(name, 0.999)})
        report["stores"][name] = {k: v for k, v in row.items() if v is not None}
    s = report["stores"]
    # rivven over the plain file at the same fdatasync cadence (ratios of the medians)
    report["rivven_vs_file"] = {k: s["rivven"][k] / s["file"][f] for k, f in (
        ("produce", "produce"), ("produce_batch", "produce"), ("produce_arrow", "produce"),
        ("produce_arrow_100k", "produce_100k"), ("produce_4threads", "produce_4threads"))}
    report["threads_vs_one"] = {name: s[name]["produce_4threads"] / s[name]["produce"]
                                for name in ("rivven", "file")}
    if a.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{n:,} records (10-byte key, 100-byte value), calls of {CHUNK}, median of {a.rounds} "
          f"interleaved rounds; fdatasync of 110 KB here: {sync_ms:.2f} ms")
    print(f"{'':34}{'rivven':>12}{'LMDB':>12}{'SQLite':>12}{'file':>12}{'rivven/LMDB':>13}"
          f"{'rivven/file':>13}")

    def line(label: str, key: str, fmt: str = "{:>12,.0f}", lmdb_key: str | None = None,
             file_key: str | None = None, shown: tuple[str, ...] = ("lmdb", "sqlite", "file")) -> None:
        # lmdb_key / file_key: the peer's figure rivven's is set against (default: the same key;
        # "" for none); shown: the peers whose cell is printed (a plain figure the row is set
        # against is printed on its own line, and repeated only in LMDB's column)
        peer = {"lmdb": key if lmdb_key is None else lmdb_key, "sqlite": key}
        peer["file"] = peer["lmdb"] if file_key is None else file_key
        cells = [fmt.format(s["rivven"][key])]
        for name in ("lmdb", "sqlite", "file"):
            v = s[name].get(peer[name]) if name in shown else None
            cells.append(fmt.format(v) if v is not None else f"{'-':>12}")
        ratios = ""
        for name in ("lmdb", "file"):
            rv, pv = s["rivven"].get(key), s[name].get(peer[name])
            ratios += f"{(pv / rv if key.endswith('_ms') else rv / pv):>12.2f}x" if rv and pv \
                else f"{'-':>13}"
        print(f"{label:34}{''.join(cells)}{ratios}")

    plain = ("lmdb",)  # (set against the plain produce / read of LMDB and the file)
    line("produce, durable (rec/s)", "produce")
    line("produce_batch, durable", "produce_batch", lmdb_key="produce", shown=plain)
    line("produce_arrow 1000 rows, durable", "produce_arrow", lmdb_key="produce", shown=plain)
    line("produce_arrow 100k rows, durable", "produce_arrow_100k", lmdb_key="produce",
         file_key="produce_100k", shown=("lmdb", "file"))
    line(f"produce {THREADS} threads, durable", "produce_4threads", lmdb_key="",
         file_key="produce_4threads", shown=("file",))
    line("read: Python records (rec/s)", "read")
    line("read_arrow 100k (rec/s)", "read_arrow", lmdb_key="read", shown=plain)
    line("latency p50 (ms)", "p50_ms", "{:>12.3f}")
    line("latency p99 (ms)", "p99_ms", "{:>12.3f}")
    line("latency p999 (ms)", "p999_ms", "{:>12.3f}")
    print(f"{'read_arrow per batch (us)':34}{s['rivven']['read_arrow_batch_us']:>12.1f}")
    print(f"{'produce CPU/call, wal.sync=none':34}{s['rivven']['cpu_us']:>10.0f}us")
    tv = report["threads_vs_one"]
    print(f"{f'produce {THREADS} threads / 1 thread':34}{tv['rivven']:>11.2f}x{'':24}"
          f"{tv['file']:>11.2f}x")
    print("(latency ratios: the peer's over rivven's, so above 1 means rivven is faster)")
    print(f"({THREADS} threads: rivven to {THREADS} partitions of one topic, the file to {THREADS} "
          "files, each thread a quarter of the records)")


if __name__ == "__main__":
    main()
