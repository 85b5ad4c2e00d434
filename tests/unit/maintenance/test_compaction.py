"""Compaction semantics, the crash-safe swap, and explain (in process, no Spark)."""

import json
import os
import random
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, run_rivven

from engine import Engine, Record
from engine.segments.swap import MANIFEST

CFG = {"cleanup.policy": "compact", "segment.bytes": "3000", "delete.retention.ms": "0",
       "min.cleanable.dirty.ratio": "0.01"}


def random_log(data_dir, seed=1, n=600, keys=40, partitions=2, cfg=None):
    rng = random.Random(seed)
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", partitions, {**CFG, **(cfg or {})})
        for i in range(0, n, 3):
            eng.produce("c", [Record(key=b"k%d" % rng.randrange(keys),
                                     value=None if rng.random() < 0.1 else b"v%d" % (i + j),
                                     headers=[("h", b"%d" % j)] if j == 1 else ())
                              for j in range(3)])


def everything(eng, topic="c"):
    return {p: eng.read(topic, p, eng.start_offsets(topic)[p], 10**9)
            for p in range(eng.topic(topic).partitions)}


def reference(before, cleanable_end, bound=0):
    """Kafka's rule: in [start, cleanable_end) the last record per key survives (a tombstone
    only while its offset >= bound); everything from cleanable_end on is kept."""
    last = {}
    for r in before:
        if r.offset < cleanable_end:
            last[r.key] = r
    keep = {r.offset for r in last.values() if not (r.value is None and r.offset < bound)}
    return [r for r in before if r.offset >= cleanable_end or r.offset in keep]


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


SWAP_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from engine import Engine
with Engine.open(sys.argv[2]) as eng:
    eng.maintenance.compact("c")
print("DONE")
"""


@pytest.mark.parametrize("point", ["swap-cleaned", "swap-committed", "swap-renaming",
                                   "swap-swapped", "swap-installing", "swap-deleting",
                                   "swap-cleaner"])
@pytest.mark.crash
def test_kill_9_during_the_swap(data_dir, point):
    random_log(data_dir, seed=len(point), partitions=1, cfg={"segment.bytes": "2000"})
    with Engine.open(data_dir) as eng:
        eng.alter_topic_config("c", {"segment.bytes": "6000"})  # groups of ~3 segments merge
    with Engine.open(data_dir, read_only=True) as eng:
        before = everything(eng)[0]
        (plan,) = eng.maintenance.compaction_plan("c")
    env = dict(os.environ, RIVVEN_FAILPOINT=point)
    r = subprocess.run([sys.executable, "-c", SWAP_CHILD, str(ROOT), data_dir], env=env,
                       capture_output=True, timeout=120)
    assert r.returncode == -9 and b"DONE" not in r.stdout, r.stderr
    pdir = os.path.join(data_dir, "topics", "c", "partition-0")
    committed = os.path.exists(os.path.join(pdir, MANIFEST))
    with Engine.open(data_dir, read_only=True) as eng:  # a reader before any writer comes
        seen = everything(eng)[0]
    offsets = [r.offset for r in seen]
    assert offsets == sorted(set(offsets))  # in order, nothing twice
    assert set(seen) <= set(before)  # nothing made up ...
    assert set(reference(before, plan["cleanable_end"])) <= set(seen)  # ... no survivor lost
    with Engine.open(data_dir) as eng:  # a writer's open finishes or discards the swap
        after = everything(eng)[0]
        assert not os.path.exists(os.path.join(pdir, MANIFEST))
        assert not [f for f in os.listdir(pdir) if f.endswith((".cleaned", ".swap"))]
    if point == "swap-cleaned":
        assert not committed and after == before  # never committed: as before
    else:
        assert after == reference(before, plan["cleanable_end"])  # rolled forward: as after
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr


def test_compaction_explain_cli(data_dir):
    random_log(data_dir, partitions=1)
    r = run_rivven(data_dir, "compaction", "explain", "c", check=True)
    out = r.stdout.decode()
    assert "c-0: dirty ratio 1.00" in out and "cleaned by the next pass" in out
    assert "not cleanable: the active segment" in out and "tombstones:" in out
    r = run_rivven(data_dir, "compaction", "explain", "c", "--json", check=True)
    (p,) = json.loads(r.stdout)
    assert p["tombstones"]["count"] > 0 and p["dirty_ratio"] == 1.0
    r = run_rivven(data_dir, "spark", "compact", "nope")
    assert r.returncode == 1 and b"does not exist" in r.stderr
