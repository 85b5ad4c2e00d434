"""engine.segments.segment: one .log with its .index and .timeindex, on real files."""

import os
import struct

import pytest
from helpers import flip

from engine.errors import CorruptRecordError, StorageError
from engine.format import encode_batch, read_header
from engine.format.records import HEADER_SIZE
from engine.segments import filenames
from engine.segments.segment import Segment, TornTail

BASE = 100
TS0 = 1_700_000_000_000


def make_batch(base: int, i: int, n: int = 3, ts: int | None = None) -> bytearray:
    return encode_batch([b"k%d" % i] * n, [b"value-%d" % i * 8] * n,
                        TS0 + 10 * i if ts is None else ts).assign(base)


def write_batches(seg: Segment, count: int, timestamps: list[int] | None = None) -> list[tuple]:
    """Append ``count`` batches after ``seg.size``; returns (position, base, size, next, ts)."""
    out = []
    pos, off = seg.size, seg.next_offset
    for i in range(count):
        ts = timestamps[i] if timestamps else None
        buf = make_batch(off, (off - BASE) // 3, ts=ts)
        h = read_header(buf)
        seg.write(buf, pos)
        seg.appended(pos, off, len(buf), h.next_offset, h.max_timestamp)
        out.append((pos, off, len(buf), h.next_offset, h.max_timestamp))
        pos, off = pos + len(buf), h.next_offset
    return out


@pytest.fixture
def seg(tmp_path):
    s = Segment(str(tmp_path), BASE, writable=True, create=True)
    s.index_interval = 0  # an index entry before every batch but the first
    yield s
    s.close()


def test_create_makes_the_three_files(tmp_path):
    s = Segment(str(tmp_path), 42, writable=True, create=True)
    for suffix in (filenames.LOG, filenames.INDEX, filenames.TIMEINDEX):
        assert os.path.exists(filenames.path(str(tmp_path), 42, suffix))
    assert s.path.endswith("00000000000000000042.log")
    assert (s.size, s.next_offset, s.max_timestamp) == (0, 42, -1)
    s.close()


def test_a_missing_segment_is_never_created_again(tmp_path):
    with pytest.raises(FileNotFoundError):
        Segment(str(tmp_path), 7, writable=True)
    with pytest.raises(FileNotFoundError):
        Segment(str(tmp_path), 7, writable=False)
    assert os.listdir(tmp_path) == []


def test_write_appended_and_iter_batches(seg):
    rows = write_batches(seg, 5)
    assert seg.size == sum(r[2] for r in rows) == seg.file_size()
    assert seg.next_offset == BASE + 15
    assert seg.max_timestamp == TS0 + 40
    assert seg.first_batch_timestamp == TS0
    refs = list(seg.iter_batches(0, seg.size))
    assert [(r.position, r.header.base_offset) for r in refs] == [(r[0], r[1]) for r in rows]
    for ref in refs:
        assert ref.header.record_count == 3
        chunk = bytes(ref.buf[ref.start: ref.start + ref.header.size])
        assert read_header(chunk).base_offset == ref.header.base_offset
    # a sub-range starting at a batch boundary
    assert [r.header.base_offset for r in seg.iter_batches(rows[2][0], seg.size)] == [106, 109, 112]


def test_appended_indexes_as_the_interval_says(seg):
    rows = write_batches(seg, 5)
    # every batch but the first (position 0 is never indexed)
    assert list(seg.index.keys) == [r[1] - BASE for r in rows[1:]]
    assert list(seg.index.values) == [r[0] for r in rows[1:]]
    # time entries: the largest timestamp before the batch, paired with its relative offset
    assert list(seg.timeindex.keys) == [r[4] for r in rows[:-1]]
    assert list(seg.timeindex.values) == [r[1] - BASE for r in rows[1:]]


def test_a_large_index_interval_writes_no_entries(tmp_path):
    s = Segment(str(tmp_path), 0, writable=True, create=True)
    s.index_interval = 1 << 20
    write_batches(s, 5)
    assert len(s.index) == 0 and len(s.timeindex) == 0
    s.close()


def test_writev_writes_buffers_back_to_back(seg):
    a, b = make_batch(BASE, 0), make_batch(BASE + 3, 1)
    seg.writev([a, b], 0)
    refs = list(seg.iter_batches(0, seg.file_size()))
    assert [r.header.base_offset for r in refs] == [BASE, BASE + 3]


def test_a_batch_larger_than_a_read_chunk(seg):
    big = encode_batch([None], [os.urandom(300_000)], TS0).assign(BASE)  # > READ_CHUNK (256 KiB)
    small = make_batch(BASE + 1, 1)
    seg.write(big, 0)
    seg.write(small, len(big))
    refs = list(seg.iter_batches(0, seg.file_size()))
    assert [(r.position, r.header.base_offset) for r in refs] == [(0, BASE), (len(big), BASE + 1)]


# ---------------------------------------------------------------- torn tails
def append_torn(seg: Segment, nbytes: int) -> int:
    """Write the first ``nbytes`` of a next batch at the end of the file; returns its position."""
    pos = seg.file_size()
    buf = make_batch(seg.next_offset, 99)
    assert nbytes < len(buf)
    seg.write(bytes(buf[:nbytes]), pos)
    return pos


@pytest.mark.parametrize("nbytes", [5, HEADER_SIZE - 1, HEADER_SIZE + 8, 100])
def test_iter_batches_raises_torn_tail(seg, nbytes):
    write_batches(seg, 3)
    pos = append_torn(seg, nbytes)
    got = []
    with pytest.raises(TornTail) as e:
        for ref in seg.iter_batches(0, seg.file_size()):
            got.append(ref.position)
    assert e.value.position == pos
    assert len(got) == 3  # every complete batch came before the error


def test_load_with_repair_truncates_a_torn_tail(seg, tmp_path):
    rows = write_batches(seg, 4)
    end = seg.size
    append_torn(seg, 100)
    w = Segment(str(tmp_path), BASE, writable=True)
    w.index_interval = 0
    w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert w.file_size() == end
    assert (w.size, w.next_offset, w.max_timestamp) == (end, rows[-1][3], rows[-1][4])
    assert w.cuts == []  # a torn tail is not damage
    w.close()


def test_load_without_repair_stops_before_a_torn_tail(seg, tmp_path):
    rows = write_batches(seg, 4)
    end = seg.size
    append_torn(seg, 100)
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    assert (r.size, r.next_offset) == (end, rows[-1][3])
    assert r.file_size() == end + 100  # a reader never cuts
    r.close()


def test_a_zero_filled_tail_is_torn(seg, tmp_path):
    write_batches(seg, 3)
    end = seg.size
    seg.write(bytes(4096), end)  # a file system that extended the file but lost the data
    with pytest.raises(TornTail) as e:
        list(seg.iter_batches(0, seg.file_size()))
    assert e.value.position == end
    assert e.value.reason == "zero-filled tail"
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    assert r.size == end and r.file_size() == end + 4096  # a reader stops before it
    r.close()
    w = Segment(str(tmp_path), BASE, writable=True)
    w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert w.file_size() == end and w.size == end
    w.close()


def test_garbage_that_is_not_zeros_is_corruption_not_a_torn_tail(seg):
    write_batches(seg, 2)
    end = seg.size
    seg.write(b"\x01" * 200, end)
    with pytest.raises(CorruptRecordError, match=f"bad batch length .* at position {end}"):
        list(seg.iter_batches(0, seg.file_size()))


# ---------------------------------------------------------------- corruption
def test_a_crc_mismatch_raises_naming_file_and_position(seg):
    rows = write_batches(seg, 3)
    flip(seg.path, rows[1][0] + HEADER_SIZE + 5, bit=6)  # inside the second batch's body
    with pytest.raises(CorruptRecordError) as e:
        list(seg.iter_batches(0, seg.size))
    msg = str(e.value)
    assert "CRC mismatch" in msg and seg.path in msg and f"position {rows[1][0]}" in msg
    assert "offsets 103..105" in msg
    # without the CRC check the same bytes parse
    assert len(list(seg.iter_batches(0, seg.size, crc=False))) == 3


def test_load_raises_on_a_damaged_batch_before_the_checkpoint(seg, tmp_path):
    rows = write_batches(seg, 3)
    end = seg.size
    flip(seg.path, rows[2][0] + HEADER_SIZE + 1, bit=6)
    w = Segment(str(tmp_path), BASE, writable=True)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert w.file_size() == end  # durable data is never cut
    w.close()


def test_load_cuts_a_damaged_last_batch_past_the_checkpoint(seg, tmp_path):
    rows = write_batches(seg, 3)
    end = seg.size
    flip(seg.path, rows[2][0] + HEADER_SIZE + 1, bit=6)
    w = Segment(str(tmp_path), BASE, writable=True)
    w.load(repair=True, checkpoint={"segment": BASE, "position": rows[1][0]})
    assert w.file_size() == rows[2][0] == w.size
    assert w.next_offset == rows[1][3]
    assert len(w.cuts) == 1
    assert w.cuts[0]["position"] == rows[2][0] and w.cuts[0]["bytes"] == end - rows[2][0]
    w.close()


def test_load_never_cuts_a_damaged_batch_followed_by_an_intact_one(seg, tmp_path):
    rows = write_batches(seg, 3)
    end = seg.size
    flip(seg.path, rows[1][0] + HEADER_SIZE + 1, bit=6)
    w = Segment(str(tmp_path), BASE, writable=True)
    with pytest.raises(CorruptRecordError):
        w.load(repair=True, checkpoint=None)  # nothing durable, yet good data follows
    assert w.file_size() == end
    w.close()


# ---------------------------------------------------------------- indexes
def test_rebuild_indexes_matches_the_appended_ones(seg, tmp_path):
    write_batches(seg, 6, timestamps=[TS0, TS0 + 5, TS0 + 5, TS0 + 1, TS0 + 9, TS0 + 20])
    want_idx = list(zip(seg.index.keys, seg.index.values))
    want_time = list(zip(seg.timeindex.keys, seg.timeindex.values))
    end = seg.size
    seg.close()
    # index files that went missing (or were never fsynced)
    for suffix in (filenames.INDEX, filenames.TIMEINDEX):
        os.truncate(filenames.path(str(tmp_path), BASE, suffix), 0)
    w = Segment(str(tmp_path), BASE, writable=True)
    w.index_interval = 0
    assert w.rebuild_indexes(truncate_torn=False) == end
    assert list(zip(w.index.keys, w.index.values)) == want_idx
    assert list(zip(w.timeindex.keys, w.timeindex.values)) == want_time
    assert (w.size, w.next_offset, w.max_timestamp) == (end, BASE + 18, TS0 + 20)
    w.close()
    r = Segment(str(tmp_path), BASE, writable=False)  # and they are on disk
    assert list(zip(r.index.keys, r.index.values)) == want_idx
    assert list(zip(r.timeindex.keys, r.timeindex.values)) == want_time
    r.close()


def test_rebuild_indexes_truncates_a_torn_tail_only_when_asked(seg):
    write_batches(seg, 3)
    end = seg.size
    append_torn(seg, 50)
    assert seg.rebuild_indexes(truncate_torn=False) == end
    assert seg.file_size() == end + 50
    assert seg.rebuild_indexes(truncate_torn=True) == end
    assert seg.file_size() == end


def test_rebuild_indexes_with_tolerated_corruption_stops_before_a_damaged_end(seg):
    rows = write_batches(seg, 4)
    flip(seg.path, rows[3][0] + HEADER_SIZE + 1, bit=6)
    with pytest.raises(CorruptRecordError):
        seg.rebuild_indexes(truncate_torn=False)
    assert seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True) == rows[3][0]
    assert seg.next_offset == rows[2][3]
    assert list(seg.index.values) == [rows[1][0], rows[2][0]]


