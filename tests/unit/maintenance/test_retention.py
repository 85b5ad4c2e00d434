"""Retention by time and size, delete-records, and the persisted log start offset."""

import json
import os
import shutil
import time

import pytest
from helpers import run_rivven
from helpers.cli import run_in_process

from engine import Engine, Record
from engine.errors import OffsetOutOfRange

DAY = 86_400_000


def pdir(data_dir, p=0):
    return os.path.join(data_dir, "topics", "t", f"partition-{p}")


def logs(data_dir, p=0):
    return sorted(f for f in os.listdir(pdir(data_dir, p)) if f.endswith(".log"))


def make(data_dir, old, new, cfg, now):
    """``old`` records 3 days old, then ``new`` fresh ones, 10 per batch, ~5 batches/segment."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "1200", **cfg})
        for i in range(0, old + new, 10):
            ts = now - 3 * DAY if i < old else now
            eng.produce("t", [Record(key=b"k%d" % j, value=b"v%05d" % (i + j), timestamp=ts)
                              for j in range(10)])


def test_retention_by_time(data_dir):
    now = int(time.time() * 1000)
    make(data_dir, 200, 100, {"retention.ms": "-1"}, now)
    before = logs(data_dir)
    run_rivven(data_dir, "topic", "alter-config", "t", "--set", f"retention.ms={DAY}",
               check=True)
    r = run_rivven(data_dir, "retention", "apply", "--dry-run", "--json", check=True)
    plan = json.loads(r.stdout)
    assert plan["dry_run"] and logs(data_dir) == before  # a dry run changes nothing
    segs = plan["segments"]
    assert segs and all(s["reason"] == "time" for s in segs)
    assert all(s["max_timestamp"] == now - 3 * DAY for s in segs)
    assert "3.0d old, retention.ms is 1.0d" in segs[0]["detail"]
    new_start = segs[-1]["new_log_start_offset"]
    assert new_start <= 200 and new_start == segs[-1]["next_offset"]
    r = run_rivven(data_dir, "retention", "apply", check=True)
    assert b"deleted %d segment(s)" % len(segs) in r.stderr
    assert len(logs(data_dir)) == len(before) - len(segs)
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.start_offsets("t") == {0: new_start}
        with pytest.raises(OffsetOutOfRange, match=f"valid offsets are {new_start}..300"):
            eng.read("t", 0, 0)
        assert eng.read("t", 0, new_start, 1)[0].offset == new_start
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    # nothing more to delete; an all-old log keeps its active segment
    r = run_rivven(data_dir, "retention", "apply", "--json", check=True)
    assert json.loads(r.stdout)["segments"] == []


def test_retention_never_deletes_the_active_segment(data_dir):
    now = int(time.time() * 1000)
    make(data_dir, 100, 0, {"retention.ms": "1000"}, now)
    with Engine.open(data_dir) as eng:  # a writer's open applies retention by itself
        eng.partition_offsets("t", 0)
        assert len(logs(data_dir)) == 1  # the active one, old records and all
        assert eng.start_offsets("t") == {0: int(logs(data_dir)[0][:20])}
        assert eng.end_offsets("t") == {0: 100}
        assert eng.produce("t", [Record(value=b"x")]) == [(0, 100)]
        assert [r.value for r in eng.read("t", 0, 100)] == [b"x"]


def test_retention_by_size(data_dir):
    now = int(time.time() * 1000)
    make(data_dir, 0, 400, {}, now)
    sizes = {f: os.path.getsize(os.path.join(pdir(data_dir), f)) for f in logs(data_dir)}
    run_rivven(data_dir, "topic", "alter-config", "t", "--set", "retention.bytes=3000",
               check=True)
    r = run_rivven(data_dir, "retention", "apply", "--json", check=True)
    gone = json.loads(r.stdout)["segments"]
    assert gone and all(s["reason"] == "size" for s in gone)
    left = [sizes[f] for f in logs(data_dir)]
    assert sum(left) >= 3000 > sum(left) - left[0]  # Kafka's rule: stop before going under
    assert json.loads(r.stdout)["bytes_freed"] == sum(sizes.values()) - sum(left)


@pytest.mark.slow
def test_delete_records_moves_the_start_and_survives_reopen(data_dir, tmp_path):
    now = int(time.time() * 1000)
    make(data_dir, 0, 300, {}, now)
    reader = Engine.open(data_dir, read_only=True)  # another process's view, opened before
    assert reader.read("t", 0, 0, 1)[0].offset == 0
    first = os.path.join(pdir(data_dir), logs(data_dir)[0])
    saved = str(tmp_path / "first.log")
    shutil.copy(first, saved)

    r = run_in_process(data_dir, "delete-records", "t", "--before", "125", "--json")
    assert r.returncode == 1 and b"needs confirmation" in r.stderr  # not at a terminal
    r = run_rivven(data_dir, "delete-records", "t", "--before", "125", "--yes", "--json",
                   check=True)
    (row,) = json.loads(r.stdout)
    assert (row["prior_log_start_offset"], row["new_log_start_offset"]) == (0, 125)
    assert row["deleted_segments"] and not os.path.exists(first)
    assert all(s["next_offset"] <= 125 for s in row["deleted_segments"])

    with pytest.raises(OffsetOutOfRange, match="valid offsets are 125..300"):
        reader.read("t", 0, 3)
    assert [r.offset for r in reader.read("t", 0, 125, 3)] == [125, 126, 127]
    reader.close()
    r = run_rivven(data_dir, "consume", "t", "-o", "beginning", "-n", "1", "-f", "%o\n",
                   check=True)
    assert r.stdout == b"125\n"

    # never back; never past the end; @TIMESTAMP
    r = run_rivven(data_dir, "delete-records", "t", "--before", "50", "--yes", check=True)
    assert b"nothing to delete" in r.stderr
    r = run_in_process(data_dir, "delete-records", "t", "--before", "301", "-p", "0", "--yes")
    assert r.returncode == 1 and b"the log ends at 300" in r.stderr
    r = run_in_process(data_dir, "delete-records", "t", "--before", "later", "--yes")
    assert r.returncode == 2

    # a crash between persisting the start and unlinking: the next writer finishes the job
    shutil.copy(saved, first)
    with Engine.open(data_dir) as eng:
        assert eng.start_offsets("t") == {0: 125}
        eng.partition_offsets("t", 0)
        assert not os.path.exists(first)
        eng.produce("t", [Record(value=b"after")])
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.start_offsets("t") == {0: 125} and eng.end_offsets("t") == {0: 301}
    r = run_rivven(data_dir, "delete-records", "t", "--before", f"@{now + 1}", "--yes",
                   "--json", check=True)
    assert json.loads(r.stdout)[0]["new_log_start_offset"] == 300  # the record written after
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_rivven(data_dir, "topic", "describe", "t", "--json", check=True)
    assert json.loads(r.stdout)["partition_info"][0]["start_offset"] == 300
