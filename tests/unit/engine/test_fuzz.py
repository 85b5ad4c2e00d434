"""The fuzz test of every reader (tests/fuzz_worker.py): segment, index, WAL, offsets-log,
checkpoint, manifest, catalog, cold-copy, ``.txnindex`` (of a compacted segment) and
metric-file (a dead process's ``.values`` and ``.keys``) bytes damaged by hypothesis, every
reader, the metrics and ``verify`` run over them in a subprocess under a memory limit: no
internal error, no hang, no allocation beyond the limit. The worker's planted bugs show each
kind of failure is caught. ``make test`` runs 120 cases (8 of each kind); ``make fuzz`` the
long campaign (2,500)."""

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT

WORKER = [sys.executable, str(ROOT / "tests" / "fuzz_worker.py")]


def fuzz(*args: str, timeout: float = 3000) -> subprocess.CompletedProcess:
    return subprocess.run([*WORKER, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("planted, shows", [("error", "KeyError: 'planted'"),
                                            ("memory", "MemoryError"),
                                            ("hang", "ran longer than its time limit")])
def test_the_fuzzer_catches_each_kind_of_failure(planted, shows):
    r = fuzz("--cases", "3", "--kinds", "offsets", "--inject", planted, "--case-seconds", "3",
             timeout=300)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert shows in r.stdout + r.stderr
    assert "FAILED after" in r.stdout


# `make test`: a short run, every kind its share of the cases (a fixed seed each); `make fuzz`:
# the long campaign, the kind of each case drawn too (RIVVEN_FUZZ_CASES=2500)
CAMPAIGN = os.environ.get("RIVVEN_FUZZ_CASES")
KINDS = 15  # (the files the worker damages: tests/fuzz_worker.py's build)
CASES = int(CAMPAIGN or 8 * KINDS)


@pytest.mark.slow
def test_every_reader_survives_damaged_bytes_under_a_memory_limit():
    """Segment, index, WAL, offsets-log, checkpoint, manifest, catalog, marker, cold-copy,
    ``.txnindex`` (a compacted segment's) and metric (a dead process's .values and .keys)
    bytes, damaged by hypothesis (derandomized: the same cases every run), checksums fixed in
    half of them; every reader, the metrics, verify and (every 10th case) the rivven
    commands, read-only and writable, in a process limited to 1 GiB of address space."""
    r = fuzz("--cases", str(CASES), "--cli-every", "10", "--limit-mb", "1024",
             *(() if CAMPAIGN else ("--per-kind",)))
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    head, _, counts = r.stdout.strip().splitlines()[-1].partition(": ")
    assert head == f"OK {CASES} cases"
    per_kind = json.loads(counts)
    assert len(per_kind) == KINDS and min(per_kind.values()) > CASES / KINDS / 2, per_kind
