"""engine.segments.gaps: ``.gaps``, the offsets a repair cut out (issue 29, item 0): sealed
JSON written whole, read strictly (a damaged file is DamagedMetadata naming it), merged, and
what of a hole no recorded gap explains."""

import os

import pytest

from engine.errors import DamagedMetadata
from engine.segments import gaps
from engine.segments.gaps import Gap


def test_written_and_read_back(tmp_path):
    d = str(tmp_path)
    assert gaps.read(d) == []
    want = [Gap(50, 99, 1_700_000_000_000, "CRC mismatch"), Gap(200, 200, 1, "x" * 300)]
    gaps.write(d, want)
    assert gaps.read(d) == want
    with open(gaps.path(d), "rb") as f:
        assert b'"crc32c"' in f.read()


@pytest.mark.parametrize("change", [(b'"first": 50', b'"first": 51'), (b'"version": 1', b'"version": 2'),
                                    (b'"gaps": [', b'"gaps": 7, "x": ['), (b"{", b"[")])
def test_a_damaged_file_is_refused_naming_it(tmp_path, change):
    d = str(tmp_path)
    gaps.write(d, [Gap(50, 99, 1, "r")])
    p = gaps.path(d)
    with open(p, "rb") as f:
        raw = f.read()
    assert change[0] in raw
    with open(p, "wb") as f:
        f.write(raw.replace(*change))
    with pytest.raises(DamagedMetadata, match=f"recorded gaps {p} is damaged"):
        gaps.read(d)


def test_gaps_out_of_order_are_refused_even_when_sealed(tmp_path):
    from engine.fs import durable, jsondoc

    d = str(tmp_path)
    doc = gaps.document([Gap(50, 99, 1, "r"), Gap(60, 70, 1, "r")])
    durable.write_atomic(gaps.path(d), jsondoc.seal(doc))
    with pytest.raises(DamagedMetadata, match="overlaps"):
        gaps.read(d)
    assert os.path.exists(gaps.path(d))


def test_merged_and_uncovered():
    a, b, c = Gap(50, 99, 1, "a"), Gap(100, 120, 2, "b"), Gap(300, 310, 3, "c")
    assert gaps.merged([a], [c, b]) == [Gap(50, 120, 1, "a"), c]
    assert gaps.uncovered(40, 130, [a, b]) == [(40, 49), (121, 130)]
    assert gaps.uncovered(50, 120, [a, b]) == []
    assert gaps.uncovered(0, 10, [a]) == [(0, 10)]
    assert gaps.uncovered(60, 400, [a, c]) == [(100, 299), (311, 400)]
