"""Spark Structured Streaming and the sink, on the shared SparkSession (local[2]): the batch
sink's all-or-nothing write, the stream source's options (startingOffsets, maxOffsetsPerTrigger,
topic patterns, partitions added mid-run, data loss), and a streaming copy that runs again
from its checkpoint without writing anything twice."""

import contextlib
import json
import os
import sys

import pytest

from engine import Engine, Record
from engine.produce.partitioner import partition_for_key

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def committed(eng, topic):
    """Every read_committed record of the topic: {partition: [(key, value), ...]}."""
    out = {}
    for p in range(eng.topic(topic).partitions):
        start = eng.start_offsets(topic)[p]
        out[p] = [(r.key, r.value) for r in eng.read(topic, p, start, 10**9,
                                                       isolation_level="read_committed")]
    return out


def values(eng, topic):
    return sorted(v for rows in committed(eng, topic).values() for _, v in rows)


def run_stream(spark, data_dir, ckpt, source="in", sink="out", transform=None, schema=None,
               **opts):
    """A streaming copy source -> sink run until caught up (Trigger.AvailableNow)."""
    r = spark.readStream.format("rivven")
    if schema is not None:
        r = r.schema(schema)  # (only these columns are read)
    r = r.option("path", data_dir).option("topic", source).option("startingOffsets", "earliest")
    for k, v in opts.items():
        r = r.option(k, v)
    df = r.load()
    df = df.selectExpr(*transform) if transform else df.select("key", "value")
    q = (df.writeStream.format("rivven").option("path", data_dir).option("topic", sink)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return q


# ------------------------------------------------------------------ the batch sink
def test_batch_sink_writes_rows_where_produce_puts_them(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 3)
        eng.create_topic("side", 1)
        eng.create_topic("side2", 1)
    rows = [(f"k{i}", f"v{i}", "side" if i % 10 == 0 else "out") for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, topic string")
    df.write.format("rivven").option("path", data_dir).mode("append").save()  # per row
    df.where("topic = 'side'").write.format("rivven").option("path", data_dir) \
        .option("topic", "side2").mode("append").save()  # the option overrides the column
    with Engine.open(data_dir) as eng:
        got = committed(eng, "out")
        assert sorted(v for rs in got.values() for _, v in rs) == sorted(
            f"v{i}".encode() for i in range(200) if i % 10)
        for p, rs in got.items():  # where eng.produce puts each key
            for k, _ in rs:
                assert partition_for_key(k, 3) == p
        assert values(eng, "side") == sorted(f"v{i}".encode() for i in range(0, 200, 10))
        assert values(eng, "side2") == values(eng, "side")
        assert eng.txn.list_transactions() == []  # nothing left open
        # nor a WAL stream: the tasks' Python workers live on (reused), but each task closed
        # its writable engine (a worker ends with os._exit: one kept open would be a dead
        # stream, recovered by the next open as a crashed writer's)
        assert eng.recovery.streams() == []


def test_a_failed_batch_write_leaves_the_topic_unchanged_and_a_rerun_writes_once(spark,
                                                                                  data_dir):
    from pyspark.sql.functions import col, udf

    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 2)
        eng.produce("out", [Record(key=b"old", value=b"old")])
    df = spark.range(0, 4000, numPartitions=4).selectExpr(
        "cast(id as string) as key", "concat('v', cast(id as string)) as value")

    @udf("string")
    def explode_on(v):
        if v == "v3333":
            raise ValueError("boom on one row")
        return v

    bad = df.withColumn("value", explode_on(col("value")))
    with pytest.raises(Exception, match="boom on one row"):
        bad.write.format("rivven").option("path", data_dir).option("topic", "out") \
            .mode("append").save()
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == [b"old"]  # the three tasks that succeeded: not visible
        assert eng.txn.list_transactions() == []  # their transactions aborted, not left hanging
    df.write.format("rivven").option("path", data_dir).option("topic", "out") \
        .mode("append").save()
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == sorted([b"old"] + [b"v%d" % i for i in range(4000)])


def test_a_task_that_prepares_after_its_failed_job_was_aborted_aborts_itself(data_dir):
    """The race of a failed save() under load, played in order (no Spark: the writer's own
    calls): Spark does not wait for a failed job's other tasks, so one may prepare after the
    driver's abort; prepared transactions never time out, so it would hold back `out`'s
    read_committed readers until someone ran `rivven txn abort`."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from engine.spark.sink import RivvenBatchWriter

    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 1)
    schema = StructType([StructField("value", StringType())])
    rows = pa.record_batch([pa.array(["a", "b"])], names=["value"])
    job = RivvenBatchWriter({"path": data_dir, "topic": "out"}, schema)
    job.abort([None, None])  # a task failed: the driver aborts what it knows of
    with pytest.raises(Exception, match="ended before transactional id .* prepared"):
        job.write(iter([rows]))  # another task, slower, finishes afterwards
    with Engine.open(data_dir) as eng:
        assert eng.txn.list_transactions() == []  # (was: Ongoing, prepared, for good)
        assert values(eng, "out") == []
    # a straggling attempt of a job that committed aborts itself too
    done = RivvenBatchWriter({"path": data_dir, "topic": "out"}, schema)
    done.commit([done.write(iter([rows]))])
    with pytest.raises(Exception, match="ended before transactional id"):
        done.write(iter([rows]))
    with Engine.open(data_dir) as eng:
        assert eng.txn.list_transactions() == [] and values(eng, "out") == [b"a", b"b"]


@contextlib.contextmanager
def spark_task(batch, partition=0):
    """What a streaming task's TaskContext holds, for the writer's own calls (no Spark here):
    its partition and the micro-batch id Spark's MicroBatchExecution sets as a local
    property (seen in a real task by the streaming tests below: the sink needs it)."""
    from pyspark import TaskContext

    props = {} if batch is None else {"streaming.sql.batchId": str(batch)}
    TaskContext._setTaskContext(None)  # (TaskContext() is a singleton once set)
    TaskContext._setTaskContext(TaskContext(partitionId=partition, attemptNumber=0,
                                            localProperties=props))
    try:
        yield
    finally:
        TaskContext._setTaskContext(None)


def test_a_failed_micro_batch_fences_the_tasks_still_writing(data_dir, tmp_path):
    """A streaming micro-batch's abort (its query fails) while a task still writes: the task
    can no longer prepare (it would stay prepared until the query ran again)."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from engine.errors import ProducerFenced
    from engine.spark.sink import RivvenStreamWriter

    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 1)
    schema = StructType([StructField("value", StringType())])
    rows = pa.record_batch([pa.array(["a", "b"])], names=["value"])
    stream = RivvenStreamWriter({"path": data_dir, "topic": "out",
                                 "checkpointLocation": str(tmp_path / "ckpt")}, schema)
    with spark_task(0):
        stream.commit([stream.write(iter([rows]))], 0)

    def rows_then_abort():
        yield rows
        stream.abort([None, None], 1)  # another task failed: the driver aborts batch 1
        yield rows

    with spark_task(1), pytest.raises(ProducerFenced):
        stream.write(rows_then_abort())
    with Engine.open(data_dir) as eng:
        assert eng.txn.list_transactions() == []  # (was: Ongoing, prepared, for good)
        assert values(eng, "out") == [b"a", b"b"]
    with spark_task(1):  # batch 1 run again (the query restarted)
        stream.commit([stream.write(iter([rows]))], 1)
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == [b"a", b"a", b"b", b"b"]


