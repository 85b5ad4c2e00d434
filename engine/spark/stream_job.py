"""The streaming copy job, run by ``spark-submit`` (``rivven spark stream``):
``stream_job.py PLAN.json``.

A Structured Streaming query from one topic to another, exactly once (engine.spark.sink),
optionally through a SQL transform over the view ``input`` (the source's columns: topic,
partition, offset, timestamp, key, value, headers). While it runs, ``progress.json`` next to
the plan says how far it got (batches, rows, rows per second, lag); a file ``stop`` there
stops the query between micro-batches (how the launcher ends it on Ctrl-C), and the job
writes ``result.json`` and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from engine.spark.job import PROGRESS, STARTED

STOP = "stop"


def lag_of(progress: dict[str, Any]) -> int | None:
    """Records between what the last micro-batch read to and the source's latest offsets."""
    total = None
    for src in progress.get("sources") or []:
        end, latest = (src.get(k) for k in ("endOffset", "latestOffset"))
        end = json.loads(end) if isinstance(end, str) else end
        latest = json.loads(latest) if isinstance(latest, str) else latest
        if not isinstance(end, dict) or not isinstance(latest, dict):
            continue
        for topic, parts in latest.items():
            for p, off in parts.items():
                total = (total or 0) + max(0, off - end.get(topic, {}).get(p, 0))
    return total


def tally(q: Any, seen: int, batches: int, rows: int) -> tuple[int, int, int]:
    """Micro-batches past ``seen`` in the query's recent progress, counted in."""
    for p in q.recentProgress:
        if p["batchId"] > seen:
            seen = p["batchId"]
            batches += 1
            rows += p["numInputRows"]
    return seen, batches, rows


def write_json(path: str, doc: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def main(plan_path: str) -> None:
    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource

    with open(plan_path) as f:
        plan = json.load(f)
    here = os.path.dirname(plan_path)
    t0 = time.time()
    spark = SparkSession.builder.appName(plan["app_name"]).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(RivvenDataSource)
    r = (spark.readStream.format("rivven").option("path", plan["data_dir"])
         .option("topic", plan["from"]))
    for k, v in plan["source_options"].items():
        r = r.option(k, v)
    df = r.load()
    if plan.get("transform"):
        df.createOrReplaceTempView("input")
        df = spark.sql(plan["transform"])
    else:
        df = df.select("key", "value", "headers")
    w = (df.writeStream.format("rivven").option("path", plan["data_dir"])
         .option("topic", plan["to"]).option("checkpointLocation", plan["checkpoint"]))
    if plan.get("available_now"):
        w = w.trigger(availableNow=True)
    else:
        w = w.trigger(processingTime=f"{plan['trigger_ms']} milliseconds")
    q = w.start()
    print(STARTED, flush=True)
    started = time.time()
    batches = rows = 0
    seen = -1
    stopped = False
    while q.isActive:
        if os.path.exists(os.path.join(here, STOP)):
            q.stop()  # (between micro-batches: the one running finishes or is replayed)
            stopped = True
            break
        seen, batches, rows = tally(q, seen, batches, rows)
        last: dict[str, Any] = q.lastProgress or {}
        write_json(os.path.join(here, PROGRESS), {
            "phase": "streaming", "batch": seen, "batches": batches, "rows": rows,
            "rows_per_s": last.get("processedRowsPerSecond") or 0.0,
            "lag": lag_of(last), "seconds": time.time() - started})
        time.sleep(0.5)
    q.awaitTermination(60) if not stopped else None
    error = q.exception()
    if error is not None:
        raise RuntimeError(f"the streaming query failed: {error}")
    seen, batches, rows = tally(q, seen, batches, rows)
    write_json(os.path.join(here, "result.json"), {
        "batches": batches, "rows": rows, "last_batch": seen, "stopped": stopped,
        "startup_s": started - t0, "exec_s": time.time() - started, "plan_s": 0.0,
        "job_s": time.time() - t0})
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
