"""Spark reads a topic with a recorded gap (issue 29, item 0): a damaged batch cut out by
``segment recover --truncate-corrupt`` leaves its offsets missing, as compaction does, and the
source reads every record around them (the jobs read through it)."""

import os
import sys

import pytest
from helpers.damage import damage_batch, make_topic

from engine import CorruptRecordError, Engine
from engine.spark import worker

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


def _rows(batches) -> list[int]:
    return [o for b in batches for o in b.column(0).to_pylist()]


def test_the_executor_readers_step_over_a_recorded_gap_and_refuse_damage_naming_the_repair(
        data_dir):
    """(The executors' readers, without starting Spark: the batch source's pieces, the stream
    source's ranges.)"""
    from engine.spark.source import Piece, read_piece
    from engine.spark.stream_source import Range, read_range

    try:
        make_topic(data_dir, 3)
        log, _ = damage_batch(data_dir, 50)
        piece = Piece("t", 0, log, 0, 0, os.path.getsize(log), None)
        with pytest.raises(CorruptRecordError) as e:  # (a split is whole segments: no way past)
            _rows(read_piece(piece, ["offset"]))
        assert "a Spark job's read does not go past a damaged batch (offsets 50..99)" in str(e.value)
        assert f"'rivven segment recover {log} --truncate-corrupt'" in str(e.value)
        with pytest.raises(CorruptRecordError, match=r"offsets 50\.\.99 of t-0 cannot be read"):
            _rows(read_range(data_dir, Range("t", 0, 10, 150), False, True, None, ["offset"]))
        assert _rows(read_range(data_dir, Range("t", 0, 100, 150), False, True, None,
                                ["offset"])) == list(range(100, 150))
        with Engine.open(data_dir) as eng:
            eng.segments.recover(["t"], truncate_corrupt=True)  # (the batch at 50 cut out)
        piece = Piece("t", 0, log, 0, 0, os.path.getsize(log), None)
        assert _rows(read_piece(piece, ["offset"])) == [*range(50), *range(100, 150)]
        # (the executor's engine, open across the repair, follows it)
        assert _rows(read_range(data_dir, Range("t", 0, 10, 150), False, True, None,
                                ["offset"])) == [*range(10, 50), *range(100, 150)]
    finally:
        for key in [k for k in worker._engines if k[1] == data_dir]:
            worker._engines.pop(key).close()
