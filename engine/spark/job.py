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

import contextlib
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
    out: dict[int, tuple[int, list[dict[str, Any]], str]] = {}
    for p in plan["partitions"]:
        out_dir = os.path.join(plan["staging"], str(p["partition"]))
        for g in p["groups"]:
            out[len(out)] = (p["partition"], g, out_dir)
    return out


def crypt(plan: dict[str, Any], keys: Any, partition: int) -> tuple[Any, Any]:
    """``(opener, seal)`` of write_group for one partition: an encrypted topic's batches are
    opened with ``keys`` (engine.crypto.topic.StaticKeys), and those written anew sealed with
    its current key when the plan says the topic encrypts (``seal``)."""
    if keys is None:
        return None, None
    seal = functools.partial(keys.seal_batch, partition=partition) if plan.get("seal") else None
    return keys.opener_for(partition), seal


def txn_rules(plan: dict[str, Any], partition: int) -> Any:
    """The cleaner's rules for one partition's transaction markers (its plan's)."""
    from engine.maintenance.cleaner import TxnRules

    return TxnRules.of_plan(next(p for p in plan["partitions"] if p["partition"] == partition))


def _write(plan: dict[str, Any], gid: int, offsets: list[Any], tombs: int, keys: Any = None
           ) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from engine.maintenance.cleaner import write_group

    part, segs, out_dir = _groups(plan)[gid]
    keep_set = pa.concat_arrays(offsets) if offsets else pa.array([], pa.int64())

    def keep(offs: Any) -> Any:
        return pc.is_in(pa.array(offs, pa.int64()), value_set=keep_set)

    return {**write_group(segs, keep, out_dir, *crypt(plan, keys, part), txn_rules(plan, part)),
            "gid": gid,
            "tombstones_kept": tombs}


STATS_SCHEMA = "stats string"


def write_task(plan_path: str, keys: Any, batches: Iterator[Any]) -> Iterator[Any]:
    """One task of the write stage (``mapInArrow``): the survivors ``(gid, offset, tombstone)``
    of some groups in any order -> each group's cleaned segment, one JSON stats row per group.
    Grouping happens here in Arrow (C++), so Spark needs no sort before this stage. ``keys``:
    an encrypted topic's data keys (pickled into the task with this function)."""
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
            st = _write(plan, gid, [lists[i].values], int(tombs or 0), keys)
            yield pa.RecordBatch.from_pydict({"stats": [json.dumps(st)]})


