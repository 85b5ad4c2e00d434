"""engine.counters: each process's counters in .stats/, summed over processes, each counted
exactly once: live ones read, dead ones (exited or killed -9) merged once into retired.json.
(A producer killed -9: tests/crash/test_counters_crash.py.)"""

import json
import math
import os
import struct

import pytest
from helpers.counters import APPENDED, appended, process_files, start_producer, stats

from engine import Engine, Record
from engine.counters import gather
from engine.counters.meter import Meter
from engine.counters.names import FSYNC_BUCKETS, SERIES, all_metrics
from engine.errors import InvalidConfig, UnknownPartition


def test_series_table_is_consistent():
    names = [m.name for m in all_metrics()]
    assert len(names) == len(set(names))
    assert APPENDED in names and "rivven_wal_fsync_duration_seconds" in names
    for m in all_metrics():
        assert m.name.startswith("rivven_")
        assert (m.kind == "counter") == m.name.endswith("_total")
        assert "partition" not in m.labels or "topic" in m.labels
    assert SERIES["rivven_wal_fsync_duration_seconds"].buckets == FSYNC_BUCKETS


def test_a_process_that_counts_nothing_leaves_no_file(topic_dir):
    with Engine.open(topic_dir) as eng:
        eng.topics()
        assert process_files(topic_dir) == []
    assert not os.path.exists(os.path.join(stats(topic_dir), gather.RETIRED))


def test_live_processes_are_read_and_summed_then_merged_once_at_exit(topic_dir):
    a = start_producer(topic_dir, 5, "wait")
    b = start_producer(topic_dir, 7, "wait")
    try:
        assert len(process_files(topic_dir)) == 2  # both live, each its own file
        assert appended(topic_dir) == {0: 70, 1: 50}
        assert appended(topic_dir) == {0: 70, 1: 50}  # reading changes nothing
    finally:
        for p in (a, b):
            p.communicate(b"\n", timeout=60)
    assert process_files(topic_dir) == []  # each merged itself at close
    assert appended(topic_dir) == {0: 70, 1: 50}
    with Engine.open(topic_dir, read_only=True) as eng:
        assert eng.end_offsets("t") == {0: 70, 1: 50}


def test_a_merge_cut_short_is_never_counted_twice(topic_dir):
    m = Meter(topic_dir)
    m.get(APPENDED, topic="t", partition=0).inc(11)
    ident = m.ident
    # a crash after retired.json named the process merged, before its files were deleted
    gather._store(stats(topic_dir), {(APPENDED, (("topic", "t"), ("partition", "0"))): [11.0]},
                  {ident})
    m.detach().close(remove=False)  # (its flock goes: the process is dead)
    assert ident in process_files(topic_dir)
    assert appended(topic_dir) == {0: 11}
    assert ident not in process_files(topic_dir)  # the cleanup was finished
    assert appended(topic_dir) == {0: 11}


def test_counters_histograms_runs_and_gauges_merge_by_their_rules(topic_dir):
    a, b = Meter(topic_dir), Meter(topic_dir)
    for m, secs in ((a, 0.0002), (b, 0.004)):
        m.get("rivven_wal_fsync_duration_seconds").observe(secs)
        m.get("rivven_hot_cache_bytes").set(1000)
    a.get("rivven_wal_fsync_duration_seconds").observe(0.0005)  # on a bound: in its bucket
    a.get("rivven_tier").record(True, 2.0)
    b.get("rivven_tier").record(False, 9.0)
    got = gather.gather(stats(topic_dir)).series
    h = got[("rivven_wal_fsync_duration_seconds", ())]
    assert h[FSYNC_BUCKETS.index(0.00025)] == 1 and h[FSYNC_BUCKETS.index(0.0005)] == 1
    assert h[FSYNC_BUCKETS.index(0.005)] == 1 and sum(h[:-1]) == 3
    assert h[-1] == pytest.approx(0.0047)
    assert got[("rivven_hot_cache_bytes", ())] == [2000]  # live gauges add up
    runs, failures, last, duration = got[("rivven_tier", ())]
    assert (runs, failures, duration) == (2, 1, 2.0) and last > 1.7e9
    gather.retire(a)
    gather.retire(b)
    got = gather.gather(stats(topic_dir)).series
    assert ("rivven_hot_cache_bytes", ()) not in got  # a dead process's gauge is no one's
    assert got[("rivven_tier", ())][:2] == [2, 1]
    assert sum(got[("rivven_wal_fsync_duration_seconds", ())][:-1]) == 3


