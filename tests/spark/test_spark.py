"""Spark: the topic source, the survivors transform (one shared SparkSession), and real
``spark-submit`` runs of ``rivven spark compact`` (local[2], a standalone cluster, kill -9)."""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import RIVVEN, ROOT, run_rivven, run_rivven_on_a_terminal

from engine import Engine, Record

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
CFG = {"cleanup.policy": "compact", "segment.bytes": "3000", "delete.retention.ms": "0",
       "min.cleanable.dirty.ratio": "0.01"}


def produce_random(eng, topic, rng, n, keys, tomb=0.1):
    for i in range(0, n, 4):
        eng.produce(topic, [Record(key=b"k%d" % rng.randrange(keys),
                                   value=None if rng.random() < tomb else b"v%d" % (i + j),
                                   headers=[("h", b"x")] if rng.random() < 0.2 else ())
                            for j in range(4)])


def last_per_key(records, end, bound=0):
    last = {}
    for r in records:
        if r.offset < end:
            last[r.key] = r
    return {(r.partition, r.offset) for r in last.values()
            if not (r.value is None and r.offset < bound)}


def read_all(eng, topic):
    meta = eng.topic(topic)
    return [r for p in range(meta.partitions)
            for r in eng.read(topic, p, eng.start_offsets(topic)[p], 10**9)]


