"""What ``segment verify`` and ``segment recover`` find in segments: batch headers
range-checked (a CRC-valid batch with impossible fields), bodies verified, batches past a sealed
segment's end, offset continuity (holes, missing segments, documented gaps are not findings),
and an honest recover. Real files and real ``rivven`` subprocesses (of each family of forged
batches, one case; the others in process)."""

import json
import os
import struct

import pytest
from helpers import flip, run_rivven
from helpers.cli import run_in_process
from helpers.verify import assert_clean_error, batch, consume_all, forge, logs, make

from engine import Engine, Record
from engine.errors import CorruptRecordError
from engine.format.encode import encode_batch
from engine.format.records import read_header
from engine.segments import checkpoint
from engine.tools.verify import scan_segment

MAX_BASE_OFFSET = (1 << 63) - (1 << 31)  # (engine.format.records.MAX_BASE_OFFSET)


# ---------------------------------------------------------------- header ranges
def test_read_header_range_checks():
    good = batch(5)
    assert read_header(good).next_offset == 15
    for fields in ({"base_offset": -1}, {"base_offset": MAX_BASE_OFFSET + 1},
                   {"base_offset": (1 << 63) - 1}, {"last_offset_delta": (1 << 31) - 1},
                   {"last_offset_delta": 10},  # a gap without explicit offsets
                   {"last_offset_delta": 8},  # fewer offsets than records
                   {"record_count": 0, "last_offset_delta": -1}, {"record_count": 0},
                   {"stored_length": 0}, {"stored_length": -8}, {"body_length": -1}):
        with pytest.raises(CorruptRecordError):
            read_header(forge(good, **fields), 0, " here")
    top = forge(good, base_offset=MAX_BASE_OFFSET, attributes=0x600,
                last_offset_delta=(1 << 31) - 2)
    assert read_header(top).next_offset == (1 << 63) - 1  # the largest still in range


def append_active(pdir, data):
    """Batches forged into the active segment as if a writer had appended them: the durable
    end it would have published goes too, so readers read the files as they are (a reader
    never reads past a published end: docs/DURABILITY.md, "Direct appends")."""
    with open(logs(pdir)[-1], "ab") as f:
        f.write(data)
    if os.path.exists(os.path.join(pdir, ".end")):
        os.unlink(os.path.join(pdir, ".end"))


@pytest.mark.parametrize("fields", [{"base_offset": 10**15}, {"base_offset": (1 << 63) - 1},
                                    {"last_offset_delta": (1 << 31) - 1}])
