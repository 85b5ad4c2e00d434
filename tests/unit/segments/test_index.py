"""engine.segments.index: the sparse offset and time indexes of a segment (real files only)."""

import os
import struct

import pytest

from engine.segments.index import OffsetIndex, TimeIndex


@pytest.fixture
def ipath(tmp_path):
    return str(tmp_path / "00000000000000000000.index")


@pytest.fixture
def tpath(tmp_path):
    return str(tmp_path / "00000000000000000000.timeindex")


def entries(idx):
    return list(zip(idx.keys, idx.values))


def test_entry_widths():
    assert OffsetIndex.ENTRY.size == 8
    assert TimeIndex.ENTRY.size == 12


def test_writable_open_creates_the_file(ipath):
    idx = OffsetIndex(ipath, writable=True)
    assert os.path.exists(ipath)
    assert os.path.getsize(ipath) == 0
    assert len(idx) == 0
    idx.close()


def test_append_writes_little_endian_entries(ipath):
    idx = OffsetIndex(ipath, writable=True)
    idx.append(3, 176)
    idx.append(6, 352)
    assert len(idx) == 2
    assert entries(idx) == [(3, 176), (6, 352)]
    with open(ipath, "rb") as f:
        assert f.read() == struct.pack("<ii", 3, 176) + struct.pack("<ii", 6, 352)
    idx.close()


def test_time_index_entries_hold_int64_timestamps(tpath):
    big = 1 << 42  # a ms timestamp that does not fit in 32 bits
    idx = TimeIndex(tpath, writable=True)
    idx.append(big, 3)
    idx.append(big + 10, 9)
    idx.close()
    with open(tpath, "rb") as f:
        assert f.read() == struct.pack("<qi", big, 3) + struct.pack("<qi", big + 10, 9)
    again = TimeIndex(tpath, writable=False)
    assert entries(again) == [(big, 3), (big + 10, 9)]
    again.close()


@pytest.mark.parametrize("key", [5, 4, -1])
def test_append_ignores_a_key_not_above_the_last(ipath, key):
    idx = OffsetIndex(ipath, writable=True)
    idx.append(5, 100)
    idx.append(key, 200)
    assert entries(idx) == [(5, 100)]
    assert os.path.getsize(ipath) == 8  # nothing written either
    idx.close()


def test_floor_and_lower(ipath):
    idx = OffsetIndex(ipath, writable=True)
    for k, v in [(10, 1), (20, 2), (30, 3)]:
        idx.append(k, v)
    # floor: last entry with key <= x
    assert idx.floor(9) == -1
    assert idx.floor(10) == 0
    assert idx.floor(19) == 0
    assert idx.floor(20) == 1
    assert idx.floor(1000) == 2
    # lower: last entry with key < x
    assert idx.lower(10) == -1
    assert idx.lower(11) == 0
    assert idx.lower(20) == 0
    assert idx.lower(21) == 1
    assert idx.lower(1000) == 2
    idx.close()


def test_floor_and_lower_on_an_empty_index(ipath):
    idx = OffsetIndex(ipath, writable=True)
    assert idx.floor(0) == -1
    assert idx.lower(1 << 40) == -1
    idx.close()


def test_reopen_reads_what_was_written(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in range(1, 6):
        w.append(k, k * 100)
    w.close()
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(k, k * 100) for k in range(1, 6)]
    assert r.loaded == 5 * 8
    r.close()


def test_refresh_picks_up_entries_appended_by_another_opener(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 100)
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(1, 100)]
    w.append(2, 200)
    w.append(3, 300)
    assert len(r) == 1  # not until it looks
    r.refresh()
    assert entries(r) == [(1, 100), (2, 200), (3, 300)]
    r.refresh()  # nothing new: nothing added twice
    assert len(r) == 3
    w.close()
    r.close()


def test_refresh_starts_over_when_the_file_shrank(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in (1, 2, 3):
        w.append(k, k * 10)
    r = OffsetIndex(ipath, writable=False)
    assert len(r) == 3
    w.truncate_entries(1)
    w.append(7, 70)
    r.refresh()
    assert entries(r) == [(1, 10), (7, 70)]
    w.close()
    r.close()


def test_reload_rereads_the_whole_file(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 10)
    r = OffsetIndex(ipath, writable=False)
    # another opener rewrites the file in place, same size: refresh cannot tell, reload can
    w.write_all([(5, 50)])
    r.refresh()
    assert entries(r) == [(1, 10)]
    r.reload()
    assert entries(r) == [(5, 50)]
    w.close()
    r.close()


def test_a_torn_trailing_entry_is_ignored(ipath):
    with open(ipath, "wb") as f:
        f.write(struct.pack("<ii", 1, 100) + struct.pack("<ii", 2, 200) + b"\x03\x00\x00")
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(1, 100), (2, 200)]
    assert r.loaded == 16
    # the rest of the entry arrives: the next refresh reads it whole
    with open(ipath, "ab") as f:
        f.write(b"\x00" + struct.pack("<i", 300))
    r.refresh()
    assert entries(r) == [(1, 100), (2, 200), (3, 300)]
    r.close()


