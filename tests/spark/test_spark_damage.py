"""Spark reads a topic with a recorded gap (issue 29, item 0): a damaged batch cut out by
``segment recover --truncate-corrupt`` leaves its offsets missing, as compaction does, and the
source reads every record around them (the jobs read through it)."""

import os
import sys

from helpers.damage import damage_batch, make_topic

from engine import Engine

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def test_the_source_reads_around_a_recorded_gap(spark, data_dir):
    make_topic(data_dir, 4)
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as eng:
        eng.segments.recover(["t"], truncate_corrupt=True)  # (the batch at 50 cut out)
    df = (spark.read.format("rivven").option("path", data_dir).option("topic", "t")
          .option("splitBytes", "1000").load())  # (a split starts after the gap)
    got = sorted((r.offset, r.value) for r in df.select("offset", "value").collect())
    assert [o for o, _ in got] == [*range(50), *range(100, 200)]
    assert all(v == b"v%d" % o for o, v in got)
