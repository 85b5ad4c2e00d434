"""Compaction passes racing each other: a stale pass never swaps over a segment rewritten to the
same size, and a process open during another's pass can still compact."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.compaction import everything, random_log, reference

from engine import Engine, Record
from engine.maintenance.compaction import CompactionError


def _verify(data_dir):
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]


def test_stale_pass_cannot_swap_over_a_segment_rewritten_to_the_same_size(data_dir):
    """Two passes at once: the later swap is refused only when a source segment vanished or
    changed *size*. A rewritten batch can keep its size exactly (4 one-byte records minus the
    third: the 4-byte offset deltas fill the padding the removed record leaves), so a stale
    pass swapped its older copy of segment 0 back in, over the passes that had removed the
    key's old value and then its tombstone: deleted data came back."""
    from engine.maintenance import cleaner, compaction

    cfg = {"cleanup.policy": "compact", "segment.bytes": "150", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, cfg)
        eng.produce("c", [Record(key=k, value=b"1") for k in (b"a", b"b", b"c", b"d")])
        eng.produce("c", [Record(key=b"e", value=b"1")])  # rolls: segment 0 is sealed
        # pass B: planned and written now, swapped last (a slow Spark job, say)
        (plan,) = eng.maintenance.compaction_plan("c", force=True, now=compaction_now())
        assert [s["base_offset"] for s in plan["segments"]] == [0]
        keep, _ = cleaner.survivor_offsets(cleaner.scan_keys(plan["segments"]),
                                           plan["tombstone_bound"])
        out = os.path.join(data_dir, ".compaction", "stale", "c-0")
        writes = [cleaner.write_group(g, lambda offs: [o in keep for o in offs], out)
                  for g in plan["groups"]]
        eng.produce("c", [Record(key=b"c", value=None)])  # delete c
        eng.produce("c", [Record(key=b"f", value=b"1")])
        eng.maintenance.compact("c", force=True)  # removes c's value (segment 0 keeps its size) ...
        eng.maintenance.compact("c", force=True)  # ... then its tombstone
        assert [r.key for r in eng.read("c", 0, 0, 100)] == [b"a", b"b", b"d", b"e", b"f"]
        with pytest.raises(CompactionError, match="changed or vanished since the plan"):
            # refused: segment 0 is not the file the plan saw
            eng.maintenance.apply_compaction("c", plan, out, compaction_now(),
                                 compaction.min_tombstone(writes))
        assert [r.key for r in eng.read("c", 0, 0, 100)] == [b"a", b"b", b"d", b"e", b"f"]
    _verify(data_dir)


def compaction_now():
    import time
    return int(time.time() * 1000)


STALE_CHILD = r"""
import sys

import pytest
sys.path.insert(0, sys.argv[1])
from engine import Engine, Record
with Engine.open(sys.argv[2]) as eng:
    eng.produce("c", [Record(key=b"q%d" % i, value=b"z" * 50) for i in range(100)])
    eng.maintenance.compact("c", force=True)
"""


def test_a_process_open_during_another_pass_can_still_compact(data_dir):
    """A long-lived process keeps its sealed segments open; after another process compacted
    the partition, its plans used the replaced files' sizes, so every swap was refused
    ("changed or vanished since the plan"), pass after pass, until it happened to read."""
    random_log(data_dir, seed=3, partitions=1, cfg={"segment.bytes": "2000"})
    with Engine.open(data_dir) as eng:
        eng.produce("c", [Record(key=b"x", value=b"y")])  # opens the partition
        r = subprocess.run([sys.executable, "-c", STALE_CHILD, str(ROOT), data_dir],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        eng.produce("c", [Record(key=b"q%d" % i, value=b"w" * 50) for i in range(100)])
        with Engine.open(data_dir, read_only=True) as ro:  # (a read here would refresh eng)
            before = everything(ro)[0]
        (res,) = eng.maintenance.compact("c", force=True)
        after = everything(eng)[0]
    plan = res["plan"]
    assert after == reference(before, plan["cleanable_end"], plan["tombstone_bound"])
    _verify(data_dir)
