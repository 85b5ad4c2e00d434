"""Issue 13, what verify sees: damaged checkpoints never acted on, batch headers range-checked,
bodies and offset continuity verified, honest `segment recover`, damaged WAL records, bounded
WAL scans. Real files and real `rivven` subprocesses throughout."""

import json
import os
import resource
import struct
import subprocess
import sys

import pytest
from conftest import ROOT, flip, run_rivven

from engine import Engine, Record
from engine.errors import CorruptRecordError
from engine.format.encode import encode_batch
from engine.format.records import HEADER, batch_crc, read_header
from engine.segments import checkpoint
from engine.tools.verify import scan_segment

MAX_BASE_OFFSET = (1 << 63) - (1 << 31)  # (engine.format.records.MAX_BASE_OFFSET)
FIELDS = ("base_offset", "batch_length", "magic", "r8", "r16", "crc", "attributes", "r16b",
          "last_offset_delta", "record_count", "first_timestamp", "max_timestamp",
          "producer_id", "producer_epoch", "r16c", "base_sequence", "body_length",
          "stored_length")


def forge(buf, body=None, **fields):
    """A batch with ``fields`` (and ``body``) changed and its CRC made valid again: bytes a
    CRC check alone cannot tell from a good batch."""
    buf = bytearray(buf)
    if body is not None:
        buf = buf[:72] + bytearray(body) + bytearray(-(72 + len(body)) & 7)
        fields = {"stored_length": len(body), "body_length": len(body),
                  "batch_length": len(buf) - 12, **fields}
    vals = dict(zip(FIELDS, HEADER.unpack_from(buf, 0)))
    vals.update(fields)
    HEADER.pack_into(buf, 0, *[vals[f] for f in FIELDS])
    struct.pack_into("<I", buf, 16, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def batch(base, n=10):
    return bytes(encode_batch([b"k"] * n, [b"x"] * n, 1000).assign(base))


def pdir_of(data_dir, topic="t"):
    return os.path.join(data_dir, "topics", topic, "partition-0")


def logs(pdir):
    return sorted(os.path.join(pdir, f) for f in os.listdir(pdir) if f.endswith(".log"))


def make(data_dir, batches=60, segment_bytes="2048", cfg=None):
    """Topic t, one partition: ``batches`` batches of 10 records (offsets 0..), closed cleanly
    (so its .checkpoint covers every byte)."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": segment_bytes, "retention.ms": "-1",
                                  **(cfg or {})})
        for b in range(batches):
            eng.produce("t", [Record(key=b"k%d" % i, value=b"v%06d" % (b * 10 + i),
                                     timestamp=1000 + b) for i in range(10)])
    return pdir_of(data_dir)


def consume_all(data_dir, n):
    r = run_rivven(data_dir, "consume", "t", "--offset", "beginning", "-n", str(n), "-f",
                   "%o\n")
    return r, [int(x) for x in r.stdout.split()]


def assert_clean_error(r, code, *words):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err, r.stdout.decode()[-300:])
    assert "internal error" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


# ---------------------------------------------------------------- 1. checkpoints
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
    pdir = make(data_dir, batches=30)
    before = logs(pdir)
    ckpt = os.path.join(pdir, ".checkpoint")
    with open(ckpt, "wb") as f:
        f.write(CRAFTED[name])
    r = run_rivven(data_dir, "segment", "verify")
    assert_clean_error(r, 3)
    assert f"checkpoint: {ckpt}" in r.stdout.decode() or ckpt in r.stdout.decode()
    r, offsets = consume_all(data_dir, 300)  # a reader: reads everything, warns
    assert_clean_error(r, 0, "warning:", ckpt)
    assert offsets == list(range(300))
    r = run_rivven(data_dir, "produce", "t", input=b"after\n")  # a writer: the same
    assert_clean_error(r, 0, "warning:", ckpt)
    assert logs(pdir) == before
    assert run_rivven(data_dir, "segment", "verify").returncode == 0  # the next one is sealed


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
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3, r.stdout
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "checkpoint" and "disagrees with the log" in f["message"]
    if change in ("newer segment", "position past the end", "recovery point past the end"):
        r = run_rivven(data_dir, "produce", "t", input=b"x\n")  # what the loader sees too
        assert_clean_error(r, 0, "warning:", "disagrees with the log")
        r, offsets = consume_all(data_dir, 301)
        assert offsets == list(range(301))


# ---------------------------------------------------------------- 2. header ranges
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
    with open(logs(pdir)[-1], "ab") as f:
        f.write(data)


@pytest.mark.parametrize("fields", [{"base_offset": 10**15}, {"base_offset": (1 << 63) - 1},
                                    {"last_offset_delta": (1 << 31) - 1}])
def test_crc_valid_batch_out_of_range_is_found_and_produce_fails_cleanly(data_dir, fields):
    """The reproducer: a CRC-valid batch with base offset 10^15, INT64_MAX or last delta
    2^31-1 passed verify, and produce crashed with `argument out of range`."""
    pdir = make(data_dir, batches=3, segment_bytes="1048576")
    log = logs(pdir)[-1]
    at = os.path.getsize(log)
    # past the checkpoint, where a writer cuts what a crash left: a CRC-valid batch is not that
    append_active(pdir, forge(batch(30), **fields))
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    f = json.loads(r.stdout)["findings"][0]
    assert (f["kind"], f["path"], f["position"]) in (("range", log, at), ("header", log, at))
    for args, inp in ((("produce", "t"), b"x\n"), (("consume", "t", "-n", "1"), None),
                      (("consume", "t", "-g", "g", "-n", "1"), None)):
        r = run_rivven(data_dir, *args, input=inp)
        assert_clean_error(r, 3, log, f"position {at}")
    assert os.path.getsize(log) == at + len(batch(30))  # not cut: damage is reported
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[0]
    assert row["truncate_at"] == at and row["batches_removed"] == 1
    assert run_rivven(data_dir, "produce", "t", input=b"x\n").returncode == 0
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


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


# ---------------------------------------------------------------- 2. bodies
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
    pdir = make(data_dir, batches=3, segment_bytes="1048576")
    log = logs(pdir)[-1]
    at = os.path.getsize(log)
    append_active(pdir, bodies()[name])
    append_active(pdir, batch(40))  # a good batch after it: nothing hides the damage
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    f = json.loads(r.stdout)["findings"][0]
    assert (f["path"], f["position"]) == (log, at) and f["kind"] in ("body", "header"), f
    r = run_rivven(data_dir, "consume", "t", "--offset", "beginning", "-n", "50")
    if name == "non-zero padding":  # (readers never look at it: only verify minds)
        assert_clean_error(r, 0)
    else:
        assert_clean_error(r, 3, log, f"position {at}")
    r = run_rivven(data_dir, "segment", "recover", "--json")  # left alone, said so
    assert r.returncode == 3 and json.loads(r.stdout)[-1]["unrepaired"]
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[-1]
    assert row["truncate_at"] == at and row["batches_removed"] == 2
    assert row["records_removed"] >= 10 and row["offset_range"][1] == 49
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


# ---------------------------------------------------------------- 2. continuity, recover
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
    flip(log, starts[3] + 100)
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    point = checkpoint.read_checkpoint(pdir)
    assert (point["position"], point["recovery_point"]) == (starts[3], 30)
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    assert_clean_error(r, 0)
    assert "warning" not in r.stderr.decode()
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


# ---------------------------------------------------------------- 3. damaged WAL records
def dead_pid():
    """The pid of a process that has exited (what a dead stream's name carries)."""
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, check=True)
    return int(p.stdout)


def wal_frame(payload):
    """A WAL record whose frame (length, type, CRC, padding) is intact, whatever it holds."""
    from engine.format import crc
    from engine.wal.records import FRAME, FRAME_SIZE

    value = crc.crc32c(payload, crc.crc32c(bytes([1, 0, 0, 0])))
    return FRAME.pack(len(payload), 1, value) + payload + bytes(-(FRAME_SIZE + len(payload)) & 7)


def wal_payload(tid, partition=0, name=b"t", batch_bytes=b"", name_len=None):
    from engine.wal.records import PAYLOAD

    return PAYLOAD.pack(tid, partition, 1, len(name) if name_len is None else name_len) + \
        name + batch_bytes


def damaged_records(tid):
    good = batch(10)
    return {
        "short batch": wal_payload(tid, batch_bytes=b"\x01" * 20),
        "bad magic": wal_payload(tid, batch_bytes=b"\x00" * 104),
        "name longer than the record": wal_payload(tid, name_len=5000, batch_bytes=good),
        "name not utf-8": wal_payload(tid, name=b"\xff\xfe", batch_bytes=good),
        "partition out of range": wal_payload(tid, partition=1 << 31, batch_bytes=good),
        "batch shorter than its header says": wal_payload(tid, batch_bytes=good[:-8]),
        "batch crc": wal_payload(tid, batch_bytes=good[:-1] + b"\x01"),
        "batch header out of range": wal_payload(
            tid, batch_bytes=forge(good, base_offset=(1 << 63) - 1)),
    }


@pytest.mark.parametrize("name", [n if n == "short batch" else pytest.param(
    n, marks=pytest.mark.slow) for n in sorted(damaged_records(bytes(16)))])
def test_wal_record_with_intact_frame_and_bad_inner_batch(data_dir, name):
    """The reproducer: a WAL record with a valid frame CRC but a short or bad inner batch was
    a struct.error internal error in wal verify, produce, consume -g and segment recover,
    blocked every writable open, and wal recover found nothing."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        tid = bytes.fromhex(eng.topic("t").id)
    stream = os.path.join(data_dir, "wal", f"{dead_pid()}-deadbeef")
    os.makedirs(stream)
    open(os.path.join(stream, "stream.lock"), "w").close()
    wal = os.path.join(stream, "00000000000000000000.wal")
    first = wal_frame(wal_payload(tid, batch_bytes=batch(0)))  # replayable: log end is 0
    with open(wal, "wb") as f:
        f.write(first + wal_frame(damaged_records(tid)[name])
                + wal_frame(wal_payload(tid, batch_bytes=batch(10))))
    at = len(first)
    r = run_rivven(data_dir, "wal", "verify", "--json")
    assert_clean_error(r, 3)
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["file"], f["position"]) == (wal, at)
    r = run_rivven(data_dir, "wal", "inspect")
    assert_clean_error(r, 0)
    assert f"position: {at} error:" in r.stdout.decode()
    assert_clean_error(run_rivven(data_dir, "wal", "list"), 0)
    for args, inp in ((("produce", "t"), b"x\n"), (("consume", "t", "-g", "g", "-n", "1"), None),
                      (("segment", "recover"), None), (("wal", "checkpoint"), None)):
        r = run_rivven(data_dir, *args, input=inp)
        assert_clean_error(r, 3, f"{wal}:{at}", "rivven wal recover")
    r = run_rivven(data_dir, "wal", "recover", "--dry-run", "--json")
    assert_clean_error(r, 0)
    (row,) = json.loads(r.stdout)
    assert (row["file"], row["truncate_at"], row["damaged_record"], row["records_after"]) == \
        (wal, at, True, 1)
    r = run_rivven(data_dir, "wal", "recover")  # it would drop an intact record: asks
    assert_clean_error(r, 1, "--yes", "1 intact record(s)")
    r = run_rivven(data_dir, "wal", "recover", "--yes")
    assert_clean_error(r, 0)
    assert f"truncated at {at}" in r.stdout.decode() and os.path.getsize(wal) == at
    r = run_rivven(data_dir, "produce", "t", input=b"after\n")
    assert_clean_error(r, 0, "1 batch(es) replayed")
    r, offsets = consume_all(data_dir, 11)
    assert offsets == list(range(11))


# ---------------------------------------------------------------- 4. bounded WAL scans
def limited(mib):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return set_limit


def rivven_limited(data_dir, *args, input=None, mib=300):
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "rivven_cli.main", *args], input=input,
                          capture_output=True, env=env, cwd=ROOT, timeout=600,
                          preexec_fn=limited(mib))


@pytest.mark.slow
@pytest.mark.parametrize("tail", ["zeros", "huge record"])
def test_sparse_multi_gib_wal_file_is_scanned_in_flat_memory(data_dir, tail):
    """The reproducer: scan_file read whole files: an 8 GiB sparse WAL file was a MemoryError
    under a 1 GB limit. Here the limit is 300 MB of address space."""
    code = (f"import os\nfrom engine import Engine, Record\ne = Engine.open({data_dir!r})\n"
            "e.create_topic('t', 1)\ne.produce('t', [Record(value=b'v%d' % i) for i in "
            "range(10)])\nos._exit(0)  # dies: its stream stays\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    from engine import wal as wal_mod
    from engine.wal.records import FRAME

    (wal,) = [os.path.join(s, f) for s in wal_mod.all_streams(data_dir)
              for f in os.listdir(s) if f.endswith(".wal")]
    used = os.path.getsize(wal)
    if tail == "huge record":  # a frame claiming 2 GiB, its bytes the file's hole
        with open(wal, "ab") as f:
            f.write(FRAME.pack((1 << 31) - 1, 1, 0))
    os.truncate(wal, 8 << 30)  # sparse: 8 GiB that take no disk space
    r = rivven_limited(data_dir, "wal", "verify")
    assert_clean_error(r, 0 if tail == "zeros" else 3)
    if tail != "zeros":
        assert f"{wal} at position {used}: CRC mismatch" in r.stdout.decode()
    r = rivven_limited(data_dir, "wal", "list", "--json")
    assert_clean_error(r, 0)
    (row,) = json.loads(r.stdout)
    assert row["records"] == 1 and row["bytes"] == used
    r = rivven_limited(data_dir, "produce", "t", input=b"after\n")  # a writable open replays
    assert_clean_error(r, 0, "1 already in the log")
    assert not os.path.exists(wal)
    r, offsets = consume_all(data_dir, 11)
    assert offsets == list(range(11))