def test_a_torn_time_index_entry_is_ignored(tpath):
    with open(tpath, "wb") as f:
        f.write(struct.pack("<qi", 1000, 3) + struct.pack("<qi", 2000, 6)[:11])
    r = TimeIndex(tpath, writable=False)
    assert entries(r) == [(1000, 3)]
    r.close()


def test_a_writer_overwrites_a_torn_trailing_entry(ipath):
    with open(ipath, "wb") as f:
        f.write(struct.pack("<ii", 1, 100) + b"\xff\xff\xff")
    w = OffsetIndex(ipath, writable=True)
    assert entries(w) == [(1, 100)]
    w.append(2, 200)
    w.close()
    with open(ipath, "rb") as f:
        assert f.read() == struct.pack("<ii", 1, 100) + struct.pack("<ii", 2, 200)


def test_truncate_entries_cuts_memory_and_file(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in range(1, 6):
        w.append(k, k * 10)
    w.truncate_entries(2)
    assert entries(w) == [(1, 10), (2, 20)]
    assert os.path.getsize(ipath) == 16
    w.append(9, 90)  # appends go after the kept entries
    w.close()
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(1, 10), (2, 20), (9, 90)]
    r.close()


def test_truncate_entries_to_zero(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 10)
    w.truncate_entries(0)
    assert len(w) == 0
    assert os.path.getsize(ipath) == 0
    w.close()


def test_truncate_entries_drops_a_torn_tail_from_the_file(ipath):
    with open(ipath, "wb") as f:
        f.write(struct.pack("<ii", 1, 100) + struct.pack("<ii", 2, 200) + b"\x01\x02")
    w = OffsetIndex(ipath, writable=True)
    w.truncate_entries(1)
    assert os.path.getsize(ipath) == 8
    w.close()


def test_truncate_entries_on_a_reader_leaves_the_file_alone(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in (1, 2, 3):
        w.append(k, k)
    r = OffsetIndex(ipath, writable=False)
    r.truncate_entries(1)
    assert entries(r) == [(1, 1)]
    assert os.path.getsize(ipath) == 24
    w.close()
    r.close()


def test_truncate_entries_keeping_all_is_a_no_op(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in (1, 2, 3):
        w.append(k, k)
    w.truncate_entries(3)
    assert len(w) == 3
    assert os.path.getsize(ipath) == 24
    w.close()


def test_truncate_entries_past_the_end_keeps_the_file(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 10)
    w.append(2, 20)
    w.truncate_entries(5)  # "keep only the first 5": there are only 2
    assert os.path.getsize(ipath) == 16
    w.append(3, 30)
    w.close()
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(1, 10), (2, 20), (3, 30)]
    r.close()


def test_write_all_replaces_the_file(ipath):
    w = OffsetIndex(ipath, writable=True)
    for k in range(1, 10):
        w.append(k, k * 8)
    w.write_all([(4, 40), (8, 80)])
    assert entries(w) == [(4, 40), (8, 80)]
    assert w.loaded == 16
    assert os.path.getsize(ipath) == 16  # the longer old file is gone, not overwritten in part
    w.append(12, 120)
    w.close()
    r = OffsetIndex(ipath, writable=False)
    assert entries(r) == [(4, 40), (8, 80), (12, 120)]
    r.close()


def test_write_all_empty(tpath):
    w = TimeIndex(tpath, writable=True)
    w.append(100, 1)
    w.write_all([])
    assert len(w) == 0
    assert os.path.getsize(tpath) == 0
    w.close()


def test_forget_drops_memory_only(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 10)
    w.append(2, 20)
    w.forget()
    assert len(w) == 0
    assert w.floor(100) == -1
    assert os.path.getsize(ipath) == 16
    w.reload()
    assert entries(w) == [(1, 10), (2, 20)]
    w.close()


def test_read_only_open_of_a_missing_file(tmp_path):
    p = str(tmp_path / "missing.index")
    r = OffsetIndex(p, writable=False)
    assert r.fd == -1
    assert len(r) == 0
    assert r.floor(10) == -1 and r.lower(10) == -1
    r.refresh()  # nothing to read, no error
    r.reload()
    r.sync()
    r.close()
    assert not os.path.exists(p)  # a reader never creates it


def test_close_is_idempotent(ipath):
    w = OffsetIndex(ipath, writable=True)
    w.append(1, 1)
    w.sync()
    w.close()
    assert w.fd == -1
    w.close()