def test_series_of_a_deleted_topic_are_dropped(topic_dir):
    with Engine.open(topic_dir) as eng:
        eng.create_topic("gone", partitions=1)
        eng.produce("gone", [Record(key=None, value=b"v")])
        eng.produce("t", [Record(key=None, value=b"v")], partition=0)
        eng.delete_topic("gone")
        doc = eng.metrics()
    topics = {s["labels"]["topic"] for s in doc[APPENDED]["samples"]}
    assert topics == {"t"}


def test_metrics_disabled_counts_nothing(topic_dir):
    with Engine.open(topic_dir, settings={"metrics.enabled": "false"}) as eng:
        eng.produce("t", [Record(key=None, value=b"v")] * 3, partition=0)
        assert process_files(topic_dir) == []
        doc = eng.metrics()
    assert doc[APPENDED]["samples"] == []
    assert doc["rivven_log_end_offset"]["samples"]  # the data dir's state is still read
    with pytest.raises(InvalidConfig, match="metrics.enabled"):
        Engine.open(topic_dir, settings={"metrics.enabled": "maybe"})


def test_damaged_process_files_are_read_defensively(topic_dir):
    d = stats(topic_dir)
    os.makedirs(d, exist_ok=True)
    ident = "m-999999-deadbeef"
    lines = [
        b"0 " + json.dumps([APPENDED, {"topic": "t", "partition": "0"}]).encode(),  # good
        b"1 " + json.dumps([APPENDED, {"topic": "t"}]).encode(),  # labels missing
        b"2 " + json.dumps(["rivven_no_such_total", {}]).encode(),  # unknown name
        b"99999999999 " + json.dumps([APPENDED, {"topic": "t", "partition": "1"}]).encode(),
        b"3 {not json",
        b"4 " + json.dumps([APPENDED, {"topic": "t", "partition": "x" * 10000}]).encode(),
        b"5 " + json.dumps([APPENDED, {"topic": "t", "partition": "1"}]).encode(),  # good
        b"6 " + json.dumps([APPENDED, {"topic": "t", "partition": "2"}]).encode(),  # past end
        b"0 " + json.dumps(["rivven_checkpoints_total", {}]).encode(),  # slot reused
        b"7 " + json.dumps(["rivven_checkpoints_total", {}]).encode(),  # no newline: in flight
    ]
    with open(os.path.join(d, ident + ".keys"), "wb") as f:
        f.write(b"\n".join(lines))
    with open(os.path.join(d, ident + ".values"), "wb") as f:
        f.write(struct.pack("<6d", 42, 1, 1, 1, 1, 7) + b"\x01\x02")  # a torn slot
    got = gather.gather(d)  # (dead: merged; a value no process counts: test_values_...)
    assert got.series == {(APPENDED, (("topic", "t"), ("partition", "0"))): [42.0],
                          (APPENDED, (("topic", "t"), ("partition", "1"))): [7.0]}
    assert got.problems == []
    assert process_files(topic_dir) == []


