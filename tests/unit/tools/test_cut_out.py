"""``segment recover --truncate-corrupt`` cuts out only the damaged batch (issue 29, item 0):
the segment is rewritten without it and swapped in (an active one rolled first), its offsets
become a recorded gap (``.gaps``) that verify reports as known and readers step over, and
what another engine holds open follows; damage nothing intact follows is truncated as
before, a sealed segment's hole recorded too. The engine on real files."""

import os

import pytest
from helpers.damage import PER_BATCH, damage_batch, make_topic, pdir, values

from engine import CorruptRecordError, Engine, Record
from engine.segments.filenames import segment_bases
from engine.tools.verify import verify

GAPS = ".gaps"  # (engine.segments.gaps.NAME)


def recorded(data_dir: str) -> list[tuple[int, int]]:
    from engine.segments import gaps

    return [(g.first, g.last) for g in gaps.read(pdir(data_dir))]


def sealed(data_dir: str) -> None:
    """Topic t: batches 0, 50, 100 sealed in segment 0, batch 150 in the active one."""
    make_topic(data_dir, 3)
    with Engine.open(data_dir) as eng:
        eng.alter_topic_config("t", {"segment.bytes": "128"})
        eng.produce("t", [Record(key=b"k", value=b"v") for _ in range(PER_BATCH)])
    assert segment_bases(pdir(data_dir)) == [0, 150]


def recover(eng: Engine, dry_run: bool = False) -> dict:
    (row,) = [r for r in eng.segments.recover(["t"], truncate_corrupt=True, dry_run=dry_run)
              if r["cut_out"] or r["truncate_at"] is not None]
    return row


@pytest.mark.parametrize("flip", ["body", "length"])
@pytest.mark.parametrize("where", ["active", "sealed"])
def test_only_the_damaged_batch_is_cut_out_and_its_offsets_are_a_known_gap(data_dir, where,
                                                                          flip):
    if where == "active":
        make_topic(data_dir, 3)
    else:
        sealed(data_dir)
    end = 3 * PER_BATCH if where == "active" else 4 * PER_BATCH
    log, at = damage_batch(data_dir, 50, flip)
    size = os.path.getsize(log)
    with Engine.open(data_dir) as eng:
        row = recover(eng, dry_run=True)
        assert os.path.getsize(log) == size  # (a dry run)
        assert row["truncate_at"] is None and row["needs_confirmation"]
        (cut,) = row["cut_out"]
        assert (cut["position"], cut["first"], cut["last"]) == (at, 50, 99)
        assert row["recorded_gaps"][0]["first"] == 50
        assert {**recover(eng), "reindexed": False} == row
        assert os.path.getsize(log) == size - cut["bytes"]
        assert values(eng.read("t", 0, 0, 1000)) == [*range(50), *range(100, end)]
        assert values(eng.read("t", 0, 60, 1)) == [100]  # (a read inside the gap: past it)
        assert eng.produce("t", [Record(value=b"new")]) == [(0, end)]
    assert recorded(data_dir) == [(50, 99)]
    doc = verify(data_dir, ["t"])
    assert doc["ok"], doc["findings"]
    assert [(g["first"], g["last"]) for g in doc["known_gaps"]] == [(50, 99)]
    with Engine.open(data_dir) as eng:
        assert eng.end_offsets("t") == {0: end + 1}


def test_an_engine_open_during_the_repair_follows_it(data_dir):
    """The active segment is rolled, then swapped as a sealed one: a writer and a reader that
    held the partition open go on with the repaired log (a swap under a writer's active
    segment would have taken its appends)."""
    make_topic(data_dir, 3)
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as writer, Engine.open(data_dir, read_only=True) as ro:
        assert writer.produce("t", [Record(value=b"a")]) == [(0, 150)]
        assert values(ro.read("t", 0, 120, 5)) == list(range(120, 125))
        with Engine.open(data_dir) as fixer:
            recover(fixer)
        assert writer.produce("t", [Record(value=b"b")]) == [(0, 151)]
        want = [*range(50), *range(100, 152)]
        assert values(writer.read("t", 0, 0, 1000)) == want
        assert values(ro.read("t", 0, 0, 1000)) == want
    assert segment_bases(pdir(data_dir)) == [0, 151]
    assert verify(data_dir, ["t"])["ok"]


def test_a_damaged_end_of_a_sealed_segment_is_cut_and_its_hole_recorded(data_dir):
    sealed(data_dir)
    log, at = damage_batch(data_dir, 100)  # the sealed segment's last batch
    with Engine.open(data_dir) as eng:
        row = recover(eng)
        assert (row["truncate_at"], row["cut_out"], row["sealed"]) == (at, [], True)
        assert os.path.getsize(log) == at
        assert values(eng.read("t", 0, 0, 1000)) == [*range(100), *range(150, 200)]
    doc = verify(data_dir, ["t"])
    assert doc["ok"], doc["findings"]
    assert [(g["first"], g["last"]) for g in doc["known_gaps"]] == [(100, 149)]


def test_a_damaged_end_of_the_log_is_truncated_as_before(data_dir):
    make_topic(data_dir, 3)
    log, at = damage_batch(data_dir, 100)
    with Engine.open(data_dir) as eng:
        row = recover(eng)
        assert (row["truncate_at"], row["cut_out"], row["recorded_gaps"]) == (at, [], [])
        assert eng.produce("t", [Record(value=b"x")]) == [(0, 100)]  # (no gap: the end moved)
    assert verify(data_dir, ["t"])["ok"]
    assert not os.path.exists(os.path.join(pdir(data_dir), GAPS))


def test_a_damaged_gaps_file_is_reported_and_never_written_over(data_dir):
    make_topic(data_dir, 4)
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as eng:
        recover(eng)
    with open(os.path.join(pdir(data_dir), GAPS), "r+b") as f:
        f.seek(30)
        f.write(b"7")
    doc = verify(data_dir, ["t"])
    assert sorted(f["kind"] for f in doc["findings"]) == ["gap", "gaps"]  # (unexplained)
    assert any("recorded gaps" in f["message"] for f in doc["findings"])
    damage_batch(data_dir, 100)
    with Engine.open(data_dir) as eng:
        with pytest.raises(CorruptRecordError, match="recorded gaps .* is damaged"):
            eng.segments.recover(["t"], truncate_corrupt=True)
        with pytest.raises(CorruptRecordError, match="batch at offsets 100..149"):
            eng.read("t", 0, 0, 1000)  # nothing was cut
