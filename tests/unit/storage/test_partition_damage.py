"""Damage stays where it is (issue 29, item 0): one damaged batch of a partition, in its
active segment or in a sealed one, its body or its header flipped. Reads that do not touch it
work, a read that reaches it fails naming its offsets and the way past, and appends, offsets,
time lookups, retention and delete-records work; a damaged end of the log is refused to
writers only. The engine, on real files."""

import pytest
from helpers.damage import PER_BATCH, damage_batch, make_topic, pdir, values

from engine import CorruptRecordError, Engine, Record
from engine.fetch.positions import Position
from engine.segments.filenames import segment_bases


def layout(data_dir: str, where: str) -> int:
    """Topic t with batches of 50 at 0, 50, 100 (and 150); the batch at 50 is in the active
    segment, or in a sealed one (a fourth batch rolled it). Returns the log end."""
    make_topic(data_dir, 3, ts=1_000)
    if where == "active":
        return 3 * PER_BATCH
    with Engine.open(data_dir) as eng:
        eng.alter_topic_config("t", {"segment.bytes": "128"})
        eng.produce("t", [Record(key=b"k", value=b"v%d" % (150 + i), timestamp=1_003)
                          for i in range(PER_BATCH)])
    assert segment_bases(pdir(data_dir)) == [0, 150]
    return 4 * PER_BATCH


SEGMENTS = ("active", "sealed")
FLIPS = ("body", "length", "stored length")


@pytest.mark.parametrize("flip", FLIPS)
@pytest.mark.parametrize("where", SEGMENTS)
def test_reads_that_do_not_touch_a_damaged_batch_work(data_dir, where, flip):
    end = layout(data_dir, where)
    damage_batch(data_dir, 50, flip)
    with Engine.open(data_dir, read_only=True) as ro:
        assert ro.end_offsets("t") == {0: end}
        assert values(ro.read("t", 0, 10, 40)) == list(range(10, 50))  # the intact batch before
        assert values(ro.read("t", 0, 120, 10)) == list(range(120, 130))  # after it
        assert values(ro.read("t", 0, 100, 5)) == list(range(100, 105))
        with pytest.raises(CorruptRecordError) as e:
            ro.read("t", 0, 10, 100)  # reaches it
        msg = str(e.value)
        assert (e.value.first, e.value.next_offset, e.value.exit_code) == (50, 100, 3)
        for part in ("offsets 50..99 of t-0 cannot be read", "'rivven consume t -p 0 -o 100'",
                     "'rivven delete-records t -p 0 --before 100'",
                     "'rivven segment recover t --truncate-corrupt'"):
            assert part in msg, msg
        with pytest.raises(CorruptRecordError):
            ro.read("t", 0, 60, 1)  # inside it
        got = [o for b in ro.stream("t", start=Position("offset", 100)) for o in b.offsets]
        assert got == list(range(100, end))


@pytest.mark.parametrize("where", SEGMENTS)
def test_appends_delete_records_and_time_lookups_work_past_a_damaged_batch(data_dir, where):
    end = layout(data_dir, where)
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as eng:
        assert eng.produce("t", [Record(value=b"new")]) == [(0, end)]
        assert eng.read("t", 0, end)[0].value == b"new"
        assert eng.offsets.for_time("t", 0, 1_001) == 100  # (the damaged batch's time: unknown)
        eng.maintenance.delete_records("t", {0: 1})
        assert eng.offsets.start("t") == {0: 1}
        eng.maintenance.delete_records("t", {0: 100})  # past it: nothing left to reach it
        assert values(eng.read("t", 0, 100, 3)) == [100, 101, 102]
        assert eng.produce("t", [Record(value=b"more")]) == [(0, end + 1)]
    with Engine.open(data_dir) as eng:  # and after a reopen
        assert eng.end_offsets("t") == {0: end + 2}
        assert values(eng.read("t", 0, 100, 1000))[-2:] == [end, end + 1]


def test_an_idempotent_producer_appends_past_a_damaged_batch(data_dir):
    make_topic(data_dir, 3)
    damage_batch(data_dir, 50, "length")  # its header cannot be read: the producer state
    with Engine.open(data_dir) as eng:  # catches up without it
        p = eng.producer()
        assert p.produce("t", [Record(value=b"a"), Record(value=b"b")]) == [(0, 150), (0, 151)]


def test_retention_deletes_a_sealed_segment_holding_a_damaged_batch(data_dir):
    layout(data_dir, "sealed")
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as eng:
        eng.alter_topic_config("t", {"retention.ms": "1000"})
        rows = eng.maintenance.apply_retention("t")
        assert [(r["base_offset"], r["reason"]) for r in rows] == [(0, "time")]
        assert eng.offsets.start("t") == {0: 150}


def test_a_damaged_end_is_refused_to_writers_and_reached_by_reads(data_dir):
    """Its last batch damaged (below the checkpoint: no torn write): the log ends before it
    for readers, and appends are refused naming the repair; a writer still opens it and
    reads what is intact."""
    make_topic(data_dir, 3)
    damage_batch(data_dir, 100)
    for read_only in (True, False):
        with Engine.open(data_dir, read_only=read_only) as eng:
            assert eng.end_offsets("t") == {0: 100}
            assert values(eng.read("t", 0, 0, 100)) == list(range(100))
            with pytest.raises(CorruptRecordError, match="offsets from 100 of t-0 cannot be read: CRC "
                               "mismatch .* 'rivven segment recover t --truncate-corrupt'"):
                eng.read("t", 0, 100)
            with pytest.raises(CorruptRecordError):
                list(eng.stream("t"))  # a read to the end reaches it
            if not read_only:
                with pytest.raises(CorruptRecordError, match="appends are refused until "
                                   "'rivven segment recover .* --truncate-corrupt' cuts it"):
                    eng.produce("t", [Record(value=b"x")])
                with pytest.raises(CorruptRecordError, match="appends are refused"):
                    eng.maintenance.delete_records("t", {0: 1})
