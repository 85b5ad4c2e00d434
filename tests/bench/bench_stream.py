#!/usr/bin/env python3
"""Spark Structured Streaming and the sink, on local[2], after start-up (issue 19's figures):

  stream copy    records/s of a streaming copy in -> out (exactly once: each micro-batch's
                 tasks prepare, the driver commits), 4 micro-batches, over their own
                 durations (Spark's triggerExecution), after a small copy that started the
                 session's Python workers; again reading only key and value (a user schema)
  batch sink     df.write.format("rivven").save() of the same rows (a cached DataFrame),
                 against Engine.produce_batch of them in this process (1000 per call, durable)
  latency        a record's way from its produce into ``in`` to being readable (read_committed)
                 in ``out``, through a query with a 1 s processing-time trigger: p50/p99

Records: 10-byte keys, 100-byte values.

Usage: python tests/bench/bench_stream.py [--records 1200000] [--latency-s 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from engine import Engine  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def fill(eng: Engine, topic: str, n: int) -> None:
    blob = os.urandom(n * 50).hex().encode()
    for s in range(0, n, 10_000):
        m = min(10_000, n - s)
        eng.produce_batch(topic, [blob[i * 100:(i + 1) * 100] for i in range(s, s + m)],
                          keys=[b"k%09d" % i for i in range(s, s + m)])


def session() -> Any:
    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource

    s = (SparkSession.builder.master("local[2]").appName("rivven-bench-stream")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(RivvenDataSource)
    return s


def copy_query(spark: Any, d: str, src: str, dst: str, ckpt: str, per_trigger: int,
               schema: str | None) -> Any:
    r = spark.readStream.format("rivven")
    if schema:
        r = r.schema(schema)
    q = (r.option("path", d).option("topic", src).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", str(per_trigger)).load().select("key", "value")
         .writeStream.format("rivven").option("path", d).option("topic", dst)
         .option("checkpointLocation", os.path.join(d, ckpt)).trigger(availableNow=True)
         .start())
    q.awaitTermination()
    return q


def stream_copy(spark: Any, d: str, n: int, schema: str | None = None) -> dict[str, Any]:
    with Engine.open(d) as eng:
        for t in ("warm", "warm-out", "in", "out"):
            eng.create_topic(t, 4)
        fill(eng, "warm", 4000)
        fill(eng, "in", n)
    # (the first micro-batch of a session starts the Python workers: seconds, once)
    copy_query(spark, d, "warm", "warm-out", "warm-ckpt", 1000, schema)
    t = time.perf_counter()
    q = copy_query(spark, d, "in", "out", "ckpt", max(n // 4, 1), schema)
    wall = time.perf_counter() - t
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in batches)
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    with Engine.open(d, read_only=True) as eng:
        copied = sum(e for e in eng.end_offsets("out", "read_committed").values())
    assert rows == n and copied >= n, (rows, copied)
    return {"records": n, "batches": len(batches), "rate": rows / busy, "wall_s": wall,
            "rate_wall": rows / wall}


def batch_sink(spark: Any, d: str, n: int) -> dict[str, Any]:
    with Engine.open(d) as eng:
        eng.create_topic("src", 4)
        eng.create_topic("w", 4)
        eng.create_topic("p", 4)
        fill(eng, "src", n)
    df = (spark.read.format("rivven").option("path", d).option("topic", "src").load()
          .select("key", "value").repartition(2).cache())
    assert df.count() == n
    rows = df.collect()
    keys, vals = [r.key for r in rows], [r.value for r in rows]
    t = time.perf_counter()
    df.write.format("rivven").option("path", d).option("topic", "w").mode("append").save()
    sink = time.perf_counter() - t
    with Engine.open(d) as eng:
        t = time.perf_counter()
        for s in range(0, n, 1000):
            eng.produce_batch("p", vals[s:s + 1000], keys=keys[s:s + 1000])
        eng.checkpoint()
        direct = time.perf_counter() - t
    return {"records": n, "sink_rate": n / sink, "produce_batch_rate": n / direct,
            "ratio": direct / sink}


def latency(spark: Any, d: str, seconds: float) -> dict[str, Any]:
    with Engine.open(d) as eng:
        eng.create_topic("lin", 2)
        eng.create_topic("lout", 2)
    q = (spark.readStream.format("rivven").option("path", d).option("topic", "lin")
         .option("startingOffsets", "latest").load().select("key", "value", "timestamp")
         .writeStream.format("rivven").option("path", d).option("topic", "lout")
         .option("checkpointLocation", os.path.join(d, "lckpt"))
         .trigger(processingTime="1 second").start())
    stop = threading.Event()
    time.sleep(5)  # (the first micro-batch plans the query)

    def produce() -> None:
        with Engine.open(d) as eng:
            i = 0
            while not stop.is_set():
                eng.produce_batch("lin", [b"v%d" % i], keys=[b"k%d" % (i % 97)])
                i += 1
                time.sleep(0.01)

    th = threading.Thread(target=produce)
    th.start()
    lat: list[float] = []
    seen = [0, 0]
    deadline = time.time() + seconds
    with Engine.open(d, read_only=True) as eng:
        while time.time() < deadline:
            now = time.time() * 1000
            for p in (0, 1):
                rs = eng.read("lout", p, seen[p], 10**6, isolation_level="read_committed")
                for r in rs:
                    lat.append(now - r.timestamp)
                if rs:
                    seen[p] = rs[-1].offset + 1
            time.sleep(0.02)
    stop.set()
    th.join()
    q.stop()
    return {"records": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_200_000)
    ap.add_argument("--latency-s", type=float, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rivven-bench-stream-")
    try:
        spark = session()
        out = {"stream_copy": stream_copy(spark, os.path.join(root, "a"), a.records),
               "stream_copy_keyvalue": stream_copy(spark, os.path.join(root, "a2"), a.records,
                                                   "key binary, value binary"),
               "batch_sink": batch_sink(spark, os.path.join(root, "b"), a.records),
               "latency": latency(spark, os.path.join(root, "c"), a.latency_s)}
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=2))
        return
    s, b, lt = out["stream_copy"], out["batch_sink"], out["latency"]
    print(f"stream copy, exactly once   {s['rate']:>12,.0f} rec/s over {s['batches']} micro-batches "
          f"({s['rate_wall']:,.0f} rec/s wall, incl. planning)")
    s = out["stream_copy_keyvalue"]
    print(f"  reading key, value only   {s['rate']:>12,.0f} rec/s over {s['batches']} micro-batches "
          f"({s['rate_wall']:,.0f} rec/s wall)")
    print(f"batch sink                  {b['sink_rate']:>12,.0f} rec/s = {b['ratio']:.2f}x "
          f"produce_batch ({b['produce_batch_rate']:,.0f} rec/s)")
    print(f"latency, 1 s trigger        p50 {lt['p50_ms']:,.0f} ms, p99 {lt['p99_ms']:,.0f} ms "
          f"({lt['records']:,} records)")


if __name__ == "__main__":
    main()
