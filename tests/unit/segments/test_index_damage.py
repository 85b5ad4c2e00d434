"""Index files as crafted: an offset or time index entry is checked before use (a bad one
never breaks a lookup), a huge sparse index is not read, and a writer rebuilds a crafted index
of the active segment. The real CLI in subprocesses."""

from __future__ import annotations

import json
import os
import struct

import pytest
from helpers.crafted import clean, run_limited


# ================================================================ indexes
def sealed_topic(rivven, data_dir) -> str:
    """Topic x: 300 records in 60 batches over 3 segments, indexed every ~256 bytes."""
    assert rivven("topic", "create", "x", "-c", "segment.bytes=4096",
                  "-c", "index.interval.bytes=256").returncode == 0
    r = rivven("produce", "x", "--batch-records", "5",
               input=b"".join(b"%d\n" % i for i in range(300)))
    assert r.returncode == 0, r.stderr
    pdir = os.path.join(data_dir, "topics", "x", "partition-0")
    assert len([f for f in os.listdir(pdir) if f.endswith(".log")]) >= 3
    return os.path.join(pdir, "00000000000000000000")


def set_entry(path: str, i: int, fmt: str, *values: int) -> None:
    width = struct.calcsize(fmt)
    with open(path, "r+b") as f:
        f.seek(i * width)
        f.write(struct.pack(fmt, *values))


def entries(path: str, fmt: str) -> list[tuple[int, ...]]:
    data = open(path, "rb").read()
    return list(struct.iter_unpack(fmt, data))


@pytest.mark.parametrize("position", [-5, -(1 << 31), 1 << 30, 849, 0])
def test_a_crafted_index_entry_is_checked_before_use(rivven, data_dir, position):
    seg = sealed_topic(rivven, data_dir)
    rel, _ = entries(seg + ".index", "<ii")[3]
    set_entry(seg + ".index", 3, "<ii", rel, position)
    r = rivven("consume", "x", "--offset", str(rel + 5), "-n", "2", "-f", "%o %v\n")
    err = clean(r, 0)
    assert r.stdout == b"%d %d\n%d %d\n" % (rel + 5, rel + 5, rel + 6, rel + 6)
    assert "warning: ignoring the indexes of" in err and "segment reindex" in err  # reported
    r = rivven("consume", "x", "-g", "g", "-n", "1", "-f", "%o\n")
    clean(r, 0)
    assert r.stdout == b"0\n"
    r = rivven("segment", "verify")
    clean(r, 3)
    assert (seg + ".index").encode() in r.stdout
    # the way out: rebuilt from the log
    assert rivven("segment", "reindex", seg + ".log").returncode == 0
    clean(rivven("segment", "verify"), 0)


@pytest.mark.parametrize("entry", [(0, -5), (1, -1), (1, (1 << 31) - 1), (2, 0)])
def test_a_crafted_time_index_entry_never_breaks_a_time_lookup(rivven, data_dir, entry):
    seg = sealed_topic(rivven, data_dir)
    times = entries(seg + ".timeindex", "<qi")
    r = rivven("offsets", "x", "--time", str(times[1][0] + 1), "--json")
    want = json.loads(r.stdout)[0]["offset"]
    i, rel = entry
    set_entry(seg + ".timeindex", i, "<qi", times[i][0], rel)
    r = rivven("offsets", "x", "--time", str(times[1][0] + 1), "--json")
    clean(r, 0)
    assert json.loads(r.stdout)[0]["offset"] == want
    r = rivven("segment", "verify")
    clean(r, 3)
    assert (seg + ".timeindex").encode() in r.stdout


@pytest.mark.slow
def test_a_huge_sparse_index_is_not_read(rivven, data_dir):
    seg = sealed_topic(rivven, data_dir)
    os.truncate(seg + ".index", 2 << 30)
    os.truncate(seg + ".timeindex", 3 << 30)
    r = run_limited(data_dir, "consume", "x", "--offset", "35", "-n", "1")
    clean(r, 0)
    assert r.stdout == b"35\n"
    r = run_limited(data_dir, "offsets", "x", "--time", "0", "--json")
    clean(r, 0)
    assert json.loads(r.stdout)[0]["offset"] == 0
    r = run_limited(data_dir, "segment", "verify")
    clean(r, 3)
    assert b"more entries than" in r.stdout
    r = run_limited(data_dir, "produce", "x", input=b"more\n")  # a writer: works too
    clean(r, 0)


def test_a_writer_rebuilds_a_crafted_index_of_the_active_segment(rivven, data_dir):
    assert rivven("topic", "create", "a", "-c", "index.interval.bytes=0").returncode == 0
    for i in range(5):
        assert rivven("produce", "a", input=b"%d\n" % i).returncode == 0
    base = os.path.join(data_dir, "topics", "a", "partition-0", "00000000000000000000")
    good = entries(base + ".index", "<ii")
    assert len(good) == 4
    set_entry(base + ".index", 2, "<ii", good[2][0], -12)
    r = rivven("consume", "a", "--offset", "3", "-n", "1")
    assert clean(r, 0) == "" and r.stdout == b"3\n"  # (the active segment: not reported)
    assert rivven("produce", "a", input=b"5\n").returncode == 0
    assert entries(base + ".index", "<ii")[:4] == good
    assert rivven("segment", "verify").returncode == 0
