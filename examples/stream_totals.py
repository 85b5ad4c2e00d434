"""A streaming pipeline on Spark Structured Streaming, exactly once: order events in the topic
``orders`` become each customer's running total in the compacted topic ``customer-totals``
(the last record per customer key is the total; a compaction drops the older ones).

    python examples/stream_totals.py [--data-dir ./rivven-data-stream] [--orders 20000]

The query reads ``orders`` as a stream, sums per customer, and writes each micro-batch's
changed totals (update mode) with the batch sink inside ``foreachBatch``, its batch id making
a replayed batch a no-op; its offsets and aggregation state are in a checkpoint. It runs in
rounds: orders arrive, the query catches up (Trigger.AvailableNow) and stops; the next round
restarts it from its checkpoint, as a redeploy would. At the end the totals read back from
the topic (read_committed) must equal the totals computed here from the orders: no order
counted twice or missed, across restarts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from collections import defaultdict

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from engine import Engine  # noqa: E402

ROUNDS = 3


def produce_orders(eng: Engine, n: int, rng: random.Random, want: dict[str, int]) -> None:
    values, keys = [], []
    for _ in range(n):
        customer = f"c{rng.randrange(200):03d}"
        cents = rng.randrange(100, 50_000)
        want[customer] += cents
        keys.append(customer.encode())
        values.append(json.dumps({"customer": customer, "cents": cents}).encode())
    for s in range(0, n, 1000):
        eng.produce_batch("orders", values[s:s + 1000], keys=keys[s:s + 1000])


def run_query(spark, data_dir: str, ckpt: str) -> int:
    orders = (spark.readStream.format("rivven").option("path", data_dir)
              .option("topic", "orders").option("startingOffsets", "earliest").load())
    totals = (orders.selectExpr("cast(key as string) as customer",
                                "cast(get_json_object(cast(value as string), '$.cents') "
                                "as long) as cents")
              .groupBy("customer").sum("cents")
              .selectExpr("cast(customer as binary) as key",
                          "cast(cast(`sum(cents)` as string) as binary) as value"))
    def write(batch, batch_id: int) -> None:
        # update mode (totals change) goes through foreachBatch: a batch id written before
        # (a restart replays the last batch) is a no-op under the prefix
        (batch.write.format("rivven").option("path", data_dir)
         .option("topic", "customer-totals").option("transactionalIdPrefix", "totals")
         .option("batchId", batch_id).mode("append").save())

    q = (totals.writeStream.outputMode("update").foreachBatch(write)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise SystemExit(f"the query failed: {q.exception()}")
    return sum(p["numInputRows"] for p in q.recentProgress)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default="./rivven-data-stream")
    ap.add_argument("--orders", type=int, default=20_000)
    a = ap.parse_args()
    shutil.rmtree(a.data_dir, ignore_errors=True)
    ckpt = os.path.join(a.data_dir, ".streams", "customer-totals")

    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource

    spark = (SparkSession.builder.master("local[*]").appName("rivven-stream-totals")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RivvenDataSource)
    rng = random.Random(7)
    want: dict[str, int] = defaultdict(int)
    with Engine.open(a.data_dir) as eng:
        eng.create_topic("orders", 4)
        eng.create_topic("customer-totals", 2, {"cleanup.policy": "compact",
                                                "segment.bytes": "4096",  # (small: rolls)
                                                "min.cleanable.dirty.ratio": "0.01"})
    for r in range(ROUNDS):
        with Engine.open(a.data_dir) as eng:
            produce_orders(eng, a.orders // ROUNDS, rng, want)
        rows = run_query(spark, a.data_dir, ckpt)
        print(f"round {r + 1}: the query read {rows:,} orders and stopped; restarting it",
              flush=True)
    spark.stop()
    got: dict[str, int] = {}
    with Engine.open(a.data_dir) as eng:
        for p in range(2):
            for rec in eng.read("customer-totals", p, 0, 10**9,
                                isolation_level="read_committed"):
                got[rec.key.decode()] = int(rec.value)  # the last per key is the total
        eng.maintenance.compact("customer-totals")
        kept = sum(len(eng.read("customer-totals", p, eng.start_offsets("customer-totals")[p],
                                10**9)) for p in range(2))
    bad = {c: (got.get(c), t) for c, t in want.items() if got.get(c) != t}
    print(f"{len(got)} customers, totals of {sum(want.values()) / 100:,.2f} in all; "
          f"after compaction customer-totals keeps {kept:,} records (the last total per "
          "customer in its sealed segments, and the active segments' records)")
    if bad:
        raise SystemExit(f"totals differ for {len(bad)} customers, e.g. {list(bad.items())[:3]}")
    print("every customer's total matches the orders: exactly once across restarts")


if __name__ == "__main__":
    main()