def test_source_reads_every_record(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 3, {"segment.bytes": "200000", "index.interval.bytes": "1024"})
        for codec in ("none", "lz4", "zstd", "gzip"):
            eng.produce_batch("t", [b"v%d" % i for i in range(3000)],
                              keys=[b"k%d" % i if i % 7 else None for i in range(3000)],
                              headers=[[("n", b"%d" % i)] for i in range(3000)],
                              compression=codec)
        want = sorted((r.partition, r.offset, r.timestamp, r.key, r.value,
                       tuple(r.headers)) for r in read_all(eng, "t"))
    df = (spark.read.format("rivven").option("path", data_dir).option("topic", "t")
          .option("splitBytes", "20000").load())  # several splits per segment
    got = sorted((r.partition, r.offset, r.timestamp, r.key, r.value,
                  tuple((h.key, h.value) for h in r.headers)) for r in df.collect())
    assert got == want
    assert df.rdd.getNumPartitions() > 3
    ends = (spark.read.format("rivven").option("path", data_dir).option("topic", "t")
            .option("partitions", "1").option("endOffsets", '{"1": 100}').load())
    assert sorted(r.offset for r in ends.select("offset").collect()) == list(range(100))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_survivors_transform_matches_the_reference(spark, data_dir, seed):
    from pyspark.sql import functions as F

    from engine.spark.transform import survivors

    rng = random.Random(seed)
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 2, CFG)
        produce_random(eng, "c", rng, 400, keys=rng.choice([3, 30, 300]))
        eng.maintenance.compact("c")  # offset gaps and earlier passes
        produce_random(eng, "c", rng, 400, keys=50)
        plans = eng.maintenance.compaction_plan("c", force=True)
        records = read_all(eng, "c")
    bounds = {p["partition"]: rng.choice([0, p["cleanable_end"] // 2]) for p in plans}
    ends = {p["partition"]: p["cleanable_end"] for p in plans}
    df = (spark.read.format("rivven").option("path", data_dir).option("topic", "c")
          .option("endOffsets", json.dumps(ends)).load())
    got = {(r.partition, r.offset) for r in survivors(df, bounds).collect()}
    want = set()
    for p in (0, 1):
        want |= last_per_key([r for r in records if r.partition == p], ends[p], bounds[p])
    assert got == want
    keys_only = (spark.read.format("rivven")
                 .schema("topic string, partition int, offset long, key binary, tombstone boolean")
                 .option("path", data_dir).option("topic", "c")
                 .option("endOffsets", json.dumps(ends)).load())
    assert {(r.partition, r.offset) for r in survivors(keys_only, bounds).collect()} == want
    for split_bytes, splits in (("3000", "0"), ("1000000", "1")):  # many splits; one for both
        last = (spark.read.format("rivven")
                .schema("partition int, offset long, key binary, tombstone boolean")
                .option("path", data_dir).option("topic", "c").option("lastPerKey", "true")
                .option("splitBytes", split_bytes).option("splits", splits)
                .option("endOffsets", json.dumps(ends)).load()
                .withColumn("topic", F.lit("c")))
        assert {(r.partition, r.offset) for r in survivors(last, bounds).collect()} == want


def test_survivors_transform_refuses_null_keys(spark, data_dir):
    from engine.spark.transform import survivors

    with Engine.open(data_dir) as eng:
        eng.create_topic("d", 1)
        eng.produce("d", [Record(key=b"a", value=b"1"), Record(key=None, value=b"2")])
    df = spark.read.format("rivven").option("path", data_dir).option("topic", "d").load()
    with pytest.raises(Exception, match="record at offset 1 of d-0 has no key"):
        survivors(df).collect()
    last = (spark.read.format("rivven").schema("topic string, partition int, offset long, "
                                                "key binary, tombstone boolean")
            .option("path", data_dir).option("topic", "d").option("lastPerKey", "true").load())
    with pytest.raises(Exception, match="record at offset 1 of d-0 has no key"):
        survivors(last).collect()  # keyless records pass the per-split reduction untouched


# ---------------------------------------------------------------- real spark-submit
def make_topic(data_dir, seed=5, n=3000, partitions=2):
    rng = random.Random(seed)
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", partitions, CFG)
        produce_random(eng, "c", rng, n, keys=200)
        return read_all(eng, "c"), eng.maintenance.compaction_plan("c")


def expected(before, plans):
    want = {}
    for plan in plans:
        p = plan["partition"]
        recs = [r for r in before if r.partition == p]
        keep = last_per_key(recs, plan["cleanable_end"])
        want[p] = [r for r in recs if r.offset >= plan["cleanable_end"]
                   or (r.partition, r.offset) in keep]
    return want


def test_spark_compact_end_to_end_on_local_2(data_dir):
    before, plans = make_topic(data_dir)
    r = run_rivven(data_dir, "spark", "compact", "c", "--dry-run", check=True)
    assert b"spark-submit --master 'local[*]'" in r.stdout and b"--py-files" in r.stdout
    producer = subprocess.Popen(  # a producer keeps appending to the active segments
        [*RIVVEN, "produce", "c", "-K", ":"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT)), cwd=ROOT)
    r = run_rivven(data_dir, "spark", "compact", "c", "--master", "local[2]", "--json",
                   timeout=600)
    producer.communicate(b"".join(b"live%d:x\n" % i for i in range(2000)), timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    out = json.loads(r.stdout)
    assert sum(p["records_out"] for p in out["partitions"]) < len(before)
    with Engine.open(data_dir, read_only=True) as eng:
        after = read_all(eng, "c")
    want = expected(before, plans)
    for p in (0, 1):
        got = [x for x in after if x.partition == p and not (x.key or b"").startswith(b"live")]
        assert got == want[p]
    assert len([x for x in after if (x.key or b"").startswith(b"live")]) == 2000
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class():
    import pyspark
    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


def test_spark_compact_on_a_standalone_cluster(data_dir, tmp_path):
    from helpers.spark_progress import assert_progress_moved

    before, plans = make_topic(data_dir, seed=7, n=2000)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp_path),
               SPARK_WORKER_DIR=str(tmp_path / "work"))
    port, ui = free_port(), free_port()
    logs = open(tmp_path / "cluster.log", "wb")
    master = subprocess.Popen([spark_class(), "org.apache.spark.deploy.master.Master",
                               "--host", "127.0.0.1", "--port", str(port), "--webui-port",
                               str(ui)], env=env, stdout=logs, stderr=logs)
    worker = subprocess.Popen([spark_class(), "org.apache.spark.deploy.worker.Worker",
                               "--host", "127.0.0.1", "--webui-port", str(free_port()),
                               "--cores", "2", "--memory", "1g", f"spark://127.0.0.1:{port}"],
                              env=env, stdout=logs, stderr=logs)
    try:
        deadline = time.time() + 120
        while b"Successfully registered with master" not in (tmp_path / "cluster.log").read_bytes():
            assert time.time() < deadline, (tmp_path / "cluster.log").read_text()[-2000:]
            time.sleep(0.5)
        # (stderr on a terminal: the progress bar follows the job on the cluster too)
        rc, _, frames = run_rivven_on_a_terminal(
            data_dir, "spark", "compact", "c", "--master", f"spark://127.0.0.1:{port}",
            "--conf", "spark.executor.memory=512m", timeout=900)
        assert rc == 0, "\n".join(frames[-30:])
        assert any("on spark://127.0.0.1:" in f and "size reduction" in f for f in frames)
        assert_progress_moved(frames, between=False)
        # a streaming copy on the same cluster, exactly once
        with Engine.open(data_dir) as eng:
            eng.create_topic("s-in", 2)
            eng.create_topic("s-out", 1)
            eng.produce_batch("s-in", [b"v%d" % i for i in range(500)],
                              keys=[b"k%d" % (i % 13) for i in range(500)])
        r = run_rivven(data_dir, "spark", "stream", "--from", "s-in", "--to", "s-out",
                       "--available-now", "--master", f"spark://127.0.0.1:{port}",
                       "--conf", "spark.executor.memory=512m", timeout=900)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        assert b"500 records copied exactly once" in r.stderr
        with Engine.open(data_dir, read_only=True) as eng:
            assert sorted(r.value for r in eng.read("s-out", 0, 0, 10**6,
                                                    isolation_level="read_committed")) == \
                sorted(b"v%d" % i for i in range(500))
    finally:
        for proc in (worker, master):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        logs.close()
    with Engine.open(data_dir, read_only=True) as eng:
        after = read_all(eng, "c")
    want = expected(before, plans)
    assert [x for x in after if x.partition == 0] == want[0]
    assert [x for x in after if x.partition == 1] == want[1]


@pytest.mark.crash
def test_kill_9_of_spark_compact_during_the_job_and_during_the_swap(data_dir):
    before, plans = make_topic(data_dir, seed=9)
    pdir = os.path.join(data_dir, "topics", "c", "partition-0")

    def snapshot():
        return {f: open(os.path.join(pdir, f), "rb").read() for f in sorted(os.listdir(pdir))
                if f.endswith(".log")}

    files_before = snapshot()
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    # killed once the Spark session is up and the job starts (spark-submit goes with it)
    r = subprocess.run([*RIVVEN, "spark", "compact", "c", "--master", "local[2]"],
                       env={**env, "RIVVEN_FAILPOINT": "spark-job-running"}, cwd=ROOT,
                       capture_output=True, timeout=600)
    assert r.returncode == -9, r.stderr.decode()[-3000:]
    assert snapshot() == files_before  # the log is untouched while the job runs
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr

    # now crash in the middle of the swap (after its commit point), then reopen
    r = subprocess.run([*RIVVEN, "spark", "compact", "c", "--master", "local[2]"],
                       env={**env, "RIVVEN_FAILPOINT": "swap-installing"}, cwd=ROOT,
                       capture_output=True, timeout=600)
    assert r.returncode == -9, r.stderr.decode()[-3000:]
    with Engine.open(data_dir) as eng:  # the writer's open rolls the committed swap forward
        after = read_all(eng, "c")
    want = expected(before, plans)
    assert [x for x in after if x.partition == 0] == want[0]
    # partition 1 was not swapped yet (it comes after 0) or was: either way nothing is lost
    p1 = [x for x in after if x.partition == 1]
    assert p1 in (want[1], [x for x in before if x.partition == 1])
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    from engine.spark.submit import clean_stale
    staged = [f for f in os.listdir(os.path.join(data_dir, ".compaction"))
              if not f.endswith(".log")]
    assert staged  # the killed runs left their staging folders ...
    clean_stale(data_dir)  # ... which the next run removes (their locks are free)
    assert not [f for f in os.listdir(os.path.join(data_dir, ".compaction"))
                if not f.endswith(".log")]


@pytest.mark.crash
def test_spark_tier_end_to_end_with_kill_9_during_the_job(data_dir):
    """Tier on local[2] to the file:// cold store: a run killed once Spark copied and verified
    everything, before any manifest names the copies, leaves every record readable; the next
    run (a producer appending meanwhile) moves the segments, removes the killed run's copies,
    and everything reads back."""
    tiered = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
              "segment.bytes": "1500"}
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2, tiered)
        for p in (0, 1):
            for i in range(0, 600, 10):
                eng.produce("t", [Record(key=b"k", value=b"%d-%05d" % (p, i + j))
                                  for j in range(10)], partition=p)
        before = [[r.value for r in eng.read("t", p, 0, 10_000)] for p in (0, 1)]
    cold = os.path.join(data_dir, "cold")

    def objects():
        return sorted(os.path.join(r, n) for r, _, ns in os.walk(cold) for n in ns)

    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    r = subprocess.run([*RIVVEN, "spark", "tier", "--master", "local[2]"],
                       env={**env, "RIVVEN_FAILPOINT": "tier-copied"}, cwd=ROOT,
                       capture_output=True, timeout=600)
    assert r.returncode == -9, r.stderr.decode()[-3000:]
    assert objects()  # the killed run's copies, which no manifest names
    with Engine.open(data_dir) as eng:
        assert [[r.value for r in eng.read("t", p, 0, 10_000)] for p in (0, 1)] == before
        assert all(row["findings"] == [] for row in eng.maintenance.verify_cold("t"))

    producer = subprocess.Popen([*RIVVEN, "produce", "t", "-p", "0"], stdin=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=ROOT)
    r = run_rivven(data_dir, "spark", "tier", "t", "--master", "local[2]", "--json",
                   timeout=600)
    producer.communicate(b"".join(b"live%d\n" % i for i in range(500)), timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    out = json.loads(r.stdout)
    assert out["tasks"] >= 10 and out["exec_s"] > 0
    for part in out["partitions"]:
        assert part["uploaded"] or part["already_cold"]
    from engine.segments import tier_manifest
    from engine.storage.catalog import home_of
    named = set()
    for p in (0, 1):
        d = os.path.join(data_dir, "topics", "t", f"partition-{p}")
        entries = tier_manifest.load(d, home_of(d))
        assert entries[0].base_offset == 0
        named |= {e.object + s for e in entries for s in (".log", ".index", ".timeindex")}
    assert {"file://" + o for o in objects()} == named  # the killed run's copies are gone
    r = run_rivven(data_dir, "consume", "t", "-p", "0", "-o", "beginning", "-f", "%v\n",
                   check=True)
    assert r.stdout.split(b"\n")[:-1] == before[0] + [b"live%d" % i for i in range(500)]
    r = run_rivven(data_dir, "consume", "t", "-p", "1", "-o", "beginning", "-f", "%v\n",
                   check=True)
    assert r.stdout.split(b"\n")[:-1] == before[1]
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 0, r.stdout + r.stderr


def test_source_honours_read_committed(spark, data_dir):
    """isolationLevel read_committed: the last stable offset ends each partition and the
    records of aborted transactions are left out (the default shows them, never a marker)."""
    from engine.format import control
    from engine.format.encode import encode_batch
    from engine.format.records import ATTR_TRANSACTIONAL

    def txn(pid, value):
        return encode_batch([None], [value], 1, producer_id=pid, producer_epoch=0,
                            base_sequence=0, flags=ATTR_TRANSACTIONAL)

    with Engine.open(data_dir) as eng:
        eng.create_topic("x", 1)
        log = eng._path.log_for(eng.topic("x"), 0)
        put = lambda b: eng._path.append_encoded(log, b)  # noqa: E731
        eng.produce("x", [Record(value=b"a")], partition=0)
        put(txn(1, b"aborted"))
        put(control.encode_marker(1, 1, False, 1))
        put(txn(2, b"committed"))
        put(control.encode_marker(2, 1, True, 1))
        put(txn(3, b"open"))
        eng.produce("x", [Record(value=b"after")], partition=0)

    def read(**options):
        r = spark.read.format("rivven").option("path", data_dir).option("topic", "x")
        for k, v in options.items():
            r = r.option(k, v)
        return [row.value for row in r.load().orderBy("offset").collect()]

    assert read() == [b"a", b"aborted", b"committed", b"open", b"after"]
    assert read(isolationLevel="read_committed") == [b"a", b"committed"]
    with pytest.raises(Exception, match="isolationLevel"):
        read(isolationLevel="dirty")


def test_the_compaction_job_follows_the_transaction_rules_of_the_pass_in_process(
        spark, data_dir, tmp_path):
    """The job's write tasks (run here through the shared session, as spark-submit runs
    them) keep and drop the same markers, and write the same segments and .txnindex files,
    as Engine.compact on a copy of the same log; verify agrees with both."""
    import shutil

    from helpers.compaction import transactions

    from engine import clock
    from engine.maintenance import compaction
    from engine.segments import filenames
    from engine.spark import job, submit

    cfg = {"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, cfg)
        want = transactions(eng)
        eng.maintenance.compact("t", force=True)  # keeps the markers: the next pass drops them
        eng.produce("t", [Record(key=b"k1", value=b"new")], partition=0)
        transactions(eng, 6)
    copy = str(tmp_path / "copy")
    shutil.copytree(data_dir, copy)
    with Engine.open(copy) as eng:
        eng.maintenance.compact("t", force=True)
    with Engine.open(data_dir) as eng:
        now = clock.now_ms()
        plans = eng.maintenance.compaction_plan("t", force=True, now=now)
        staging = str(tmp_path / "staging")
        os.mkdir(staging)
        plan = {"data_dir": data_dir, "topic": "t", "now": now, "partitions": plans,
                "staging": staging, "seal": False}
        plan_path = os.path.join(staging, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        result = job.run(spark, plan, plan_path)
        for p in plans:
            rows = result["partitions"][str(p["partition"])]
            submit._sanity(p, rows)
            eng.maintenance.apply_compaction("t", p, os.path.join(staging, "0"), now,
                                             compaction.min_tombstone(rows))
            assert sum(r["markers_in"] for r in rows) > sum(r["markers_kept"] for r in rows) > 0

    def files(d):
        pdir = filenames.partition_dir(d, "t", 0)
        return {f: open(os.path.join(pdir, f), "rb").read() for f in os.listdir(pdir)
                if f.endswith((filenames.LOG, filenames.TXNINDEX))}

    assert files(data_dir) == files(copy)
    assert any(f.endswith(filenames.TXNINDEX) for f in files(data_dir))
    for d in (data_dir, copy):
        r = run_rivven(d, "segment", "verify")
        assert r.returncode == 0, r.stdout + r.stderr
        with Engine.open(d, read_only=True) as eng:
            got = {r.key: r.value for r in eng.read("t", 0, 0, 10**6,
                                                      isolation_level="read_committed")}
            assert got[b"k1"] != b"new" and set(want) <= set(got)