def test_a_damaged_retired_file_is_set_aside_and_counting_goes_on(topic_dir):
    with Engine.open(topic_dir) as eng:
        eng.produce("t", [Record(key=None, value=b"v")] * 4, partition=1)
    path = os.path.join(stats(topic_dir), gather.RETIRED)
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"#")
    assert appended(topic_dir) == {}
    assert os.path.exists(path + ".damaged")
    with Engine.open(topic_dir) as eng:
        eng.produce("t", [Record(key=None, value=b"v")] * 2, partition=1)
    assert appended(topic_dir) == {1: 2}


def test_produce_read_and_group_counts(topic_dir):
    with Engine.open(topic_dir) as eng:
        eng.produce("t", [Record(key=None, value=b"v" * 10)] * 10, partition=0)
        with pytest.raises(UnknownPartition):
            eng.produce("t", [Record(key=None, value=b"v")], partition=5)
        assert len(eng.read("t", 0, 0)) == 10
        c = eng.consumer("g", "t")
        assert len(c.poll(timeout_ms=100)) == 10
        c.commit()
        c.close()
        doc = eng.metrics()

    def value(name, **labels):
        found = [s["value"] for s in doc[name]["samples"]
                 if all(s["labels"].get(k) == str(v) for k, v in labels.items())]
        return found[0] if found else None

    assert value(APPENDED, topic="t", partition=0) == 10
    assert value("rivven_produce_requests_total", topic="t") == 2
    assert value("rivven_produce_errors_total", topic="t") == 1
    assert value("rivven_records_read_total", topic="t", partition=0) == 20
    assert value("rivven_group_commits_total", group="g") == 1
    assert value("rivven_group_rebalances_total", group="g") == 1
    assert value("rivven_group_lag", group="g", topic="t", partition=0) == 0
    assert value("rivven_log_end_offset", topic="t", partition=0) == 10
    fsync = doc["rivven_wal_fsync_duration_seconds"]["samples"][0]
    assert fsync["count"] >= 1 and fsync["buckets"]["+Inf"] == fsync["count"]
    group = doc["rivven_wal_group_commit_records"]["samples"][0]
    assert group["sum"] == 10


def test_a_forked_child_counts_in_its_own_files(topic_dir):
    m = Meter(topic_dir)
    c = m.get(APPENDED, topic="t", partition=0)
    c.inc(10)
    pid = os.fork()
    if pid == 0:  # the child: the same handle, its own file from zero
        try:
            c.inc(5)
            gather.retire(m)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    c.inc(1)
    assert appended(topic_dir) == {0: 16}  # the child's 5 retired, the parent's 11 live
    gather.retire(m)
    assert appended(topic_dir) == {0: 16} and process_files(topic_dir) == []


def test_what_cannot_be_trusted_in_stats_is_skipped_or_refused(topic_dir):
    d = stats(topic_dir)
    os.makedirs(d, exist_ok=True)
    # a process that died making its keys file (never named, never counted): removed
    open(os.path.join(d, "m-999998-00000000.keys.tmp"), "wb").close()
    open(os.path.join(d, "m-999998-00000000.values"), "wb").close()
    # a key line nested too deep for json, a value too large to be a count
    with open(os.path.join(d, "m-999997-00000000.keys"), "wb") as f:
        f.write(b"0 " + b"[" * 5000 + b"\n")
    open(os.path.join(d, "m-999997-00000000.values"), "wb").close()
    gather._store(d, {}, set())
    path = os.path.join(d, gather.RETIRED)
    doc = json.loads(open(path).read())
    doc.pop("crc32c")
    doc["series"] = [[APPENDED, {"topic": "t", "partition": "0"}, [10 ** 400]],
                     [APPENDED, {"topic": "t", "partition": "1"}, [3]]]
    from engine.fs import jsondoc
    with open(path, "wb") as f:
        f.write(jsondoc.seal(doc))
    assert appended(topic_dir) == {1: 3}
    assert sorted(os.listdir(d)) == ["meter.lock", "retired.json"]
    # a FIFO where a keys file belongs: named, set aside, never waited on; the scrape goes on
    os.mkfifo(os.path.join(d, "m-999996-00000000.keys"))
    got = gather.gather(d)
    assert [p.split(": ")[0] for p in got.problems] == [os.path.join(d, "m-999996-00000000.keys")]
    assert "a FIFO, not a regular file" in got.problems[0]
    assert got.series[(APPENDED, (("topic", "t"), ("partition", "1")))] == [3.0]
    assert "m-999996-00000000.keys.damaged" in os.listdir(d)


