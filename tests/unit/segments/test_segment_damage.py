"""engine.segments.segment: damage stays where it is (issue 29, item 0). A damaged batch an
intact one follows is stepped over by scans (the view, index rebuilds) and handed to readers
as a ``Damage``; the next intact batch is found after a damaged body, a damaged length or
stored length, and a zeroed stretch; a damaged end stops a reader's view; a writer steps
over damage below its checkpoint only. Real files."""

import os

import pytest
from helpers import flip
from helpers.damage import make_batch, write_batches

from engine.errors import CorruptRecordError
from engine.format import encode_batch
from engine.format.records import HEADER_SIZE
from engine.segments.segment import Segment

BASE = 100


@pytest.fixture
def seg(tmp_path):
    s = Segment(str(tmp_path), BASE, writable=True, create=True)
    s.index_interval = 0
    yield s
    s.close()


def reader(tmp_path) -> Segment:
    r = Segment(str(tmp_path), BASE, writable=False)
    r.load(repair=False)
    return r


# the places a flipped byte of batch 1 (of 4) lands: its body, its length, its stored
# length, its base offset, a whole zeroed page
DAMAGE = {"body": (HEADER_SIZE + 5, None), "length": (8, None), "stored length": (68, None),
          "base offset": (0, None), "zeros": (0, "zeros")}


def damage(seg: Segment, rows: list, i: int, how: str) -> None:
    at, kind = DAMAGE[how]
    if kind == "zeros":
        with open(seg.path, "r+b") as f:
            f.seek(rows[i][0])
            f.write(bytes(rows[i][2]))
    else:
        flip(seg.path, rows[i][0] + at, bit=3)


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_batch_is_stepped_over_to_the_next_intact_one(seg, tmp_path, how):
    from engine.segments.damage import Damage, next_intact

    rows = write_batches(seg, 4)  # (position, base, size, next, ts)
    damage(seg, rows, 1, how)
    with pytest.raises(CorruptRecordError):  # as before without a ``damaged`` hand
        list(seg.iter_batches(0, seg.size))
    seen: list[Damage] = []
    refs = list(seg.iter_batches(0, seg.size, damaged=seen.append, expect=BASE))
    assert [r.header.base_offset for r in refs] == [rows[0][1], rows[2][1], rows[3][1]]
    (d,) = seen
    assert (d.position, d.end, d.first, d.next_offset) == (rows[1][0], rows[2][0], rows[1][1],
                                                            rows[2][1])
    assert next_intact(seg.fd, rows[1][0], seg.size, BASE, rows[1][1]) is not None
    for suffix in (".index", ".timeindex"):  # (so that the view scans the whole log)
        os.truncate(seg.path[:-4] + suffix, 0)
    r = reader(tmp_path)  # the view goes on past it (it raised before issue 29)
    assert (r.size, r.next_offset, r.tail_damage) == (seg.size, rows[3][3], None)
    assert list(r.damage) == [rows[1][0]]
    r.close()


def test_a_damaged_end_stops_a_readers_view_and_is_looked_at_again_when_the_file_changes(
        seg, tmp_path):
    rows = write_batches(seg, 3)
    flip(seg.path, rows[2][0] + HEADER_SIZE + 5)
    r = reader(tmp_path)  # (it raised before issue 29: the whole partition was down)
    assert (r.size, r.next_offset) == (rows[2][0], rows[1][3])
    d = r.tail_damage
    assert d is not None and (d.position, d.first, d.next_offset) == (rows[2][0], rows[2][1], None)
    assert r.catch_up(repair=False) == 0 and r.tail_damage == d  # (the same end: not read again)
    more = make_batch(rows[2][3], 9)
    seg.write(more, seg.size)  # an intact batch after it: the damage is local now
    assert r.catch_up(repair=False) == 1
    assert r.tail_damage is None and r.next_offset == rows[2][3] + 3
    r.close()


def test_a_writer_steps_over_damage_below_its_checkpoint_only(seg, tmp_path):
    rows = write_batches(seg, 4)
    end = seg.size
    flip(seg.path, rows[1][0] + HEADER_SIZE + 5)
    w = Segment(str(tmp_path), BASE, writable=True)
    w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert (w.size, w.next_offset) == (end, rows[3][3])  # appends go on at the end
    w.close()
    w = Segment(str(tmp_path), BASE, writable=True)
    with pytest.raises(CorruptRecordError, match="past the partition's checkpoint.*segment "
                       "recover .* --truncate-corrupt"):
        w.load(repair=True, checkpoint={"segment": BASE, "position": rows[1][0]})
    assert w.file_size() == end  # nothing cut
    w.close()


def test_a_writer_refuses_a_damaged_end_below_its_checkpoint_naming_the_repair(seg, tmp_path):
    rows = write_batches(seg, 3)
    end = seg.size
    flip(seg.path, rows[2][0] + HEADER_SIZE + 5)
    w = Segment(str(tmp_path), BASE, writable=True)
    with pytest.raises(CorruptRecordError, match="appends are refused until 'rivven segment "
                       "recover .* --truncate-corrupt' cuts it"):
        w.load(repair=True, checkpoint={"segment": BASE, "position": end})
    assert w.file_size() == end
    w.close()


def test_a_batch_inside_a_damaged_one_with_offsets_before_it_is_not_taken_for_the_next(
        seg, tmp_path):
    """A record value holding a whole earlier batch: its CRC matches, but its offsets lie
    before the damaged batch's, so the scan goes on to the real next batch."""
    from engine.segments.damage import next_intact

    rows = write_batches(seg, 1)
    inner = bytes(make_batch(BASE, 0))  # (the same offsets as the first batch)
    # a value of 8 bytes then the batch, so that it lies 8-byte aligned in the file
    outer = encode_batch([b"k"], [b"\0" * 8 + inner], 1).assign(rows[0][3])
    pos = seg.size
    seg.write(outer, pos)
    nxt = pos + len(outer)
    seg.write(make_batch(rows[0][3] + 1, 1), nxt)
    body = bytes(outer)
    at = body.find(inner)
    assert at > 0 and (pos + at) % 8 == 0  # (the trap is set)
    flip(seg.path, pos + 8)  # its length and stored length: the next batch is searched for
    flip(seg.path, pos + 68)
    found = next_intact(seg.fd, pos, os.fstat(seg.fd).st_size, BASE, rows[0][3])
    assert found is not None and found[0] == nxt
    # (without the offsets rule the batch inside is what the search finds first)
    assert next_intact(seg.fd, pos, os.fstat(seg.fd).st_size, BASE, None)[0] == pos + at