def map_in_arrow(df: Any, func: Any, schema: str) -> Any:
    """``df.mapInArrow(func, schema)`` without pandas: PySpark checks for pandas when it builds
    the UDF although the Arrow path never uses it (the Python data source runs on the same
    path without it). With pandas installed, the public call."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        pandas = None
    if pandas is not None:
        return df.mapInArrow(func, schema)
    # (outside the except block: an error here must not read as "no module named pandas")
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import _create_udf
    from pyspark.util import PythonEvalType

    udf = _create_udf(func, schema, PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    col = udf(*[df[c] for c in df.columns])
    return DataFrame(df._jdf.mapInArrow(col._jc, False, None), df.sparkSession)


PROGRESS = "progress.json"
FINAL_JOB = ("SUCCEEDED", "FAILED")


Counts = tuple[int, int, int]  # a stage's tasks: in all, completed, running


def progress_state(stages: dict[int, Counts | None], jobs_active: bool) -> dict[str, Any]:
    """What ``progress.json`` says, from ``{stage id: (tasks, completed, running)}`` of the
    jobs seen so far (None: not known yet; the stages of finished jobs with their final
    counts, skipped stages left out): stages and tasks in all, how many are done, the phase.

    >>> progress_state({0: (4, 4, 0), 1: (2, 1, 1), 2: None}, True)["stages_done"]
    1
    """
    counts = [c or (0, -1, 0) for c in stages.values()]  # (an unknown stage is not done)
    return {"phase": "running" if jobs_active else "finishing" if counts else "planning",
            "stages": len(counts), "stages_done": sum(1 for n, d, _ in counts if d >= n),
            "tasks": sum(n for n, _, _ in counts),
            "tasks_done": sum(max(d, 0) for _, d, _ in counts),
            "tasks_running": sum(r for _, _, r in counts)}


class Watch(threading.Thread):
    """The driver's own view of its jobs through Spark's status tracker, polled from this
    thread (a few py4j calls, off the job's path): when the first job starts (polled every
    10 ms until then: the planning/run split of the timings) and, with ``path``, the jobs'
    stages and tasks, written to ``path`` (``progress.json`` in the staging folder, which the
    launcher reads for its progress bar) when they change, every 0.2 s at most. A file, not
    the driver's stdout: it reaches the launcher wherever the driver runs (client or cluster
    deploy mode), as ``result.json`` does."""

    def __init__(self, spark: Any, path: str | None) -> None:
        super().__init__(daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.path = path
        self.halt = threading.Event()
        self.first_job_at: float | None = None
        self.stages: dict[int, Counts | None] = {}
        self.final: set[int] = set()  # jobs whose stages are counted for good
        self.last: dict[str, Any] | None = None

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.poll()
            except Exception:  # (the session going away under a call)
                return
            if self.first_job_at is not None and self.path is None:
                return
            self.halt.wait(0.01 if self.first_job_at is None else 0.2)

    def poll(self) -> None:
        t = self.tracker
        if self.first_job_at is None and not t.getActiveJobsIds():  # (one call per 10 ms)
            if self.path is not None and self.last is None:
                self.last = progress_state({}, False)
                write_json(self.path, self.last)
            return
        if self.first_job_at is None:
            self.first_job_at = time.time()
        if self.path is None:
            return
        active = False
        for jid in sorted(set(t.getJobIdsForGroup(None)) | set(t.getActiveJobsIds())):
            if jid in self.final:
                continue
            job = t.getJobInfo(jid)
            if job is None:
                continue
            done = job.status in FINAL_JOB
            active |= not done
            for sid in job.stageIds:
                st = t.getStageInfo(sid)
                if done and (st is None or st.numCompletedTasks < st.numTasks):
                    self.stages.pop(sid, None)  # skipped (or failed, or forgotten)
                elif st is None:  # (the tracker's weak consistency: known later)
                    self.stages.setdefault(sid, None)
                else:
                    self.stages[sid] = (st.numTasks, st.numCompletedTasks,
                                        0 if done else st.numActiveTasks)
            if done:
                self.final.add(jid)
        state = progress_state(self.stages, active)
        if state != self.last:
            write_json(self.path, state)
            self.last = state

    def stop(self) -> None:
        """Stop polling, after a last look (the final counts)."""
        self.halt.set()
        self.join(5)
        if self.path is not None and not self.is_alive():
            with contextlib.suppress(Exception):
                self.poll()


def run(spark: Any, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from engine.maintenance.cleaner import write_group
    from engine.spark.job import crypt, txn_rules, write_task  # by reference: runs as __main__
    from engine.spark.keys import for_topic
    from engine.spark.source import RivvenDataSource
    from engine.spark.transform import survivors

    # an encrypted topic's data keys: from the launcher (or the keyring, run by hand)
    keys = for_topic(plan["data_dir"], plan["topic"]) if plan.get("topic_id") else None

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
    records = (spark.read.format("rivven").schema(KEYS_SCHEMA)
            .option("path", plan["data_dir"]).option("topic", plan["topic"])
            .option("partitions", ",".join(str(p["partition"]) for p in parts))
            .option("endOffsets", json.dumps({p["partition"]: p["cleanable_end"] for p in parts}))
            # the records of aborted transactions are never survivors (Kafka's cleaner)
            .option("aborted", json.dumps({p["partition"]: p.get("aborted", []) for p in parts}))
            .option("splitBytes", str(split_bytes)).option("splits", str(2 * par))
            # each split sends only its last record per key: the JVM's share of the work
            # (Arrow -> rows, hash aggregation) shrinks to about one row per distinct key
            .option("lastPerKey", "true")
            .load()
            # one topic: a literal, which Spark drops from the grouping keys
            .withColumn("topic", F.lit(plan["topic"])))
    surv = survivors(records, {p["partition"]: p["tombstone_bound"] for p in parts})
    # each survivor's output segment: a CASE over the groups' offset ranges (no join, and no
    # small DataFrame to ship: that would cost a job of its own)
    gid = None
    for part, lo, hi, g in ranges:
        cond = (F.col("partition") == part) & (F.col("offset") >= lo) & (F.col("offset") < hi)
        gid = F.when(cond, F.lit(g)) if gid is None else gid.when(cond, F.lit(g))
    tagged = (surv.withColumn("gid", gid).where(F.col("gid").isNotNull())
              .select("gid", "offset", "tombstone"))
    planned = time.time()
    # the writes run in the stage that receives the survivors: a mapInArrow, not a Python data
    # source sink, whose planning and commit each cost a Python process in the driver
    rows = [json.loads(r.stats) for r in
            map_in_arrow(tagged.repartition(max(1, min(len(groups), 2 * par)), "gid"),
                         functools.partial(write_task, plan_path, keys), STATS_SCHEMA).collect()]
    done = {r["gid"] for r in rows}
    for n, (part, segs, out_dir) in groups.items():  # no survivor: an empty segment
        if n not in done:
            st = write_group(segs, lambda offs: [False] * len(offs), out_dir,
                             *crypt(plan, keys, part), txn_rules(plan, part))
            rows.append({**st, "gid": n, "tombstones_kept": 0})
    by_part: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["gid"]):
        by_part.setdefault(str(groups[r["gid"]][0]), []).append(r)
    return {"partitions": by_part, "planned_at": planned, "done_at": time.time()}


def main(argv: list[str]) -> int:
    return run_job(argv, "compact", run)


def run_job(argv: list[str], kind: str, body: Any) -> int:
    """The main of each Spark job: read the plan, start the session, ``body(spark, plan,
    plan_path)`` returns the result with ``done_at`` (and ``planned_at`` when planning came
    first), and the result goes to ``result.json`` with the timings. A ``Watch`` notes when
    the first job starts and, when the plan asks for ``progress``, reports it."""
    from pyspark.sql import SparkSession

    plan_path = argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    t0 = time.time()
    spark = SparkSession.builder.appName(f"rivven-{kind}-{plan['topic'] or 'all'}").getOrCreate()
    started = time.time()
    print(STARTED, flush=True)  # (the launcher's failpoint spark-job-running waits for it)
    watch = Watch(spark, os.path.join(os.path.dirname(plan_path), PROGRESS)
                  if plan.get("progress") else None)
    watch.start()
    try:
        result = body(spark, plan, plan_path)
    finally:
        watch.stop()
        spark.stop()
    planned = result.pop("planned_at", None)
    done = result.pop("done_at")
    first = watch.first_job_at or planned or started
    # start-up as the compaction issue counts it: everything before the first job runs
    result.update({"startup_s": started - t0, "plan_s": first - started, "exec_s": done - first,
                   "job_s": done - started})
    write_result(plan_path, result)
    return 0


def write_result(plan_path: str, result: dict[str, Any]) -> None:
    """``result.json`` next to the plan, whole or not at all (the launcher reads it)."""
    write_json(os.path.join(os.path.dirname(plan_path), "result.json"), result)


def write_json(path: str, obj: Any) -> None:
    """``path`` whole or not at all (written aside, then renamed over)."""
    from engine.fs import guard

    tmp = path + ".tmp"
    with open(tmp, "w", opener=guard.opener) as f:
        json.dump(obj, f)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
