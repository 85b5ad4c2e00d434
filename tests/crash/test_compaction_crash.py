"""Compaction under kill -9: a pass killed at each step of the swap leaves the records before
or after it, never a mix, and the next writer's open finishes or discards it; a process that
missed another's crashed swap compacts on a true view."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.compaction import everything, random_log, reference

from engine import Engine, Record
from engine.maintenance.compaction import CompactionError
from engine.segments.swap import MANIFEST

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


def _pdir(data_dir, p=0):
    return os.path.join(data_dir, "topics", "c", f"partition-{p}")


def _verify(data_dir):
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]


def test_compact_in_a_process_that_missed_a_crashed_swap(data_dir):
    """A process that had the partition open when another process's swap crashed after its
    commit point never rolls that swap forward; its next checkpoint makes it list the
    half-installed segments (new first segments next to replaced ones not yet deleted). A pass
    planned on that mixed view used to write overlapping segments over the old manifest: the
    log stayed permanently damaged (segment verify: range) and held records twice."""
    random_log(data_dir, seed=3, partitions=1, cfg={"segment.bytes": "2000"})
    with Engine.open(data_dir) as eng:
        eng.alter_topic_config("c", {"segment.bytes": "6000"})  # groups of ~3 segments
    with Engine.open(data_dir, read_only=True) as eng:
        before = everything(eng)[0]
        (plan,) = eng.maintenance.compaction_plan("c")
    eng = Engine.open(data_dir)
    try:
        eng.produce("c", [Record(key=b"x", value=b"y")])  # this process has it open
        env = dict(os.environ, RIVVEN_FAILPOINT="swap-deleting")
        r = subprocess.run([sys.executable, "-c", SWAP_CHILD, str(ROOT), data_dir], env=env,
                           capture_output=True, timeout=120)
        assert r.returncode == -9, r.stderr
        assert os.path.exists(os.path.join(_pdir(data_dir), MANIFEST))
        eng.checkpoint()  # relists: now sees the half-done swap
        try:
            eng.maintenance.compact("c", force=True)
        except CompactionError:
            pass  # refusing is fine; damaging the log is not
    finally:
        eng.close()
    with Engine.open(data_dir) as eng:
        after = everything(eng)[0]
    offsets = [x.offset for x in after]
    assert offsets == sorted(set(offsets))
    assert set(reference(before, plan["cleanable_end"])) <= set(after)
    assert {x.offset for x in after} <= {x.offset for x in before} | {len(before)}
    _verify(data_dir)
