"""A partition's .checkpoint: crafted, damaged or disagreeing with the segments, it is
reported and never acted on (no segment deleted because of it); it is sealed, the old format is
still read, and a writer never moves the log start back from a stale copy. Real files and real
``rivven`` subprocesses (of the crafted and disagreeing checkpoints, one case each; the others
in process)."""

import json
import os

import pytest
from helpers import flip, run_rivven
from helpers.cli import run_in_process
from helpers.verify import assert_clean_error, consume_all, logs, make

from engine import Engine
from engine.segments import checkpoint


# ---------------------------------------------------------------- checkpoints
def test_checkpoint_log_start_past_the_log_end_deletes_nothing(data_dir):
    """The reproducer: log start 9000 for a log ending at 600 made the next writable open
    delete every sealed segment, and verify said OK before and after."""
    pdir = make(data_dir)
    before = logs(pdir)
    assert len(before) >= 8
    ckpt = os.path.join(pdir, ".checkpoint")
    point = checkpoint.read_checkpoint(pdir)
    with open(ckpt, "w") as f:  # a file of the old format (no seal), as the issue had it
        json.dump({**point, "log_start_offset": 9000}, f)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    found = json.loads(r.stdout)["findings"]
    assert [f["kind"] for f in found] == ["checkpoint"] and found[0]["path"] == ckpt
    assert "9000" in found[0]["message"]
    r = run_rivven(data_dir, "produce", "t", input=b"after\n")
    assert_clean_error(r, 0, "warning:", ckpt, "ignored")
    assert logs(pdir) == before  # no segment deleted because of it
    r, offsets = consume_all(data_dir, 601)
    assert r.returncode == 0 and offsets == list(range(601))
    assert checkpoint.read_checkpoint(pdir)["log_start_offset"] == 0  # replaced, sealed
    assert b"crc32c" in open(ckpt, "rb").read()
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


