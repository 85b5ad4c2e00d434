"""The compaction job, run by ``spark-submit`` (see engine.spark.submit): ``job.py PLAN.json``.

1. The rivven source reads only ``(partition, offset, key, tombstone)`` of every cleanable
   segment (split by segment and index position, decoded in the executors), and each split
   sends only its last record per key (``lastPerKey``: Arrow's C++ hash aggregation).
2. ``survivors`` picks the last record per key (dropping tombstones past their horizon).
3. Survivor offsets are tagged with their output segment (group) and shuffled by group; a
   ``mapInArrow`` stage writes each group's cleaned segment from its source segments
   (batches whose records all survive are copied byte for byte), indexes rebuilt, into the
   staging folder, and returns its stats. One Spark job, three stages.
4. The driver writes ``result.json`` next to the plan. The swap happens later, outside Spark,
   under the partition lock (engine.compaction.swap).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

KEYS_SCHEMA = "partition int, offset long, key binary, tombstone boolean"
STARTED = "rivven: the Spark session is up, the job starts"


def _groups(plan: dict[str, Any]) -> dict[int, tuple[int, list[dict[str, Any]], str]]:
    """gid -> (partition, source segments, staging folder), numbered in plan order."""
    out = {}
    for p in plan["partitions"]:
        out_dir = os.path.join(plan["staging"], str(p["partition"]))
        for g in p["groups"]:
            out[len(out)] = (p["partition"], g, out_dir)
    return out


def _write(plan: dict[str, Any], gid: int, offsets: list[Any], tombs: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from engine.maintenance.cleaner import write_group

    _, segs, out_dir = _groups(plan)[gid]
    keep_set = pa.concat_arrays(offsets) if offsets else pa.array([], pa.int64())

    def keep(offs: Any) -> Any:
        return pc.is_in(pa.array(offs, pa.int64()), value_set=keep_set)

    return {**write_group(segs, keep, out_dir), "gid": gid, "tombstones_kept": tombs}


STATS_SCHEMA = "stats string"


def write_task(plan_path: str, batches: Iterator[Any]) -> Iterator[Any]:
    """One task of the write stage (``mapInArrow``): the survivors ``(gid, offset, tombstone)``
    of some groups in any order -> each group's cleaned segment, one JSON stats row per group.
    Grouping happens here in Arrow (C++), so Spark needs no sort before this stage."""
    import pyarrow as pa

    with open(plan_path) as f:
        plan = json.load(f)
    got = list(batches)
    t = pa.Table.from_batches(got) if got else None  # a task may receive no group at all
    if t is not None and t.num_rows:
        by_gid = (t.group_by("gid").aggregate([("offset", "list"), ("tombstone", "sum")])
                  .sort_by("gid"))
        lists = by_gid["offset_list"].combine_chunks()
        for i, (gid, tombs) in enumerate(zip(by_gid["gid"].to_pylist(),
                                             by_gid["tombstone_sum"].to_pylist())):
            st = _write(plan, gid, [lists[i].values], int(tombs or 0))
            yield pa.RecordBatch.from_pydict({"stats": [json.dumps(st)]})


def map_in_arrow(df: Any, func: Any, schema: str) -> Any:
    """``df.mapInArrow(func, schema)`` without pandas: PySpark checks for pandas when it builds
    the UDF although the Arrow path never uses it (the Python data source runs on the same
    path without it). With pandas installed, the public call."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        from pyspark.sql import DataFrame
        from pyspark.sql.udf import _create_udf
        from pyspark.util import PythonEvalType

        udf = _create_udf(func, schema, PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
        col = udf(*[df[c] for c in df.columns])
        return DataFrame(df._jdf.mapInArrow(col._jc, False, None), df.sparkSession)
    return df.mapInArrow(func, schema)


class _FirstJob(threading.Thread):
    """Notes when the first Spark job starts (the status tracker, polled every 10 ms)."""

    def __init__(self, spark: Any) -> None:
        super().__init__(daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.stop = threading.Event()
        self.at: float | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            if self.tracker.getActiveJobsIds():
                self.at = time.time()
                return
            time.sleep(0.01)


def _watch_first_job(spark: Any) -> _FirstJob:
    w = _FirstJob(spark)
    w.start()
    return w


def run(spark: Any, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from engine.maintenance.cleaner import write_group
    from engine.spark.job import write_task  # by reference: this file runs as __main__
    from engine.spark.source import RivvenDataSource
    from engine.spark.transform import survivors

    spark.dataSource.register(RivvenDataSource)
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # the shuffles carry keys and offsets only: Spark's 200 partitions cost more in
        # per-partition overhead than they spread (a --conf still wins)
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(max(2, 2 * spark.sparkContext.defaultParallelism)))
    if not spark.sparkContext.getConf().contains("spark.sql.adaptive.enabled"):
        # AQE runs each shuffle stage as a job of its own and re-plans in between (about a
        # second per stage here) to tune shuffles that carry one small row per key anyway
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    parts = plan["partitions"]
    groups = _groups(plan)
    ranges = [(part, g[0]["base_offset"], g[-1]["next_offset"], gid)
              for gid, (part, g, _) in groups.items()]
    par = spark.sparkContext.defaultParallelism
    total = sum(s["bytes"] for p in parts for g in p["groups"] for s in g)
    # two tasks per core: each task starts a Python worker, which costs more than it reads
    split_bytes = plan.get("split_bytes") or max(16 << 20, -(-total // (4 * par)))
    keys = (spark.read.format("rivven").schema(KEYS_SCHEMA)
            .option("path", plan["data_dir"]).option("topic", plan["topic"])
            .option("partitions", ",".join(str(p["partition"]) for p in parts))
            .option("endOffsets", json.dumps({p["partition"]: p["cleanable_end"] for p in parts}))
            .option("splitBytes", str(split_bytes)).option("splits", str(2 * par))
            # each split sends only its last record per key: the JVM's share of the work
            # (Arrow -> rows, hash aggregation) shrinks to about one row per distinct key
            .option("lastPerKey", "true")
            .load()
            # one topic: a literal, which Spark drops from the grouping keys
            .withColumn("topic", F.lit(plan["topic"])))
    surv = survivors(keys, {p["partition"]: p["tombstone_bound"] for p in parts})
    # each survivor's output segment: a CASE over the groups' offset ranges (no join, and no
    # small DataFrame to ship: that would cost a job of its own)
    gid = None
    for part, lo, hi, g in ranges:
        cond = (F.col("partition") == part) & (F.col("offset") >= lo) & (F.col("offset") < hi)
        gid = F.when(cond, F.lit(g)) if gid is None else gid.when(cond, F.lit(g))
    tagged = (surv.withColumn("gid", gid).where(F.col("gid").isNotNull())
              .select("gid", "offset", "tombstone"))
    planned = time.time()
    first_job = _watch_first_job(spark)
    # the writes run in the stage that receives the survivors: a mapInArrow, not a Python data
    # source sink, whose planning and commit each cost a Python process in the driver
    rows = [json.loads(r.stats) for r in
            map_in_arrow(tagged.repartition(max(1, min(len(groups), 2 * par)), "gid"),
                         functools.partial(write_task, plan_path), STATS_SCHEMA).collect()]
    done = {r["gid"] for r in rows}
    for gid, (_, segs, out_dir) in groups.items():  # no survivor at all: an empty segment
        if gid not in done:
            st = write_group(segs, lambda offs: [False] * len(offs), out_dir)
            rows.append({**st, "gid": gid, "tombstones_kept": 0})
    by_part: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["gid"]):
        by_part.setdefault(str(groups[r["gid"]][0]), []).append(r)
    first_job.stop.set()
    return {"partitions": by_part, "planned_at": planned, "done_at": time.time(),
            "first_job_at": first_job.at or planned}


def main(argv: list[str]) -> int:
    return run_job(argv, "compact", run)


def run_job(argv: list[str], kind: str, body: Any) -> int:
    """The main of each Spark job: read the plan, start the session, ``body(spark, plan,
    plan_path)`` returns the result with ``done_at`` (and ``first_job_at`` when planning came
    first), and the result goes to ``result.json`` with the timings."""
    from pyspark.sql import SparkSession

    plan_path = argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    t0 = time.time()
    spark = SparkSession.builder.appName(f"rivven-{kind}-{plan['topic'] or 'all'}").getOrCreate()
    started = time.time()
    print(STARTED, flush=True)  # (the launcher's failpoint spark-job-running waits for it)
    try:
        result = body(spark, plan, plan_path)
    finally:
        spark.stop()
    result.pop("planned_at", None)
    done = result.pop("done_at")
    first = result.pop("first_job_at", started)
    # start-up as the compaction issue counts it: everything before the first job runs
    result.update({"startup_s": started - t0, "plan_s": first - started, "exec_s": done - first,
                   "job_s": done - started})
    write_result(plan_path, result)
    return 0


def write_result(plan_path: str, result: dict[str, Any]) -> None:
    """``result.json`` next to the plan, whole or not at all (the launcher reads it)."""
    from engine.storage import guard  # (this file runs as a script: no relative imports)

    tmp = os.path.join(os.path.dirname(plan_path), "result.json.tmp")
    with open(tmp, "w", opener=guard.opener) as f:
        json.dump(result, f)
    os.replace(tmp, os.path.join(os.path.dirname(plan_path), "result.json"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