def test_rebuild_indexes_steps_over_a_damaged_batch_an_intact_one_follows(seg):
    """(Issue 29, item 0: was "stops before it", the batches after it lost to the view.)"""
    rows = write_batches(seg, 4)
    flip(seg.path, rows[2][0] + HEADER_SIZE + 1, bit=6)
    assert seg.rebuild_indexes(truncate_torn=False) == seg.file_size()
    assert seg.next_offset == rows[3][3]
    assert list(seg.index.values) == [rows[1][0], rows[3][0]]  # none at the damaged batch
    assert [(d.position, d.end, d.first, d.next_offset) for d in seg.damage.values()] == [
        (rows[2][0], rows[3][0], rows[2][1], rows[3][1])]


def test_load_rebuilds_indexes_that_do_not_fit_the_log(seg, tmp_path):
    write_batches(seg, 4)
    want = list(zip(seg.index.keys, seg.index.values))
    end = seg.size
    seg.close()
    # decreasing positions: not an index of this log
    with open(filenames.path(str(tmp_path), BASE, filenames.INDEX), "wb") as f:
        f.write(struct.pack("<ii", 3, 500) + struct.pack("<ii", 6, 100))
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    assert r.needs_repair and len(r.index) == 0
    assert (r.size, r.next_offset) == (end, BASE + 12)  # found by a scan instead
    r.close()
    w = Segment(str(tmp_path), BASE, writable=True)
    w.index_interval = 0
    w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert not w.needs_repair
    assert list(zip(w.index.keys, w.index.values)) == want
    w.close()


