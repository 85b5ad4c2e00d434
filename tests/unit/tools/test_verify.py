"""segment verify / recover / reindex / list / inspect on real files."""

import json
import os
import random

from helpers import flip, run_rivven
from helpers.cli import run_in_process

from engine import Engine, Record
from engine.tools.verify import scan_segment, verify_partition


def make(data_dir, batches=40, cfg=None):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, cfg or {"segment.bytes": "8192", "index.interval.bytes": "512",
                                    "retention.ms": "-1"})
        for b in range(batches):
            eng.produce("t", [Record(key=b"k%d" % i, value=b"v%06d" % (b * 10 + i),
                                     timestamp=1000 + b) for i in range(10)])
    return os.path.join(data_dir, "topics", "t", "partition-0")


def test_clean_dir_verifies(data_dir):
    make(data_dir)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and out["records"] == 400 and out["segments"] >= 2


def test_every_flipped_bit_in_a_sealed_segment_is_found_exactly(data_dir):
    pdir = make(data_dir)
    first = os.path.join(pdir, "00000000000000000000.log")
    data = open(first, "rb").read()
    rep = scan_segment(first, 0)
    starts = rep.batch_starts + [len(data)]
    rng = random.Random(3)
    for pos in rng.sample(range(len(data)), 60):
        flip(first, pos, rng.randrange(8))
        reps = verify_partition(pdir)
        found = [f for r in reps for f in r.findings if f.path == first]
        with open(first, "r+b") as f:
            f.write(data)
        assert found, f"flip at {pos} not found"
        batch_start = max(s for s in starts if s <= pos)
        assert found[0].position == batch_start, (pos, found[0])


def test_flipped_index_entry_is_found(data_dir):
    pdir = make(data_dir)
    idx = os.path.join(pdir, "00000000000000000000.index")
    assert os.path.getsize(idx) >= 8
    flip(idx, 4)  # the position of entry 0
    found = [f for r in verify_partition(pdir) for f in r.findings]
    assert [f.kind for f in found] == ["index"] and found[0].position == 0
    r = run_rivven(data_dir, "segment", "verify", "t")
    assert r.returncode == 3 and b"index" in r.stdout
    r = run_rivven(data_dir, "segment", "reindex", os.path.join(pdir, "00000000000000000000.log"),
                   "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["index_entries"] >= 1
    assert run_rivven(data_dir, "segment", "verify", "t").returncode == 0


def test_torn_tail_found_and_recovered(data_dir):
    pdir = make(data_dir, batches=3, cfg={})
    log = os.path.join(pdir, "00000000000000000000.log")
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b"\x01" * 30)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    f = json.loads(r.stdout)["findings"][0]
    assert f["kind"] == "torn-tail" and f["position"] == size
    dry = run_rivven(data_dir, "segment", "recover", "--dry-run", "--json")
    assert json.loads(dry.stdout)[0]["truncate_at"] == size
    assert os.path.getsize(log) == size + 30
    assert run_rivven(data_dir, "segment", "recover").returncode == 0
    assert os.path.getsize(log) == size
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


def test_mid_file_corruption_needs_truncate_corrupt(data_dir):
    pdir = make(data_dir, batches=5, cfg={})
    log = os.path.join(pdir, "00000000000000000000.log")
    starts = scan_segment(log, 0).batch_starts
    flip(log, starts[2] + 100)
    r = run_rivven(data_dir, "segment", "recover", "--json")
    assert r.returncode == 3  # left alone
    assert json.loads(r.stdout)[0]["unrepaired"]
    assert run_in_process(data_dir, "segment", "recover", "--truncate-corrupt").returncode == 1  # no tty
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["records_removed"] == 30
    assert os.path.getsize(log) == starts[2]
    with Engine.open(data_dir) as eng:
        assert eng.end_offsets("t") == {0: 20}
        assert eng.produce("t", [Record(key=b"k", value=b"new")]) == [(0, 20)]
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


def test_list_names_a_sealed_segment_with_junk_at_its_end(data_dir):
    """(found by tests/fuzz_worker.py) A sealed segment's size is its file size: trailing
    bytes made ``segment list`` an internal error; now the row says so and a warning names it."""
    pdir = make(data_dir)
    first = os.path.join(pdir, "00000000000000000000.log")
    with open(first, "ab") as f:
        f.write(b"\xff")
    r = run_rivven(data_dir, "segment", "list", "t", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[0]["damage"].startswith("1 trailing bytes") and rows[1]["damage"] is None
    assert rows[0]["records"] > 0
    r = run_rivven(data_dir, "segment", "list", "t")
    assert r.returncode == 0 and b"internal error" not in r.stderr
    assert b"warning: " + first.encode() + b" is damaged" in r.stderr


def test_list_and_inspect(data_dir):
    pdir = make(data_dir, batches=4, cfg={})
    rows = json.loads(run_rivven(data_dir, "segment", "list", "t", "--json").stdout)
    assert rows == [{"partition": 0, "tier": "local", "file": os.path.join(os.path.abspath(pdir),
                                                          "00000000000000000000.log"),
                     "base_offset": 0, "last_offset": 39, "records": 40,
                     "bytes": os.path.getsize(rows[0]["file"]), "min_timestamp": 1000,
                     "max_timestamp": 1003, "damage": None}]
    log = os.path.join(pdir, "00000000000000000000.log")
    out = run_rivven(data_dir, "segment", "inspect", log, "--json").stdout.decode().splitlines()
    batches = [json.loads(x) for x in out]
    assert [b["base_offset"] for b in batches] == [0, 10, 20, 30]
    assert all(b["crc_ok"] and b["count"] == 10 for b in batches)
    out = run_rivven(data_dir, "segment", "inspect", log, "--records", "--max", "3",
                     "--json").stdout.decode().splitlines()
    recs = [json.loads(x) for x in out[1:]]
    assert [r["value"] for r in recs] == ["v000000", "v000001", "v000002"]
