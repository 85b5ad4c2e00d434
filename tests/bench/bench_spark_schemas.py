#!/usr/bin/env python3
"""The ``rivven`` source decoding registry-encoded values (issue 33's Spark part), local[2],
after start-up: records/s of ``spark.read...option("decode", "value")`` over a topic of Avro
values of 10 fields (Confluent's wire format), against reading the same topic's raw binary
``value`` column, in the same run, taking turns; each read ends in an aggregate over the
value (``sum(length(value))``; ``sum(value.n0) + count(value.s0)``) so every row crosses.

Usage: python tests/bench/bench_spark_schemas.py [--records 1000000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from engine import Engine  # noqa: E402

SCHEMA = {"type": "record", "name": "Row", "namespace": "bench", "fields": [
    *({"name": f"n{i}", "type": "long"} for i in range(4)),
    *({"name": f"s{i}", "type": "string"} for i in range(3)),
    {"name": "x", "type": "double"}, {"name": "ok", "type": "boolean"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
]}


def fill(eng: Engine, topic: str, n: int) -> None:
    ser = eng.schemas.serializer(f"{topic}-value")
    for s in range(0, n, 10_000):
        vals = [ser({"n0": i, "n1": i * 7, "n2": -i, "n3": i << 20, "s0": f"name-{i}",
                     "s1": "x" * (i % 17), "s2": "city", "x": i / 3, "ok": i % 2 == 0,
                     "kind": "ABC"[i % 3]}) for i in range(s, min(n, s + 10_000))]
        eng.produce_batch(topic, vals, keys=[b"k%09d" % i for i in range(s, s + len(vals))])


def session() -> Any:
    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource

    s = (SparkSession.builder.master("local[2]").appName("rivven-bench-schemas")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(RivvenDataSource)
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rivven-bench-schemas-")
    try:
        path = os.path.join(tmp, "data")
        with Engine.open(path) as eng:
            eng.create_topic("rows", 2)
            eng.schemas.register("rows-value", json.dumps(SCHEMA))
            t0 = time.perf_counter()
            fill(eng, "rows", a.records)
            produced = time.perf_counter() - t0
        spark = session()

        def raw() -> Any:
            return (spark.read.format("rivven").option("path", path).option("topic", "rows")
                    .load().selectExpr("sum(length(value))").collect())

        def decoded() -> Any:
            return (spark.read.format("rivven").option("path", path).option("topic", "rows")
                    .option("decode", "value").load()
                    .selectExpr("sum(value.n0) + count(value.s0)").collect())

        decoded()  # (the Python workers started, the schema parsed once in each)
        times: dict[str, list[float]] = {"raw": [], "decoded": []}
        for _ in range(a.rounds):
            for name, fn in (("raw", raw), ("decoded", decoded)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        spark.stop()
        out = {k: a.records / statistics.median(v) for k, v in times.items()}
        out["ratio"] = out["decoded"] / out["raw"]
        out["produce_with_serializer"] = a.records / produced
        if a.json:
            print(json.dumps(out))
        else:
            print(f"{a.records:,} records, 10-field Avro values, local[2], median of {a.rounds}")
            print(f"  raw value column   {out['raw']:>12,.0f} rec/s")
            print(f"  decode=value       {out['decoded']:>12,.0f} rec/s  ({out['ratio']:.2f}x)")
            print(f"  (produce with eng.schemas.serializer: "
                  f"{out['produce_with_serializer']:,.0f} rec/s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