def test_position_for(seg):
    rows = write_batches(seg, 5)
    assert seg.position_for(BASE) == 0
    assert seg.position_for(BASE + 2) == 0
    assert seg.position_for(BASE + 3) == rows[1][0]
    assert seg.position_for(BASE + 5) == rows[1][0]
    assert seg.position_for(BASE + 14) == rows[4][0]
    assert seg.position_for(BASE + 1000) == rows[4][0]
    assert seg.position_for(0) == 0


def test_position_for_time(seg):
    rows = write_batches(seg, 5)  # timestamps TS0, TS0+10, ... TS0+40
    assert seg.position_for_time(0) == 0
    assert seg.position_for_time(TS0) == 0
    assert seg.position_for_time(TS0 + 10) == rows[1][0]
    # the first record at or after TS0+11 is in the third batch; all before it are <= TS0+10
    assert seg.position_for_time(TS0 + 11) == rows[2][0]
    assert seg.position_for_time(TS0 + 40) == rows[4][0]
    assert seg.position_for_time(TS0 + 10_000) == rows[4][0]
    for t in (TS0 + 11, TS0 + 25, TS0 + 40):
        for ref in seg.iter_batches(0, seg.position_for_time(t)):
            assert ref.header.max_timestamp < t


def test_position_for_forgets_an_index_of_another_log(seg):
    rows = write_batches(seg, 5)
    # entries that point at the wrong batches (a swap cut short by a crash)
    seg.index.write_all([(3, rows[2][0]), (6, rows[3][0])])
    assert seg.position_for(BASE + 7) == 0  # scan from the start instead
    assert len(seg.index) == 0 and len(seg.timeindex) == 0
    assert seg.needs_repair