def test_a_task_of_a_failed_micro_batch_whose_producer_comes_after_the_abort_aborts_itself(
        data_dir, tmp_path, monkeypatch):
    """The case the fence alone left (played in order, no Spark): a task of micro-batch 1
    began; the driver aborted the batch (another task failed) and fenced the key's ids; then
    the task made its producer — taking its id up again — and prepared. Prepared
    transactions never time out: `out`'s read_committed readers waited until the query ran
    again or someone ran `rivven txn abort`. A run of batch 1 after the restart writes it."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from engine.errors import InvalidTxnState
    from engine.spark.sink import RivvenStreamWriter

    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 1)
    schema = StructType([StructField("value", StringType())])
    rows = pa.record_batch([pa.array(["a", "b"])], names=["value"])
    stream = RivvenStreamWriter({"path": data_dir, "topic": "out",
                                 "checkpointLocation": str(tmp_path / "ckpt")}, schema)
    with spark_task(0):
        stream.commit([stream.write(iter([rows]))], 0)
    for props in (None, "x"):  # (not in a micro-batch's task: the sink says what it needs)
        with spark_task(props), pytest.raises(ValueError, match="local property "
                                              "streaming.sql.batchId names its batch"):
            stream.write(iter([rows]))

    make_producer = Engine.producer
    aborted = []

    def abort_first(self, *args, **kwargs):  # the task's producer: made after the abort
        if not aborted:
            aborted.append(1)
            stream.abort([None, None], 1)  # (its own fence's producers pass through)
        return make_producer(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "producer", abort_first)
    with spark_task(1), pytest.raises(InvalidTxnState, match="micro-batch 1 of decision key "
                                      ".* was aborted after transactional id"):
        stream.write(iter([rows]))
    monkeypatch.undo()
    assert aborted
    with Engine.open(data_dir) as eng:
        assert eng.txn.list_transactions() == []  # (was: Ongoing, prepared, for good)
        assert "Ongoing" not in {t["state"] for t in eng.txn.list_transactions(all=True)}
        assert values(eng, "out") == [b"a", b"b"]
    with spark_task(1):  # the query restarted: batch 1 runs again, after the abort
        stream.commit([stream.write(iter([rows]))], 1)
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == [b"a", b"a", b"b", b"b"]
        assert eng.txn.list_transactions() == []


def test_sink_options_are_checked_with_the_fix(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 1)
    df = spark.createDataFrame([("a",)], "value string")
    w = df.write.format("rivven").option("path", data_dir)
    with pytest.raises(Exception, match="needs .option\\('topic', T\\) or a 'topic' column"):
        w.mode("append").save()
    with pytest.raises(Exception, match="use .mode\\('append'\\)"):
        w.option("topic", "out").mode("overwrite").save()
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([("a",)], "key string").write.format("rivven") \
            .option("path", data_dir).option("topic", "out").mode("append").save()


# ------------------------------------------------------------------ streaming
def test_a_streaming_copy_runs_again_from_its_checkpoint_without_duplicates(spark, data_dir,
                                                                           tmp_path):
    ckpt = str(tmp_path / "ckpt")
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 3)
        eng.create_topic("out", 2)
        eng.produce_batch("in", [b"a%d" % i for i in range(500)],
                          keys=[b"k%d" % (i % 37) for i in range(500)])
    run_stream(spark, data_dir, ckpt,
               transform=["key", "upper(cast(value as string)) as value"])
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == sorted(b"A%d" % i for i in range(500))
        eng.produce_batch("in", [b"b%d" % i for i in range(300)],
                          keys=[b"k%d" % (i % 37) for i in range(300)])
        tp = eng.producer(transactional_id="upstream")  # aborted upstream: never copied
        tp.begin()
        tp.produce("in", [Record(key=b"k1", value=b"aborted")])
        tp.abort()
    run_stream(spark, data_dir, ckpt,
               transform=["key", "upper(cast(value as string)) as value"],
               commitToGroup="copier")
    run_stream(spark, data_dir, ckpt,  # nothing new: nothing written
               transform=["key", "upper(cast(value as string)) as value"],
               commitToGroup="copier")
    with Engine.open(data_dir) as eng:
        want = sorted([b"A%d" % i for i in range(500)] + [b"B%d" % i for i in range(300)])
        assert values(eng, "out") == want
        assert eng.groups.committed("copier") == {  # (asked for: the offsets in a group too)
            ("in", p): o for p, o in eng.end_offsets("in").items()}
        for rows in committed(eng, "out").values():  # per key, the input's order
            per_key = {}
            for k, v in rows:
                per_key.setdefault(k, []).append(v)
            for vs in per_key.values():
                assert vs == sorted(vs, key=lambda v: (v[:1], int(v[1:])))
        assert eng.txn.list_transactions() == []


def test_a_failed_micro_batch_is_counted_leaves_nothing_open_and_its_rerun_writes_once(
        spark, data_dir, tmp_path):
    """A real query whose micro-batch fails in one task: Spark's abort is counted under the
    query's key (the tasks saw their batch id: Spark's local property), nothing of the batch
    stays open or prepared (a late task aborts itself), and the restarted query's run of the
    same batch id writes it once."""
    import time

    ckpt = str(tmp_path / "ckpt")
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 2)
        eng.create_topic("out", 1)
        for p in (0, 1):
            eng.produce_batch("in", [b"p%d-%d" % (p, i) for i in range(200)], partition=p)
    spark.udf.register("explode_on", lambda v: 1 // (v != b"p1-150") and v, "binary")
    with pytest.raises(Exception, match="ZeroDivisionError"):  # (the query fails)
        run_stream(spark, data_dir, ckpt, transform=["key", "explode_on(value) as value"])
    with Engine.open(data_dir) as eng:
        [key] = [n[:-len(".json")] for n in os.listdir(os.path.join(data_dir, "txn", "decisions"))
                 if n.endswith(".json")]
        assert eng.txn.decision(key)["aborts"] == {"0": 1}
        deadline = time.monotonic() + 60  # (a task Spark was killing may still be finishing)
        while eng.txn.list_transactions() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert eng.txn.list_transactions() == []  # nothing left prepared for good
        assert values(eng, "out") == []
    run_stream(spark, data_dir, ckpt)  # batch 0 again (its commit was never recorded)
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == sorted(b"p%d-%d" % (p, i) for p in (0, 1)
                                            for i in range(200))
        assert eng.txn.decision(key)["committed"] == 0 and eng.txn.list_transactions() == []


def test_max_offsets_per_trigger_and_starting_offsets(spark, data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 2)
        eng.create_topic("out", 1)
        eng.produce_batch("in", [b"%d" % i for i in range(100)], partition=0)
        eng.produce_batch("in", [b"%d" % i for i in range(100, 140)], partition=1)
    q = run_stream(spark, data_dir, str(tmp_path / "c1"), maxOffsetsPerTrigger="30",
                   startingOffsets=json.dumps({"in": {"0": 50, "1": -2}}))
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in batches] == [30, 30, 30]  # 90 = 50 + 40, 30 at a time
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == sorted(b"%d" % i for i in [*range(50, 140)])
    with pytest.raises(Exception, match="startingOffsets"):
        run_stream(spark, data_dir, str(tmp_path / "c2"), startingOffsets="{bad")
    with pytest.raises(Exception, match=r"names no offset for in-1"):
        run_stream(spark, data_dir, str(tmp_path / "c3"),
                   startingOffsets=json.dumps({"in": {"0": 0}}))


def test_topic_patterns_and_a_partition_added_mid_run(spark, data_dir, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    with Engine.open(data_dir) as eng:
        for t in ("ev-a", "ev-b", "other"):
            eng.create_topic(t, 1)
            eng.produce("ev-a" if t == "ev-a" else t, [Record(value=t.encode())])
        eng.create_topic("out", 1)

    def run():
        df = (spark.readStream.format("rivven").option("path", data_dir)
              .option("topicPattern", "ev-.*").option("startingOffsets", "earliest").load())
        q = (df.selectExpr("concat(topic, ':', cast(partition as string), ':', "
                           "cast(value as string)) as value")
             .writeStream.format("rivven").option("path", data_dir).option("topic", "out")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()

    run()
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == [b"ev-a:0:ev-a", b"ev-b:0:ev-b"]
        eng.add_partitions("ev-b", 2)
        eng.produce("ev-b", [Record(value=b"gone")], partition=1)
        eng.maintenance.delete_records("ev-b", {1: 1})  # (the new partition's log starts past 0)
        eng.produce("ev-b", [Record(value=b"new")], partition=1)
        eng.create_topic("ev-c", 1)
        eng.produce("ev-c", [Record(value=b"c")])
    run()
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == [b"ev-a:0:ev-a", b"ev-b:0:ev-b", b"ev-b:1:new",
                                      b"ev-c:0:c"]


def test_offsets_removed_before_they_were_read_fail_the_query_unless_told(spark, data_dir,
                                                                          tmp_path):
    ckpt = str(tmp_path / "ckpt")
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 1)
        eng.create_topic("out", 1)
        eng.produce_batch("in", [b"%d" % i for i in range(10)])
    run_stream(spark, data_dir, ckpt)
    with Engine.open(data_dir) as eng:
        eng.produce_batch("in", [b"%d" % i for i in range(10, 30)])
        eng.maintenance.delete_records("in", {0: 20})  # 10..19 gone before the query read them
    with pytest.raises(Exception, match="were removed .*failOnDataLoss"):
        run_stream(spark, data_dir, ckpt)
    run_stream(spark, data_dir, ckpt, failOnDataLoss="false", schema="key binary, value binary")
    with Engine.open(data_dir) as eng:
        assert values(eng, "out") == sorted(b"%d" % i for i in [*range(10), *range(20, 30)])


# ------------------------------------------------------------------ rivven spark stream
def assert_nothing_to_recover(data_dir, next_topic):
    """No WAL stream is left (``rivven wal list``), and the next command (``topic create
    NEXT_TOPIC``: a writable open) recovers nothing (no ``recovered ... of crashed writers``)."""
    from helpers import run_rivven

    r = run_rivven(data_dir, "wal", "list", "--json", check=True)
    assert json.loads(r.stdout) == [], r.stdout
    r = run_rivven(data_dir, "topic", "create", next_topic, check=True)
    assert b"recovered" not in r.stderr, r.stderr


def test_rivven_spark_stream_runs_until_ctrl_c_then_resumes_exactly_once(data_dir):
    import signal
    import subprocess
    import time

    from helpers import RIVVEN, ROOT, run_rivven

    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 2)
        eng.create_topic("out", 1)
        eng.produce_batch("in", [b"a%d" % i for i in range(300)])
    cmd = [*RIVVEN, "--data-dir", data_dir, "spark", "stream", "--from", "in", "--to", "out",
           "--transform", "SELECT key, concat('x', cast(value AS string)) AS value FROM input",
           "--master", "local[2]", "--trigger-ms", "200"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            with Engine.open(data_dir, read_only=True) as eng:
                if len(values(eng, "out")) == 300:
                    break
            time.sleep(1)
        with Engine.open(data_dir) as eng:
            eng.produce_batch("in", [b"b%d" % i for i in range(200)])
        time.sleep(3)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the query stops between micro-batches
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"stream in -> out stopped:" in err and b"Traceback" not in err
    assert_nothing_to_recover(data_dir, "side1")  # a job stopped by Ctrl-C leaves no crashed writer
    with Engine.open(data_dir) as eng:
        eng.produce_batch("in", [b"c%d" % i for i in range(100)])
    r = run_rivven(data_dir, "spark", "stream", "--from", "in", "--to", "out", "--transform",
                   "SELECT key, concat('x', cast(value AS string)) AS value FROM input",
                   "--available-now", "--master", "local[2]", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["checkpoint"].endswith(".streams/in--out")
    assert_nothing_to_recover(data_dir, "side2")  # ... nor one that ends caught up
    with Engine.open(data_dir) as eng:  # resumed at its checkpoint: every record once
        assert values(eng, "out") == sorted(
            b"x" + v for v in [b"a%d" % i for i in range(300)] + [b"b%d" % i for i in range(200)]
            + [b"c%d" % i for i in range(100)])


def test_rivven_spark_stream_refuses_unknown_topics_before_spark_starts(data_dir):
    from helpers import run_rivven

    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 1)
        eng.create_topic("out", 1)
    r = run_rivven(data_dir, "spark", "stream", "--from", "in", "--to", "nope")
    assert r.returncode == 1 and b"nope" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run_rivven(data_dir, "spark", "stream", "--from", "in", "--to", "in")
    assert r.returncode == 1 and b"never catches up" in r.stderr
    r = run_rivven(data_dir, "spark", "stream", "--from", "in", "--to", "out", "--dry-run")
    assert r.returncode == 0 and b"spark-submit" in r.stdout and b"stream_job.py" in r.stdout


def test_a_spark_error_is_shown_by_its_message_not_its_class_name(data_dir):
    from helpers import run_rivven

    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 1)
        eng.create_topic("out", 1)
    r = run_rivven(data_dir, "spark", "stream", "--from", "in", "--to", "out", "--transform",
                   "SELEC nonsense", "--available-now", "--master", "local[1]", timeout=600)
    err = r.stderr.decode()
    assert r.returncode == 1 and len(err.splitlines()) == 1, err
    # (it was "ParseException:; the log is untouched; ...": the message is on the next line)
    assert "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'" in err and "SQLSTATE" not in err
    assert "ParseException" not in err and "full Spark output: " in err


def test_a_foreach_batch_write_with_a_batch_id_written_before_is_a_no_op(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("totals", 2, {"cleanup.policy": "compact"})
    df = spark.createDataFrame([("c1", "10"), ("c2", "20")], "key string, value string")

    def write(frame, batch_id):
        (frame.write.format("rivven").option("path", data_dir).option("topic", "totals")
         .option("transactionalIdPrefix", "totals-q").option("batchId", batch_id)
         .mode("append").save())

    write(df, 0)
    write(df, 0)  # a replay of batch 0 (the query restarted before its commit was noted)
    write(df.selectExpr("key", "'11' as value").where("key = 'c1'"), 1)
    with Engine.open(data_dir) as eng:
        assert values(eng, "totals") == [b"10", b"11", b"20"]
        assert eng.txn.decision("spark-batch-totals-q")["committed"] == 1
        assert eng.txn.list_transactions() == []
    with pytest.raises(Exception, match="batchId needs .option\\('transactionalIdPrefix'"):
        df.write.format("rivven").option("path", data_dir).option("topic", "totals") \
            .option("batchId", 3).mode("append").save()


def test_offsets_rates_and_progress_without_spark():
    """The pieces the driver runs: Kafka's offsets JSON, the per-partition share of
    maxOffsetsPerTrigger, the progress line and its lag."""
    from engine.spark import stream_job, submit
    from engine.spark.stream_source import parse_offsets, prorate

    assert parse_offsets("earliest") == "earliest"
    assert parse_offsets('{"t": {"0": 5, "1": -2}}') == {"t": {"0": 5, "1": -2}}
    for bad in ('{"t": {"0": -3}}', '{"t": [1]}', "[]", "soon"):
        with pytest.raises(ValueError, match="startingOffsets"):
            parse_offsets(bad)
    lags = {("t", 0): 900, ("t", 1): 100, ("u", 0): 0}
    assert prorate(lags, 5000) == lags  # under the limit: all of it
    share = prorate(lags, 100)
    assert share == {("t", 0): 90, ("t", 1): 10, ("u", 0): 0} and sum(share.values()) == 100
    share = prorate({("t", 0): 1, ("t", 1): 1, ("t", 2): 1}, 2)
    assert sum(share.values()) == 2 and max(share.values()) == 1
    progress = {"sources": [{"endOffset": '{"t": {"0": 10, "1": 5}}',
                             "latestOffset": {"t": {"0": 15, "1": 5, "2": 3}}}]}
    assert stream_job.lag_of(progress) == 8
    assert stream_job.lag_of({"sources": []}) is None
    what, _, _ = submit.describe_progress({"phase": "streaming", "batch": 7, "rows": 12345,
                                           "rows_per_s": 2000.4, "lag": 8})
    assert what == "stream: batch 7, 12,345 rows, 2,000 rows/s, lag 8"


@pytest.mark.slow
def test_the_streaming_example_runs_and_checks_itself(tmp_path):
    """examples/stream_totals.py as a user runs it: its own check (every customer's total
    equals the orders', across restarts) must pass."""
    import subprocess

    from helpers import ROOT

    r = subprocess.run([sys.executable, str(ROOT / "examples" / "stream_totals.py"),
                        "--data-dir", str(tmp_path / "data"), "--orders", "3000"],
                       cwd=ROOT, capture_output=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"every customer's total matches the orders" in r.stdout
