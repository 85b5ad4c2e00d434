"""The compaction job, run by ``spark-submit`` (see engine.spark.submit): ``job.py PLAN.json``.

1. The rivven source reads only ``(topic, partition, offset, key, tombstone)`` of every
   cleanable segment (split by segment and index position, decoded in the executors).
2. ``survivors`` picks the last record per key (dropping tombstones past their horizon).
3. Survivor offsets are tagged with their output segment (group) and sorted; the
   ``rivven-compact`` sink writes each group's cleaned segment from its source segments
   (batches whose records all survive are copied byte for byte), indexes rebuilt, into the
   staging folder.
4. The driver writes ``result.json`` next to the plan. The swap happens later, outside Spark,
   under the partition lock (engine.compaction.swap).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

KEYS_SCHEMA = "topic string, partition int, offset long, key binary, tombstone boolean"


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

    from engine.compaction import write_group

    _, segs, out_dir = _groups(plan)[gid]
    keep_set = pa.concat_arrays(offsets) if offsets else pa.array([], pa.int64())

    def keep(offs: Any) -> Any:
        return pc.is_in(pa.array(offs, pa.int64()), value_set=keep_set)

    return {**write_group(segs, keep, out_dir), "gid": gid, "tombstones_kept": tombs}


def sink() -> Any:
    """The ``rivven-compact`` data source: writes each group's cleaned segment from its
    survivor offsets ``(gid, offset, tombstone)``, sorted by gid then offset per task."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Done(WriterCommitMessage):
        def __init__(self, stats: list[dict[str, Any]]) -> None:
            self.stats = stats

    class Writer(DataSourceArrowWriter):
        def __init__(self, plan_path: str) -> None:
            self.plan_path = plan_path

        def write(self, iterator: Any) -> Done:
            import pyarrow.compute as pc

            with open(self.plan_path) as f:
                plan = json.load(f)
            stats: list[dict[str, Any]] = []
            gid, offsets, tombs = None, [], 0
            for batch in iterator:
                gids = batch.column("gid")
                for g in pc.unique(gids).to_pylist():  # sorted: each gid is one run
                    rows = batch.filter(pc.equal(gids, g))
                    if g != gid:
                        if gid is not None:
                            stats.append(_write(plan, gid, offsets, tombs))
                        gid, offsets, tombs = g, [], 0
                    offsets.append(rows.column("offset"))
                    tombs += pc.sum(rows.column("tombstone").cast("int64")).as_py() or 0
            if gid is not None:
                stats.append(_write(plan, gid, offsets, tombs))
            return Done(stats)

        def commit(self, messages: list[Any]) -> None:
            stats = [s for m in messages if m is not None for s in m.stats]
            path = os.path.join(os.path.dirname(self.plan_path), "written.json")
            with open(path, "w") as f:
                json.dump(stats, f)

    class Sink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rivven-compact"

        def writer(self, schema: Any, overwrite: bool) -> Writer:
            return Writer(self.options["plan"])

    return Sink


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

    from engine.compaction import write_group
    from engine.spark.source import RivvenDataSource
    from engine.spark.transform import survivors

    spark.dataSource.register(RivvenDataSource)
    spark.dataSource.register(sink())
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # the shuffles carry keys and offsets only: Spark's 200 partitions cost more in
        # per-partition overhead than they spread (a --conf still wins)
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(max(2, 2 * spark.sparkContext.defaultParallelism)))
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
            .load())
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
    (tagged.repartition(max(1, min(len(groups), 2 * par)), "gid")
     .sortWithinPartitions("gid", "offset")
     .write.format("rivven-compact").mode("append").option("plan", plan_path).save())
    with open(os.path.join(os.path.dirname(plan_path), "written.json")) as f:
        rows = json.load(f)
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
    from pyspark.sql import SparkSession

    plan_path = argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    t0 = time.time()
    spark = SparkSession.builder.appName(f"rivven-compact-{plan['topic']}").getOrCreate()
    started = time.time()
    try:
        result = run(spark, plan, plan_path)
    finally:
        spark.stop()
    planned, done, first = (result.pop(k) for k in ("planned_at", "done_at", "first_job_at"))
    # start-up as the compaction issue counts it: everything before the first job runs
    result.update({"startup_s": started - t0, "plan_s": first - started, "exec_s": done - first,
                   "job_s": done - started})
    tmp = os.path.join(os.path.dirname(plan_path), "result.json.tmp")
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, os.path.join(os.path.dirname(plan_path), "result.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