def test_position_for_forgets_an_index_pointing_past_the_log(seg):
    write_batches(seg, 2)
    seg.index.write_all([(3, 10_000)])
    assert seg.position_for(BASE + 4) == 0
    assert seg.needs_repair


def test_position_for_forgets_an_index_pointing_into_a_batch(seg):
    rows = write_batches(seg, 3)
    seg.index.write_all([(3, rows[1][0] + 8)])
    assert seg.position_for(BASE + 4) == 0
    assert seg.needs_repair


# ---------------------------------------------------------------- other openers
def test_catch_up_sees_batches_another_segment_object_appended(seg, tmp_path):
    write_batches(seg, 2)
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    assert r.next_offset == BASE + 6
    rows = write_batches(seg, 3)
    assert r.catch_up(repair=False) == 3
    assert (r.size, r.next_offset, r.max_timestamp) == (seg.size, seg.next_offset, seg.max_timestamp)
    # the writer's new index entries were read too
    assert list(r.index.keys) == list(seg.index.keys)
    assert r.position_for(rows[2][1]) == rows[2][0]
    assert r.catch_up(repair=False) == 0
    r.close()


def test_catch_up_stops_before_a_write_in_flight(seg, tmp_path):
    write_batches(seg, 2)
    end = seg.size
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    pos = append_torn(seg, 80)
    assert r.catch_up(repair=False) == 0
    assert r.size == end and r.file_size() == end + 80
    # the write completes: now it counts
    buf = make_batch(seg.next_offset, 99)
    seg.write(buf, pos)
    assert r.catch_up(repair=False) == 1
    assert r.size == end + len(buf)
    r.close()


