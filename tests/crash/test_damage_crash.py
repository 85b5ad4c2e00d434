"""A repair that cuts out a damaged batch (issue 29, item 0), killed at each of its steps
(the roll of the active segment, the swap, after it): a reader sees the intact records, never
one twice or made up, and once a writer has opened the partition and the repair has run again
the log is the intact records with the damaged batch's offsets a known gap."""

import os

import pytest
from helpers import run_rivven
from helpers.damage import damage_batch, make_topic, pdir

from engine import Engine
from engine.segments.swap import MANIFEST

INTACT = [*range(50), *range(100, 150)]


def offsets(eng: Engine, start: int = 0) -> list[int]:
    return [r.offset for r in eng.read("t", 0, start, 10_000)]


@pytest.mark.parametrize("point", ["repair-rolled", "repair-staged", "swap-renaming",
                                   "swap-swapped", "swap-installed", "swap-files",
                                   "repair-swapped"])
def test_kill_9_during_a_cut_out(data_dir, point):
    make_topic(data_dir, 3)
    damage_batch(data_dir, 50)
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes",
                   env={"RIVVEN_FAILPOINT": point})
    assert r.returncode == -9, r.stderr
    with Engine.open(data_dir, read_only=True) as ro:  # a reader before any writer comes
        assert offsets(ro, 100) == list(range(100, 150))
        assert [r.offset for r in ro.read("t", 0, 0, 50)] == list(range(50))
    with Engine.open(data_dir) as eng:  # a writer's open finishes or discards the swap
        assert eng.end_offsets("t") == {0: 150}
    staging = os.path.join(data_dir, ".compaction")  # (and clears the killed run's folder)
    left = os.listdir(staging) if os.path.isdir(staging) else []
    assert not [n for n in left if n.startswith("repair-")], left
    d = pdir(data_dir)
    assert not os.path.exists(os.path.join(d, MANIFEST))
    assert not [f for f in os.listdir(d) if f.endswith((".cleaned", ".swap"))]
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes")
    assert r.returncode == 0, r.stderr
    with Engine.open(data_dir) as eng:
        assert offsets(eng) == INTACT
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0 and b"offsets 50..99 were cut out" in r.stdout, r.stdout + r.stderr
