"""Races in log compaction (concurrent passes, crashed swaps, stale views) and the Arrow
encoder: each test reproduces a bug found in review (fixed alongside)."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT, run_rivven
from test_compaction import SWAP_CHILD, everything, random_log, reference

from engine import Engine, Record
from engine.maintenance.compaction import CompactionError
from engine.segments.swap import MANIFEST


def _pdir(data_dir, p=0):
    return os.path.join(data_dir, "topics", "c", f"partition-{p}")


def _verify(data_dir):
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]


@pytest.mark.crash
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


def test_arrow_encoder_takes_any_binary_array():
    """encode_batch copied an Arrow column's buffers as they were: large_binary (int64
    offsets) and arrays whose offsets do not start at 0 (IPC, Java Arrow slices) became
    batches with a valid CRC that decode to other bytes or fail with CorruptRecordError, and a
    ChunkedArray raised AttributeError."""
    import struct

    import pyarrow as pa

    from engine.format.decode import body_of, decode_columns, layout
    from engine.format.encode import encode_batch
    from engine.format.records import read_header

    def roundtrip(values):
        buf = bytes(encode_batch([b"k"] * len(values), values, 5).assign(0))
        h = read_header(buf, 0)
        body = body_of(buf, 0, h)
        return decode_columns(body, h, layout(body, h))[3]

    py = [b"a", None, b"", b"bcd", None, b"efgh", b"i", None, b"jk"]
    assert roundtrip(pa.array(py, pa.large_binary())) == py
    assert roundtrip(pa.array(py, pa.large_binary()).slice(3, 5)) == py[3:8]
    assert roundtrip(pa.chunked_array([pa.array(py[:4]), pa.array(py[4:])])) == py
    shifted = pa.Array.from_buffers(pa.binary(), 3, [
        None, pa.py_buffer(struct.pack("<4i", 2, 3, 5, 6)), pa.py_buffer(b"xxabcdef")])
    assert roundtrip(shifted) == [b"a", b"bc", b"d"]