def test_catch_up_with_repair_follows_a_cut_made_elsewhere(seg, tmp_path):
    rows = write_batches(seg, 3)
    r = Segment(str(tmp_path), BASE, writable=True)
    r.load(repair=False)
    assert r.size == seg.size
    seg.truncate(rows[2][0])
    assert r.catch_up(repair=True) == 0
    assert r.size == rows[2][0]
    r.close()


def test_sync_all_and_reopen(seg, tmp_path):
    write_batches(seg, 3)
    seg.sync_all()
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    assert (r.size, r.next_offset) == (seg.size, seg.next_offset)
    assert list(r.timeindex.keys) == list(seg.timeindex.keys)
    r.close()


def test_sync_all_of_a_reader_without_index_files(seg, tmp_path):
    write_batches(seg, 2)
    for suffix in (filenames.INDEX, filenames.TIMEINDEX):
        os.unlink(filenames.path(str(tmp_path), BASE, suffix))
    r = Segment(str(tmp_path), BASE, writable=False)
    assert r.index.fd == -1 and r.timeindex.fd == -1
    r.sync_all()  # the missing indexes are skipped, not an error
    r.load(repair=False)
    assert r.next_offset == BASE + 6
    r.close()


def test_write_errors_become_storage_errors_naming_the_file(tmp_path):
    Segment(str(tmp_path), 0, writable=True, create=True).close()
    r = Segment(str(tmp_path), 0, writable=False)
    with pytest.raises(StorageError, match="cannot write"):
        r.write(b"x" * 8, 0)  # a read-only descriptor
    with pytest.raises(StorageError, match=f"cannot write {r.path}"):
        r.writev([b"x" * 8], 0)
    r.close()


def test_truncate_cuts_log_and_indexes(seg):
    rows = write_batches(seg, 5)
    seg.truncate(rows[3][0])
    assert seg.file_size() == rows[3][0] == seg.size
    # entries for the batches at rows[1] and rows[2] survive; those at or past the cut do not
    assert list(seg.index.values) == [rows[1][0], rows[2][0]]
    assert list(seg.timeindex.values) == [3, 6]
    assert os.path.getsize(seg.index.path) == 16
    assert os.path.getsize(seg.timeindex.path) == 24
    assert [r.header.base_offset for r in seg.iter_batches(0, seg.size)] == [100, 103, 106]


def test_truncate_to_zero(seg):
    write_batches(seg, 3)
    seg.truncate(0)
    assert seg.file_size() == 0 and seg.size == 0
    assert len(seg.index) == 0 and len(seg.timeindex) == 0


def test_load_of_an_empty_segment(tmp_path):
    Segment(str(tmp_path), 5, writable=True, create=True).close()
    r = Segment(str(tmp_path), 5, writable=False)
    r.load(repair=False)
    assert (r.size, r.next_offset, r.max_timestamp, r.first_batch_timestamp) == (0, 5, -1, None)
    assert r.loaded
    r.close()


def test_load_with_a_checkpoint_drops_index_entries_past_it(seg, tmp_path):
    rows = write_batches(seg, 5)
    seg.close()
    w = Segment(str(tmp_path), BASE, writable=True)
    w.index_interval = 0
    # only the first three batches are known durable; the rest are still intact on disk
    w.load(repair=True, checkpoint={"segment": BASE, "position": rows[3][0]})
    assert (w.size, w.next_offset) == (rows[4][0] + rows[4][2], rows[4][3])
    # the entries past the checkpoint were rebuilt by the scan, the same as before
    assert list(w.index.values) == [r[0] for r in rows[1:]]
    w.close()
