"""A partition's ``encryption.json`` (engine.segments.sealed_range): the ranges where every
data batch is sealed, how appends and swaps move them, the file's checks, and that a damaged
file is reported and never acted on."""

from __future__ import annotations

import json
import os

import pytest
from helpers.encryption import ENC, marker, segment_files

from engine import Engine, Record
from engine.errors import DamagedMetadata
from engine.fs import jsondoc
from engine.segments import sealed_range
from engine.segments.sealed_range import Span, after_append, without

OPEN = (Span(0, None),)


def test_appends_start_extend_and_end_ranges():
    assert after_append((), False, 5) == ()  # (plaintext where nothing is sealed)
    assert after_append((), True, 5) == (Span(5, None),)
    assert after_append((Span(5, None),), True, 9) == (Span(5, None),)
    assert after_append((Span(5, None),), False, 9) == (Span(5, 9),)  # encryption off
    assert after_append((Span(5, 9),), False, 12) == (Span(5, 9),)
    assert after_append((Span(5, 9),), True, 9) == (Span(5, None),)  # on again at once
    assert after_append((Span(5, 9),), True, 12) == (Span(5, 9), Span(12, None))
    assert after_append((Span(5, None),), False, 5) == ()  # (nothing was sealed yet)
    # a log cut below a range (segment recover): the range goes with the offsets
    assert after_append((Span(5, 9), Span(12, None)), True, 7) == (Span(5, None),)
    assert after_append((Span(5, 9), Span(12, None)), False, 3) == ()
    many: tuple[Span, ...] = ()
    for i in range(0, 400, 2):
        many = after_append(after_append(many, True, i), False, i + 1)
    assert len(many) == sealed_range.MAX_RANGES and many[-1] == Span(398, 399)


def test_a_swap_of_plaintext_batches_takes_their_offsets_out():
    assert without(OPEN, [(0, 10)]) == (Span(10, None),)
    assert without((Span(0, 100),), [(20, 30), (50, 60)]) == (
        Span(0, 20), Span(30, 50), Span(60, 100))
    assert without((Span(0, 100),), [(0, 100)]) == ()
    assert without((Span(10, 20),), [(0, 5)]) == (Span(10, 20),)


def test_the_file_round_trips_and_anything_else_is_damage(tmp_path):
    d = str(tmp_path)
    assert sealed_range.read(d) == ()
    rng = (Span(0, 7), Span(9, None))
    sealed_range.write(d, rng)
    assert sealed_range.read(d) == rng
    sealed_range.write(d, ())
    assert not os.path.exists(sealed_range.path(d))
    for bad in ([], [[5, 3]], [[0, None], [5, None]], [[4, 9], [2, None]], [[-1, None]],
                [[0, "9"]], [[0, 1.5]], [[0, 1, 2]], [[0, None]] * 2,
                [[i, i + 1] for i in range(0, 200, 2)]):
        with open(sealed_range.path(d), "wb") as f:
            f.write(jsondoc.seal({"version": 1, "ranges": bad}))
        with pytest.raises(DamagedMetadata, match="encryption.json"):
            sealed_range.read(d)
    sealed_range.write(d, rng)
    raw = bytearray(open(sealed_range.path(d), "rb").read())
    raw[raw.index(b"9")] = ord("8")  # (a flipped digit: the CRC32C catches it)
    open(sealed_range.path(d), "wb").write(bytes(raw))
    with pytest.raises(DamagedMetadata, match="checksum"):
        sealed_range.read(d)


def test_a_damaged_file_is_reported_ignored_and_rewritten_by_the_next_change(data_dir,
                                                                              keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(0))])
    pdir = os.path.dirname(segment_files(data_dir, "t")[0])
    assert sealed_range.read(pdir) == OPEN  # (the first sealed append recorded it)
    with open(sealed_range.path(pdir), "wb") as f:
        f.write(b'{"version": 1, "ranges": [[0, nul')
    with Engine.open(data_dir, keyring=keyring) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [marker(0)]
        (f,) = eng.segments.verify(["t"])["findings"]
        assert (f["kind"], f["path"]) == ("encryption", sealed_range.path(pdir))
        assert any("encryption.json" in r.get("reason", json.dumps(r)) for r in eng.repairs())
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        eng.produce("t", [Record(value=marker(1))])
        eng.alter_topic_config("t", dict(ENC))
        eng.produce("t", [Record(value=marker(2))])  # (a change of the ranges: rewritten)
        assert sealed_range.read(pdir) == (Span(2, None),)
        assert eng.segments.verify(["t"])["ok"]
