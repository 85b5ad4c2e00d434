"""Compaction and a damaged batch (issue 29, item 0): a pass never rewrites a segment past a
damaged batch (it would drop the batch without a record of it) and says how to repair it; once
``segment recover --truncate-corrupt`` has cut the batch out, its offsets are a recorded gap
that compaction keeps, as it keeps the offsets it removed itself."""

import pytest
from helpers.damage import damage_batch, make_topic

from engine import CorruptRecordError, Engine, Record
from engine.tools.verify import verify

CFG = {"cleanup.policy": "compact", "segment.bytes": "1500", "min.cleanable.dirty.ratio": "0.01"}


def test_compaction_refuses_a_damaged_batch_naming_the_repair_and_keeps_its_gap_after(data_dir):
    make_topic(data_dir, 4, CFG)  # (a segment per batch of 50: 0, 50, 100, 150 active)
    damage_batch(data_dir, 50)
    with Engine.open(data_dir) as eng:
        eng.produce("t", [Record(key=b"k0", value=b"new")])
        with pytest.raises(CorruptRecordError) as e:
            eng.compact("t")
        msg = str(e.value)
        assert "compaction does not go past a damaged batch (offsets from 50)" in msg, msg
        assert "--truncate-corrupt' cuts it out first" in msg, msg
        assert [r.offset for r in eng.read("t", 0, 100, 1000)][:1] == [100]  # (nothing changed)
        eng.segments.recover(["t"], truncate_corrupt=True)
    with Engine.open(data_dir) as eng:
        (res,) = eng.compact("t")
        assert (res["records_in"], res["records_out"]) == (100, 100)  # (segments 0 and 100)
        got = [r.offset for r in eng.read("t", 0, 0, 1000)]
        assert got == [*range(50), *range(100, 201)]
    doc = verify(data_dir, [])
    assert doc["ok"], doc["findings"]
    assert [(g["first"], g["last"]) for g in doc["known_gaps"]] == [(50, 99)]
