"""Tiered storage under kill -9: a tier run or a restore killed at every step loses nothing;
every offset is local or in the manifest, and every record reads back."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.tiering import cold_objects, everything, expected, load_manifest, local_bases, make, pdir

from engine import Engine

TIER_CHILD = """
import sys
from engine import Engine
with Engine.open(sys.argv[1]) as eng:
    eng.maintenance.tier("t")
"""
RESTORE_CHILD = """
import sys
from engine import Engine
with Engine.open(sys.argv[1]) as eng:
    eng.maintenance.tier_restore("t", from_offset=0)
"""


@pytest.mark.parametrize("point,child", [
    # a tier run: copied; its swap committed, the manifest written, a local segment deleted;
    # the swap done
    ("tier-copied", TIER_CHILD), ("swap-committed", TIER_CHILD), ("swap-files", TIER_CHILD),
    ("swap-deleting", TIER_CHILD), ("tier-manifest", TIER_CHILD),
    # a restore: a file, then a whole segment installed (the swap committed); the swap done,
    # objects not removed
    ("swap-installing", RESTORE_CHILD), ("swap-installed", RESTORE_CHILD),
    ("restore-manifest", RESTORE_CHILD)])
def test_kill_9_at_every_step_loses_nothing(data_dir, point, child):
    make(data_dir, n=300)
    if child is RESTORE_CHILD:
        with Engine.open(data_dir) as eng:
            eng.maintenance.tier("t")
    env = dict(os.environ, RIVVEN_FAILPOINT=point, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", child, data_dir], env=env, timeout=120)
    assert p.returncode == -9
    with Engine.open(data_dir, read_only=True) as eng:  # a reader, before a writer mends it
        assert everything(eng) == expected(300)
    _consistent(data_dir, 300)
    with Engine.open(data_dir) as eng:  # the next run finishes the job
        if child is TIER_CHILD:
            eng.maintenance.tier("t")
            assert len(local_bases(data_dir)) <= 3
            # the dead run's copies are collected (its first step left an empty manifest)
            assert len(cold_objects(data_dir)) == 3 * len(load_manifest(pdir(data_dir)))
        else:
            eng.maintenance.tier_restore("t", from_offset=0)
            assert local_bases(data_dir)[0] == 0 and load_manifest(pdir(data_dir)) == []
    _consistent(data_dir, 300)


def _consistent(data_dir, n):
    """Every offset is local or in the manifest, every record reads back, the objects the
    manifest names are intact, and only they remain after the next collection."""
    entries = load_manifest(pdir(data_dir))
    bases = local_bases(data_dir)
    covered = entries[-1].next_offset if entries else 0
    assert bases[0] <= covered or bases[0] == 0
    with Engine.open(data_dir) as eng:
        assert everything(eng) == expected(n)
        assert eng.maintenance.verify_cold("t")[0]["findings"] == []
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