def test_a_poll_smaller_than_a_batch_still_counts_what_it_read(topic_dir):
    with Engine.open(topic_dir) as eng:
        eng.produce_batch("t", [b"v"] * 1000, partition=0)
        c = eng.consumer("g", "t", max_poll_records=100)
        assert len(c.poll(timeout_ms=200)) == 100
        c.close()
        assert len(eng.read("t", 0, 0, max_records=10)) == 10
        doc = eng.metrics()
    (read,) = [s["value"] for s in doc["rivven_records_read_total"]["samples"]
               if s["labels"]["partition"] == "0"]
    assert read >= 1010  # whole batches as they were fetched, never none


# ------------------------------------------------------------- values no process counts
FSYNC = "rivven_wal_fsync_duration_seconds"
GOOD_FSYNC = [1.0] + [0.0] * len(FSYNC_BUCKETS) + [0.0005]  # one observation, its sum
N = len(FSYNC_BUCKETS)


def dead_process(d: str, ident: str, series: list[tuple[str, dict, list[float]]]) -> None:
    """A dead process's file set (no flock on its keys file) holding ``series``."""
    os.makedirs(d, exist_ok=True)
    lines, values = [], []
    for name, labels, vals in series:
        lines.append(f"{len(values)} {json.dumps([name, labels])}\n".encode())
        values += vals
    with open(os.path.join(d, ident + ".keys"), "wb") as f:
        f.write(b"".join(lines))
    with open(os.path.join(d, ident + ".values"), "wb") as f:
        f.write(struct.pack(f"<{len(values)}d", *values))


@pytest.mark.parametrize("name,vals,why", [
    (APPENDED, [1e300], "out of range"),
    (APPENDED, [float(1 << 63)], "out of range"),
    (APPENDED, [-5.0], "negative"),
    (APPENDED, [math.nan], "NaN"),
    (APPENDED, [math.inf], "out of range"),
    (FSYNC, [2.0, -1.0] + [0.0] * (N - 1) + [0.001], "negative"),  # buckets not cumulative
    (FSYNC, [0.5] + [0.0] * N + [0.001], "fraction"),
    (FSYNC, [1.0] + [0.0] * N + [math.nan], "NaN"),  # sum NaN
    (FSYNC, [0.0] * (N + 1) + [3.0], "a sum but no observation"),
    (FSYNC, [float(1 << 62)] * 2 + [0.0] * (N - 1) + [1.0], "count is out of range"),
    ("rivven_compaction", [1.0, 2.0, 0.0, 0.0], "more failed runs than runs"),
    ("rivven_compaction", [1.0, 1.0, 1.7e9, 2.0], "a last success without"),
])
def test_values_no_process_counts_are_set_aside_never_merged(topic_dir, name, vals, why):
    """A dead process's file holding 1e300 or 2^63 was scraped as that value and merged
    into retired.json for good; an inconsistent histogram was accepted."""
    d = stats(topic_dir)
    with Engine.open(topic_dir) as eng:
        eng.produce("t", [Record(key=None, value=b"v")] * 3, partition=0)
    labels = {"topic": "t", "partition": "1"} if name == APPENDED else {}
    if name == "rivven_compaction":
        labels = {"topic": "t"}
    retired = os.path.join(d, gather.RETIRED)
    before = json.loads(open(retired).read())["series"]
    base = gather.gather(d).series
    dead_process(d, "m-999999-0badf00d", [(APPENDED, {"topic": "t", "partition": "0"}, [4.0]),
                                          (name, labels, vals)])
    got = gather.gather(d)
    assert len(got.problems) == 1
    problem = got.problems[0]
    assert problem.startswith(os.path.join(d, "m-999999-0badf00d.values") + ": ") and why in problem
    assert "set aside as m-999999-0badf00d.keys.damaged and m-999999-0badf00d.values.damaged" in problem
    # nothing of it merged (its good series neither: the file as a whole is not trusted)
    assert got.series == base
    assert json.loads(open(retired).read())["series"] == before  # never polluted
    assert sorted(n for n in os.listdir(d) if n.endswith(".damaged")) == [
        "m-999999-0badf00d.keys.damaged", "m-999999-0badf00d.values.damaged"]
    again = gather.gather(d)  # set aside once: the next scrape is clean
    assert again.problems == [] and again.series == got.series