CRAFTED = {
    "infinity": b'{"segment": Infinity, "position": 0, "recovery_point": 0, '
                b'"log_start_offset": 0}',
    "nan": b'{"segment": 0, "position": NaN, "recovery_point": 0, "log_start_offset": 0}',
    "huge float": b'{"segment": 0, "position": 1e999, "recovery_point": 0, '
                  b'"log_start_offset": 0}',
    "deep": b"[" * 100_000,
    "deep object": b'{"a":' * 20_000,
    "string": b'{"segment": "0", "position": 0, "recovery_point": 0, "log_start_offset": 0}',
    "bool": b'{"segment": true, "position": 0, "recovery_point": 0, "log_start_offset": 0}',
    "negative": b'{"segment": 0, "position": -5, "recovery_point": 0, "log_start_offset": 0}',
    "beyond int64": b'{"segment": 0, "position": 0, "recovery_point": 0, '
                    b'"log_start_offset": 99999999999999999999999}',
    "list": b"[0, 0, 0, 0]",
    "not utf-8": b'{"segment": "\xff\xfe"}',
    "binary": bytes(range(256)) * 4,
    "missing key": b'{"segment": 0, "position": 0, "recovery_point": 0}',
    "extra key": b'{"segment": 0, "position": 0, "recovery_point": 0, "log_start_offset": 0, '
                 b'"x": 1}',
    "bad seal": b'{"segment": 0, "position": 0, "recovery_point": 0, "log_start_offset": 500, '
                b'"crc32c": 12345}',
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_checkpoint_is_reported_and_ignored(data_dir, name):
    run = run_rivven if name == "deep" else run_in_process  # (one through a real process)
    pdir = make(data_dir, batches=30)
    before = logs(pdir)
    ckpt = os.path.join(pdir, ".checkpoint")
    with open(ckpt, "wb") as f:
        f.write(CRAFTED[name])
    r = run(data_dir, "segment", "verify")
    assert_clean_error(r, 3)
    assert f"checkpoint: {ckpt}" in r.stdout.decode() or ckpt in r.stdout.decode()
    r, offsets = consume_all(data_dir, 300, run)  # a reader: reads everything, warns
    assert_clean_error(r, 0, "warning:", ckpt)
    assert offsets == list(range(300))
    r = run(data_dir, "produce", "t", input=b"after\n")  # a writer: the same
    assert_clean_error(r, 0, "warning:", ckpt)
    assert logs(pdir) == before
    assert run(data_dir, "segment", "verify").returncode == 0  # the next one is sealed


def test_checkpoint_is_sealed_and_a_flipped_bit_is_found(data_dir):
    pdir = make(data_dir, batches=30)
    with Engine.open(data_dir) as eng:
        eng.maintenance.delete_records("t", {0: 95})
    ckpt = os.path.join(pdir, ".checkpoint")
    raw = open(ckpt, "rb").read()
    assert json.loads(raw)["log_start_offset"] == 95 and b'"crc32c"' in raw
    pos = raw.index(b"95")
    flip(ckpt, pos + 1, 1)  # 95 -> 97: still JSON, still an int, still below the end
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    assert json.loads(r.stdout)["findings"][0]["kind"] == "checkpoint"
    r = run_rivven(data_dir, "offsets", "t", "--json")
    assert_clean_error(r, 0, "checksum mismatch")


def test_checkpoint_of_the_old_format_is_still_read(data_dir):
    pdir = make(data_dir, batches=30)
    with Engine.open(data_dir) as eng:
        eng.maintenance.delete_records("t", {0: 95})
    point = checkpoint.read_checkpoint(pdir)
    with open(os.path.join(pdir, ".checkpoint"), "w") as f:
        json.dump(point, f)  # exactly the four keys, no seal: what older versions wrote
    assert checkpoint.read_checkpoint(pdir) == point
    r = run_rivven(data_dir, "offsets", "t", "--json")
    assert_clean_error(r, 0)
    assert "warning" not in r.stderr.decode()
    assert json.loads(r.stdout)[0]["start_offset"] == 95
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


@pytest.mark.parametrize("change", ["newer segment", "position past the end",
                                    "position inside a batch", "recovery point off",
                                    "recovery point past the end"])
def test_checkpoint_that_disagrees_with_the_segments(data_dir, change):
    run = run_rivven if change == "newer segment" else run_in_process  # (one: a real process)
    pdir = make(data_dir, batches=30)
    point = checkpoint.read_checkpoint(pdir)
    size = os.path.getsize(logs(pdir)[-1])
    bad = dict(point)
    if change == "newer segment":
        bad["segment"] = bad["recovery_point"] = bad["recovery_point"] + 10
    elif change == "position past the end":
        bad["position"] = size + 8
    elif change == "position inside a batch":
        bad["position"] = point["position"] - 8
    elif change == "recovery point off":
        bad["recovery_point"] -= 1
    else:
        bad["recovery_point"] += 1000
    checkpoint.write_checkpoint(pdir, bad)  # sealed: only the check against the log sees it
    r = run(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3, r.stdout
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "checkpoint" and "disagrees with the log" in f["message"]
    if change in ("newer segment", "position past the end", "recovery point past the end"):
        r = run(data_dir, "produce", "t", input=b"x\n")  # what the loader sees too
        assert_clean_error(r, 0, "warning:", "disagrees with the log")
        r, offsets = consume_all(data_dir, 301, run)
        assert offsets == list(range(301))


# ------------------------------------------------------------------------ log start
def test_checkpoint_never_moves_the_log_start_back(data_dir, monkeypatch):
    """PartitionLog._read_log_start trusts (inode, mtime, size) of .checkpoint. ext4 reuses
    the inode of the file a rename replaced, and on a file system with coarse timestamps two
    rewrites of equal size in one tick look the same. A writer in another process that read
    the old file then checkpoints with its stale log start: the start moves back and records
    deleted by delete-records are readable again."""
    from engine.fs import durable
    from engine.segments import filenames
    from engine.segments.checkpoint import read_checkpoint

    real = durable.write_atomic

    def coarse_write_atomic(target, data, sync_dir=True):  # mtime with one-second granularity
        real(target, data, sync_dir)
        os.utime(target, ns=(1_700_000_000 * 10**9, 1_700_000_000 * 10**9))

    monkeypatch.setattr(durable, "write_atomic", coarse_write_atomic)
    a = Engine.open(data_dir)
    a.create_topic("t", 1)
    a.produce_batch("t", [b"v%d" % i for i in range(100)], partition=0)
    a.maintenance.delete_records("t", {0: 10})
    pdir = filenames.partition_dir(data_dir, "t", 0)
    ino1 = os.stat(os.path.join(pdir, filenames.CHECKPOINT)).st_ino
    b = Engine.open(data_dir)  # another process, say
    assert b.partition_offsets("t", 0) == (10, 100)
    a.recovery.checkpoint_all()  # .checkpoint rewritten twice, the same size as b saw it
    a.maintenance.delete_records("t", {0: 50})
    if os.stat(os.path.join(pdir, filenames.CHECKPOINT)).st_ino != ino1:
        pytest.skip("the file system did not reuse the inode")
    assert read_checkpoint(pdir)["log_start_offset"] == 50
    b.recovery.checkpoint_all()
    start = read_checkpoint(pdir)["log_start_offset"]
    a.close()
    b.close()
    assert start == 50, f"log start moved back from 50 to {start}"
