"""Compaction semantics and explain (in process, no Spark). (A pass killed at each step of
the swap: tests/crash/test_compaction_crash.py.)"""

import json
import threading

import pytest
from helpers import run_rivven
from helpers.cli import run_in_process
from helpers.compaction import CFG, everything, random_log, reference

from engine import Engine, Record


def test_compaction_keeps_the_last_record_per_key(data_dir):
    random_log(data_dir)
    with Engine.open(data_dir) as eng:
        before = everything(eng)
        plans = eng.maintenance.compaction_plan("c")
        out = eng.maintenance.compact("c")
        after = everything(eng)
    for p, plan in enumerate(plans):
        assert not plan["skip"] and out[p]["records_out"] < out[p]["records_in"]
        assert after[p] == reference(before[p], plan["cleanable_end"])  # offsets, ts, headers
        assert after[p][-1].offset == before[p][-1].offset
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    with Engine.open(data_dir) as eng:  # and the log takes appends and reads across gaps
        eng.produce("c", [Record(key=b"new", value=b"x")], partition=0)
        assert eng.read("c", 0, eng.end_offsets("c")[0] - 1)[0].value == b"x"
        assert eng.offset_for_time("c", 0, 0) == everything(eng)[0][0].offset


def test_tombstones_survive_one_pass_then_go_after_the_horizon(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {**CFG, "delete.retention.ms": "3600000"})
        for i in range(100):
            eng.produce("c", [Record(key=b"k%d" % (i % 5), value=b"v")])
        eng.produce("c", [Record(key=b"k0", value=None)])
        for _ in range(60):  # push k0's tombstone out of the active segment
            eng.produce("c", [Record(key=b"z", value=b"roll")])
        eng.maintenance.compact("c")
        tomb = [r for r in everything(eng)[0] if r.key == b"k0"]
        assert [r.value for r in tomb] == [None]  # kept by the first pass
        d = eng.maintenance.explain_compaction("c")[0]
        assert d["tombstones"]["count"] == 1 and d["tombstones"]["removable_now"] == 0
        assert d["tombstones"]["next_horizon"] is not None
        eng.maintenance.compact("c", force=True)  # horizon not reached: still there
        assert [r.value for r in everything(eng)[0] if r.key == b"k0"] == [None]
        eng.alter_topic_config("c", {"delete.retention.ms": "0"})
        assert eng.maintenance.explain_compaction("c")[0]["tombstones"]["removable_now"] == 1
        eng.maintenance.compact("c", force=True)
        assert [r for r in everything(eng)[0] if r.key == b"k0"] == []


def test_lag_active_segment_and_small_segments_merge(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {**CFG, "min.compaction.lag.ms": str(3600_000)})
        for i in range(200):  # all recent: nothing is cleanable because of the lag
            eng.produce("c", [Record(key=b"k%d" % (i % 10), value=b"v%d" % i)])
        (plan,) = eng.maintenance.compaction_plan("c")
        assert plan["skip"] == "no sealed segment is cleanable yet" and plan["held_by_lag"]
        segs_before = len(eng.segments.list_segments("c"))
        eng.alter_topic_config("c", {"min.compaction.lag.ms": "0"})
        eng.maintenance.compact("c")
        first = len(eng.segments.list_segments("c"))
        assert first == segs_before  # one output per full source segment
        eng.maintenance.compact("c", force=True)  # the small survivors merge
        merged = eng.segments.list_segments("c")
        assert len(merged) < first and len(merged) <= 3
        vals = {r.key: r.value for r in everything(eng)[0]}
        assert vals == {b"k%d" % k: b"v%d" % (190 + k) for k in range(10)}


def test_null_keys_refused(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, CFG)
        with pytest.raises(Exception, match="every record needs a key"):
            eng.produce("c", [Record(key=None, value=b"x")])
        eng.create_topic("d", 1, {"segment.bytes": "3000"})  # a delete topic with null keys ...
        for i in range(50):
            eng.produce("d", [Record(key=None if i == 3 else b"k", value=b"v" * 50)])
        eng.alter_topic_config("d", {"cleanup.policy": "compact",
                                     "min.cleanable.dirty.ratio": "0.01"})  # ... turned compact
        with pytest.raises(Exception, match="record at offset 3 of d-0 has no key"):
            eng.maintenance.compact("d")
        assert len(eng.read("d", 0, 0, 100)) == 50  # untouched


def test_producer_keeps_appending_during_compaction(data_dir):
    random_log(data_dir, n=300, partitions=1)
    stop = threading.Event()
    acked = []

    def produce():
        with Engine.open(data_dir) as eng:
            i = 0
            while not stop.is_set():
                acked.append(eng.produce("c", [Record(key=b"live%d" % i, value=b"x")])[0])
                i += 1

    t = threading.Thread(target=produce)
    t.start()
    try:
        with Engine.open(data_dir) as eng:
            for _ in range(3):
                eng.maintenance.compact("c", force=True)
    finally:
        stop.set()
        t.join()
    with Engine.open(data_dir, read_only=True) as eng:
        offsets = {r.offset for r in everything(eng)[0]}
    assert acked and all(o in offsets for _, o in acked)  # each key is unique: all survive


def test_compaction_explain_cli(data_dir):
    random_log(data_dir, partitions=1)
    r = run_rivven(data_dir, "compaction", "explain", "c", check=True)
    out = r.stdout.decode()
    assert "c-0: dirty ratio 1.00" in out and "cleaned by the next pass" in out
    assert "not cleanable: the active segment" in out and "tombstones:" in out
    r = run_rivven(data_dir, "compaction", "explain", "c", "--json", check=True)
    (p,) = json.loads(r.stdout)
    assert p["tombstones"]["count"] > 0 and p["dirty_ratio"] == 1.0
    r = run_in_process(data_dir, "spark", "compact", "nope")
    assert r.returncode == 1 and b"does not exist" in r.stderr