def test_a_merge_that_would_leave_the_range_sets_the_process_aside(topic_dir):
    d = stats(topic_dir)
    big = float(1 << 62) + float(1 << 61)
    dead_process(d, "m-999990-00000001", [(APPENDED, {"topic": "t", "partition": "0"}, [big])])
    assert appended(topic_dir) == {0: big}  # (a value a process may hold: merged)
    dead_process(d, "m-999990-00000002", [(APPENDED, {"topic": "t", "partition": "0"}, [big])])
    got = gather.gather(d)
    assert len(got.problems) == 1 and "leave the range" in got.problems[0]
    assert "m-999990-00000002.values" in got.problems[0]
    assert appended(topic_dir) == {0: big}
    assert "m-999990-00000002.values.damaged" in os.listdir(d)


@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a symbolic link"])
@pytest.mark.parametrize("suffix", [".values", ".keys"])
def test_a_fifo_is_named_set_aside_and_never_stops_the_scrape(topic_dir, tmp_path, suffix,
                                                             kind):
    """A FIFO named <stem>.values gave an error naming <stem>.keys, and every scrape failed
    until it was removed by hand (so did any file that is not a regular one)."""
    d = stats(topic_dir)
    with Engine.open(topic_dir) as eng:
        eng.produce("t", [Record(key=None, value=b"v")] * 3, partition=0)
    stem = os.path.join(d, "m-999995-00000000")
    dead_process(d, "m-999995-00000000", [(APPENDED, {"topic": "t", "partition": "1"}, [2.0])])
    outside = tmp_path / "outside"
    os.replace(stem + suffix, outside)
    if kind == "a FIFO":
        os.mkfifo(stem + suffix)
    elif kind == "a directory":
        os.mkdir(stem + suffix)
    else:
        os.symlink(outside, stem + suffix)
    got = gather.gather(d)
    assert [p.split(": ")[0] for p in got.problems] == [stem + suffix]
    assert f"{kind}, not a regular file" in got.problems[0]
    assert appended(topic_dir) == {0: 3}
    assert not os.path.lexists(stem + suffix) and os.path.lexists(stem + suffix + ".damaged")
    assert outside.exists()  # (a link: the link set aside, never followed)
    assert gather.gather(d).problems == []


def test_a_live_process_with_values_no_process_counts_is_left_out_not_moved(topic_dir):
    """A live process maps its values file: it is left out of the scrape (named), set aside
    only once that process is gone; its own close merges none of the damaged values."""
    d = stats(topic_dir)
    m = Meter(topic_dir)
    m.get(APPENDED, topic="t", partition=0).inc(5)
    m.get(APPENDED, topic="t", partition=1).inc(1)
    with open(m.slots.values_path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<d", 1e300))
    got = gather.gather(d)
    assert len(got.problems) == 1 and m.slots.values_path in got.problems[0]
    assert "left out of this scrape while its process lives" in got.problems[0]
    assert os.path.exists(m.slots.values_path)
    gather.retire(m)
    assert appended(topic_dir) == {0: 5}