def test_crc_valid_batch_out_of_range_is_found_and_produce_fails_cleanly(data_dir, fields):
    """The reproducer: a CRC-valid batch with base offset 10^15, INT64_MAX or last delta
    2^31-1 passed verify, and produce crashed with `argument out of range`."""
    run = run_rivven if fields == {"base_offset": 10**15} else run_in_process  # (one: real)
    pdir = make(data_dir, batches=3, segment_bytes="1048576")
    log = logs(pdir)[-1]
    at = os.path.getsize(log)
    # past the checkpoint, where a writer cuts what a crash left: a CRC-valid batch is not that
    append_active(pdir, forge(batch(30), **fields))
    r = run(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    f = json.loads(r.stdout)["findings"][0]
    assert (f["kind"], f["path"], f["position"]) in (("range", log, at), ("header", log, at))
    for args, inp in ((("produce", "t"), b"x\n"), (("consume", "t"), None),
                      (("consume", "t", "-g", "g"), None)):
        r = run(data_dir, *args, input=inp)  # (a read that reaches it)
        assert_clean_error(r, 3, log, f"position {at}")
    for args in (("consume", "t", "-n", "1"), ("consume", "t", "-g", "h", "-n", "1")):
        assert_clean_error(run(data_dir, *args), 0)  # damage stays local (issue 29)
    assert os.path.getsize(log) == at + len(batch(30))  # not cut: damage is reported
    r = run(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[0]
    assert row["truncate_at"] == at and row["batches_removed"] == 1
    assert run(data_dir, "produce", "t", input=b"x\n").returncode == 0
    assert run(data_dir, "segment", "verify").returncode == 0


def test_batch_past_the_end_of_a_sealed_segment(data_dir):
    """In a sealed segment the writer never scans: the reader stops at it."""
    pdir = make(data_dir, batches=12, segment_bytes="1024")
    first = logs(pdir)[0]
    rep = scan_segment(first, 0)
    at = rep.batch_starts[-1]
    with open(first, "r+b") as f:
        f.seek(at)
        f.write(forge(batch(rep.batch_bases[-1]), base_offset=10**15))
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["findings"][0]["position"] == at
    r = run_rivven(data_dir, "consume", "t", "--offset", "beginning", "-n", "200")
    assert_clean_error(r, 3, first, f"position {at}")


# ---------------------------------------------------------------- bodies
def bodies():
    good = batch(30)
    gzipped = bytes(encode_batch([b"k"] * 10, [b"x"] * 10, 1000, codec=1).assign(30))
    assert read_header(gzipped).stored_length % 8  # (so the batch ends in padding)
    h = read_header(good)
    body = good[72:72 + h.stored_length]
    return {
        "codec 5": forge(good, attributes=h.attributes | 5),
        "codec 6": forge(good, attributes=h.attributes | 6),
        "codec 7": forge(good, attributes=h.attributes | 7),
        "record count 0": forge(good, record_count=0),
        "body length": forge(good, body_length=h.body_length + 8),
        "stored length": forge(good, stored_length=h.stored_length - 8),
        "short body": forge(good, body=body[:16], record_count=10),
        "explicit offsets without deltas": forge(good, attributes=h.attributes | 0x200),
        "explicit deltas not increasing": forge(
            good, attributes=(h.attributes | 0x200),
            body=struct.pack("<10i", *([0] * 10)) + bytes(8) + body),
        "bad column offsets": forge(good, body=struct.pack("<11i", 0, *range(9, 0, -1), 10)
                                    + bytes(4) + body[48:]),
        "non-zero padding": forge(gzipped[:-1] + b"\x01"),
    }


@pytest.mark.parametrize("name", sorted(bodies()))
def test_crc_valid_batch_with_an_invalid_body(data_dir, name):
    """The reproducer: codec 5-7, record_count 0, wrong body/stored length, explicit-offsets
    flag without deltas: CRC-valid, passed verify and recover; every consume failed there."""
    run = run_rivven if name == "codec 5" else run_in_process  # (one through a real process)
    pdir = make(data_dir, batches=3, segment_bytes="1048576")
    log = logs(pdir)[-1]
    at = os.path.getsize(log)
    append_active(pdir, bodies()[name])
    append_active(pdir, batch(40))  # a good batch after it: nothing hides the damage
    r = run(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    f = json.loads(r.stdout)["findings"][0]
    assert (f["path"], f["position"]) == (log, at) and f["kind"] in ("body", "header"), f
    r = run(data_dir, "consume", "t", "--offset", "beginning", "-n", "50")
    if name == "non-zero padding":  # (readers never look at it: only verify minds)
        assert_clean_error(r, 0)
    else:
        assert_clean_error(r, 3, log, f"position {at}")
    r = run(data_dir, "segment", "recover", "--json")  # left alone, said so
    assert r.returncode == 3 and json.loads(r.stdout)[-1]["unrepaired"]
    r = run(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[-1]
    # (issue 29: only the damaged batch goes, the good one after it stays)
    assert row["truncate_at"] is None and row["batches_removed"] == 0
    (cut,) = row["cut_out"]
    assert (cut["position"], cut["end"], cut["first"], cut["last"]) == (
        at, at + len(bodies()[name]), 30, 39)
    assert run(data_dir, "segment", "verify").returncode == 0
    r, offsets = consume_all(data_dir, 50, run)
    assert offsets == [*range(30), *range(40, 50)]


@pytest.mark.parametrize("field", [8, 68])  # batch_length, stored_length
def test_verify_reads_on_past_a_damaged_header(data_dir, field):
    """(Issue 29, item 0.) A header whose length cannot be read: verify found the batch
    after it by its CRC as readers do, and checks the rest of the file (it stopped there:
    "N bytes from here to the end cannot be read", the batches after it unchecked)."""
    pdir = make(data_dir, batches=5, segment_bytes="1048576")
    log = logs(pdir)[-1]
    rep = scan_segment(log, 0)
    starts = rep.batch_starts
    flip(log, starts[2] + field, bit=4)
    after = scan_segment(log, 0)
    (f,) = after.findings
    assert (f.kind, f.position, f.resume_at, f.offsets) == ("header", starts[2], starts[3],
                                                            (20, 29))
    assert after.batch_bases == [0, 10, 30, 40] and after.valid_end == rep.valid_end
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["findings"][0]["resume_at"] == starts[3]


# ---------------------------------------------------------------- continuity, recover
def test_sealed_segment_truncated_to_half_is_a_hole_verify_and_recover_report(data_dir):
    """The reproducer: a sealed segment truncated to half (recover said "0 records dropped")
    left a silent hole that consume jumped over."""
    pdir = make(data_dir, batches=60, segment_bytes="4096")
    segs = logs(pdir)
    victim = segs[1]
    rep = scan_segment(victim, int(os.path.basename(victim)[:20]))
    nxt = int(os.path.basename(segs[2])[:20])
    half = rep.bytes // 2
    os.truncate(victim, half)
    cut = max(s for s in rep.batch_starts if s <= half)
    i = rep.batch_starts.index(cut)
    lost_from = rep.batch_bases[i]
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    kinds = {(f["kind"], f["path"]) for f in json.loads(r.stdout)["findings"]}
    assert ("torn-tail", victim) in kinds
    dry = run_rivven(data_dir, "segment", "recover", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    row = next(x for x in json.loads(dry.stdout) if x["path"] == victim)
    assert row["truncate_at"] == cut and row["needs_confirmation"] and row["sealed"]
    assert row["end_offset"] == lost_from
    assert row["holes"] == [{"first": lost_from, "last": nxt - 1, "offsets": nxt - lost_from}]
    if row["incomplete_batch"]:
        assert row["records_removed"] == 10 and row["offset_range"][0] == lost_from
    assert os.path.getsize(victim) == half  # a dry run changes nothing
    r = run_rivven(data_dir, "segment", "recover")  # not at a terminal, no --yes: refused
    assert_clean_error(r, 1, "--yes")
    assert f"hole: offsets {lost_from}..{nxt - 1}" in r.stderr.decode()
    assert os.path.getsize(victim) == half
    r = run_rivven(data_dir, "segment", "recover", "--yes")
    assert_clean_error(r, 0)
    assert f"hole: offsets {lost_from}..{nxt - 1} ({nxt - lost_from})" in r.stdout.decode()
    assert os.path.getsize(victim) == cut
    r = run_rivven(data_dir, "segment", "verify", "--json")  # the hole stays visible
    assert r.returncode == 3
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "gap" and f["offsets"] == [lost_from, nxt - 1]
    # delete-records past the hole is how an operator accepts it
    assert run_rivven(data_dir, "delete-records", "t", "--before", str(nxt), "--yes"
                      ).returncode == 0
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


def test_missing_middle_segment_is_a_gap(data_dir):
    pdir = make(data_dir, batches=40, segment_bytes="4096")
    segs = logs(pdir)
    gone = segs[1]
    lo = int(os.path.basename(gone)[:20])
    hi = int(os.path.basename(segs[2])[:20])
    for suffix in (".log", ".index", ".timeindex"):
        os.unlink(gone[:-4] + suffix)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["kind"], f["path"], f["offsets"]) == ("gap", segs[0], [lo, hi - 1])
    r = run_rivven(data_dir, "segment", "recover", "--dry-run", "--json")
    assert json.loads(r.stdout)[0]["holes"] == [{"first": lo, "last": hi - 1,
                                                 "offsets": hi - lo}]


def test_missing_first_segment_is_a_gap_after_the_log_start(data_dir):
    pdir = make(data_dir, batches=40, segment_bytes="4096")
    segs = logs(pdir)
    hi = int(os.path.basename(segs[1])[:20])
    for suffix in (".log", ".index", ".timeindex"):
        os.unlink(segs[0][:-4] + suffix)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "gap" and f["offsets"] == [0, hi - 1]


def test_documented_gaps_are_not_findings(data_dir):
    """Retention and delete-records (the log start), compaction: no finding."""
    pdir = make(data_dir, batches=40, segment_bytes="4096")
    with Engine.open(data_dir) as eng:
        eng.maintenance.delete_records("t", {0: 155})  # inside a segment; whole segments below go
    assert run_rivven(data_dir, "segment", "verify").returncode == 0
    assert int(os.path.basename(logs(pdir)[0])[:20]) > 0
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "2048",
                                  "min.cleanable.dirty.ratio": "0.01"})
        for i in range(300):
            eng.produce("c", [Record(key=b"k%d" % (i % 7), value=b"v%d" % i)])
        eng.maintenance.compact("c")
    r = run_rivven(data_dir, "segment", "verify", "c", "--json")
    assert r.returncode == 0, r.stdout


def test_active_torn_tail_past_the_checkpoint_needs_no_confirmation(data_dir):
    pdir = make(data_dir, batches=3, segment_bytes="1048576")
    log = logs(pdir)[-1]
    size = os.path.getsize(log)
    append_active(pdir, batch(30)[:100])  # an incomplete batch: what a crash leaves
    r = run_rivven(data_dir, "segment", "recover", "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["truncate_at"] == size and not row["needs_confirmation"]
    assert row["incomplete_batch"] and row["records_removed"] == 10
    assert row["offset_range"] == [30, 39] and row["batches_removed"] == 0
    assert os.path.getsize(log) == size


def test_recover_below_the_checkpoint_mends_the_checkpoint(data_dir):
    pdir = make(data_dir, batches=5, segment_bytes="1048576")
    log = logs(pdir)[-1]
    starts = scan_segment(log, 0).batch_starts
    flip(log, starts[4] + 100)  # the last batch: nothing intact follows, so it is truncated
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    point = checkpoint.read_checkpoint(pdir)
    assert (point["position"], point["recovery_point"]) == (starts[4], 40)
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    assert_clean_error(r, 0)
    assert "warning" not in r.stderr.decode()
    assert run_rivven(data_dir, "segment", "verify").returncode == 0
