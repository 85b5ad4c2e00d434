"""The background maintenance hands a compaction past ``log.cleaner.spark.threshold.bytes`` to
the Spark job (``rivven maintain --once``: spark-submit on local[2]) and keeps the in-process
pass for the smaller partitions."""

import json

from helpers import run_rivven

from engine import Engine, Record


def test_a_partition_past_the_threshold_is_compacted_by_spark(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "3000"})
        for i in range(0, 600, 10):
            eng.produce("c", [Record(key=b"k%d" % ((i + j) % 20), value=b"v%05d" % (i + j))
                              for j in range(10)], partition=0)
        for i in range(0, 200, 10):
            eng.produce("c", [Record(key=b"k%d" % ((i + j) % 20), value=b"v%05d" % (i + j))
                              for j in range(10)], partition=1)
        sizes = [sum(s["bytes"] for s in pl["segments"])
                 for pl in eng.maintenance.compaction_plan("c")]
    assert sizes[0] > 5000 > sizes[1] > 0
    r = run_rivven(data_dir, "maintain", "--once", "--json", "--set",
                   "log.cleaner.spark.threshold.bytes=5000", "--set",
                   "log.cleaner.spark.master=local[2]", timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    rows = {row["partition"]: row for row in json.loads(r.stdout)["passes"]}
    assert rows[0]["via"] == "spark" and rows[0]["outcome"] == "ok"
    assert rows[1]["via"] == "in process" and rows[1]["outcome"] == "ok"
    assert rows[0]["reclaimed_bytes"] > 0
    with Engine.open(data_dir, read_only=True) as eng:
        plan = eng.maintenance.compaction_plan("c")[0]
        assert plan["dirty_ratio"] == 0 and plan["cleaner"]["cleaned_end"] > 0
        recs = eng.read("c", 0, 0, 10**6)
        last = {r.key: r.value for r in recs}
        assert last == {b"k%d" % (i % 20): b"v%05d" % i for i in range(600)}
        cleaned = [r for r in recs if r.offset < plan["cleaner"]["cleaned_end"]]
        assert len({r.key for r in cleaned}) == len(cleaned)  # one record per key
    assert run_rivven(data_dir, "segment", "verify").returncode == 0
