"""What encryption at rest reports as damage (exit 3), on every read path and in ``segment
verify``: a batch whose header names a data key version the catalog does not hold, and a
plaintext batch where the partition records that every batch is sealed."""

from __future__ import annotations

import os
import struct

import pytest
from helpers.encryption import (
    ENC,
    batches_of,
    forge_plaintext,
    marker,
    reseal_crc,
    segment_files,
)

from engine import Engine, Record
from engine.errors import CorruptRecordError
from engine.format.encode import encode_batch

KEY_VERSION_AT = 22  # the header's data key version (uint16, docs/FORMAT.md)


def set_version(version: int):
    def edit(buf: bytearray) -> None:
        struct.pack_into("<H", buf, KEY_VERSION_AT, version)
    return edit


# ---------------------------------------------------------------- unknown key versions
def test_a_batch_naming_a_key_version_the_catalog_lacks_is_damage(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        for i in range(3):
            eng.produce("t", [Record(value=marker(i))])
    path = segment_files(data_dir, "t")[0]
    (p0, _), (p1, _), (p2, _) = batches_of(path)
    reseal_crc(path, p1, set_version(7))
    reseal_crc(path, p2, set_version(9))
    with Engine.open(data_dir, keyring=keyring) as eng:
        assert eng.read("t", 0, 0, 1)[0].value == marker(0)  # the batch before it
        with pytest.raises(CorruptRecordError) as e:
            eng.read("t", 0, 1, 1)
        assert e.value.exit_code == 3
        msg = str(e.value)
        assert "offsets 1..1" in msg and f"{path} at position {p1}" in msg
        assert "data key version 7" in msg and "topics.json" in msg
        # verify lists both and goes on to the end
        found = eng.segments.verify(["t"], decrypt=True)["findings"]
        assert [(f["kind"], f["position"]) for f in found] == [("body", p1), ("body", p2)]
        assert "data key version 9" in found[1]["message"]


# ---------------------------------------------------------------- plaintext where sealed
def sealed_topic(data_dir: str, keyring: str, n: int = 3, **cfg: str) -> str:
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, {**ENC, **cfg})
        for i in range(n):
            eng.produce("t", [Record(value=marker(i))])
    return segment_files(data_dir, "t")[-1]


def test_a_forged_plaintext_batch_in_an_encrypted_topic_is_damage(data_dir, keyring):
    path = sealed_topic(data_dir, keyring)
    (_, _), (_, _), (p2, h2) = batches_of(path)
    forge_plaintext(path, p2, h2.base_offset, h2.size)
    with Engine.open(data_dir, keyring=keyring) as eng:
        assert [r.value for r in eng.read("t", 0, 0, 2)] == [marker(0), marker(1)]
        for read in (lambda: eng.read("t", 0, 2, 1), lambda: eng.read("t", 0, 0, 10),
                     lambda: eng.read_arrow("t", 0, 0)):
            with pytest.raises(CorruptRecordError) as e:
                read()
            assert e.value.exit_code == 3
            assert "offsets 2..2" in str(e.value) and "plaintext" in str(e.value)
            assert f"{path} at position {p2}" in str(e.value)
        for decrypt in (False, True):
            doc = eng.segments.verify(["t"], decrypt=decrypt)
            assert not doc["ok"]
            assert [(f["kind"], f["position"], f["offsets"]) for f in doc["findings"]] == [
                ("plaintext", p2, [2, 2])]


def test_plaintext_before_encryption_was_turned_on_still_reads_and_reencrypt_claims_all(
        data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=marker(0))])
        eng.alter_topic_config("t", dict(ENC))
        eng.produce("t", [Record(value=marker(1))])
        assert [r.value for r in eng.read("t", 0, 0, 5)] == [marker(0), marker(1)]
        assert eng.segments.verify(["t"], decrypt=True)["ok"]
        assert eng.keys.status("t")[0]["sealed_ranges"] == [[[1, None]]]
        out = eng.keys.reencrypt("t")
        assert out["partitions"][0]["sealed_from"] == 0
        assert eng.keys.status("t")[0]["sealed_ranges"] == [[[0, None]]]
        assert [r.value for r in eng.read("t", 0, 0, 5)] == [marker(0), marker(1)]
    path = segment_files(data_dir, "t")[0]  # (offset 0, plaintext once: sealed now)
    (p0, h0) = batches_of(path)[0]
    assert h0.is_encrypted and h0.base_offset == 0
    forge_plaintext(path, p0, 0, h0.size)
    with Engine.open(data_dir, keyring=keyring) as eng:
        with pytest.raises(CorruptRecordError, match="plaintext"):
            eng.read("t", 0, 0, 1)


def test_encryption_off_then_plaintext_appends_read_and_reencrypt_clears_the_claim(
        data_dir, keyring):
    path = sealed_topic(data_dir, keyring, n=2)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        eng.produce("t", [Record(value=marker(2))])
        assert [r.value for r in eng.read("t", 0, 0, 5)] == [marker(i) for i in range(3)]
        assert eng.segments.verify(["t"], decrypt=True)["ok"]
        # a forged batch at a sealed offset is still caught
    (p0, h0), (p1, h1), (p2, h2) = batches_of(path)
    forge_plaintext(path, p1, 1, h1.size)
    with Engine.open(data_dir, keyring=keyring) as eng:
        with pytest.raises(CorruptRecordError, match="plaintext"):
            eng.read("t", 0, 1, 1)
        assert [r.value for r in eng.read("t", 0, 2, 1)] == [marker(2)]  # past the claim
        (f,) = eng.segments.verify(["t"])["findings"]
        assert (f["kind"], f["offsets"]) == ("plaintext", [1, 1])
        # back to plaintext: the forged batch is refused, nothing rewritten
        with pytest.raises(CorruptRecordError, match="plaintext"):
            eng.keys.reencrypt("t")
    forge_plaintext(path, p1, 1, h1.size)  # (gone: a clean log again, batch 1 plaintext)
    with open(path, "r+b") as f:
        f.truncate(p1)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.produce("t", [Record(value=marker(5))])
        out = eng.keys.reencrypt("t")
        assert out["partitions"][0]["sealed_from"] is None
        assert not os.path.exists(os.path.join(os.path.dirname(path), "encryption.json"))
        assert [r.value for r in eng.read("t", 0, 0, 10)][0] == marker(0)


def test_a_writer_that_turns_encryption_off_in_another_process_is_never_refused(
        data_dir, keyring):
    """A process whose configs are stale seals; another turned encryption off and appends
    plaintext: each append moves the record first, so a reader accepts both, and the
    offsets sealed before stay claimed."""
    path = sealed_topic(data_dir, keyring, n=1)
    a = Engine.open(data_dir, keyring=keyring)
    b = Engine.open(data_dir, keyring=keyring)
    try:
        a.produce("t", [Record(value=marker(1))])
        b.alter_topic_config("t", {"encryption.enable": "false"})
        b.produce("t", [Record(value=marker(2))])
        a.produce("t", [Record(value=marker(3))])  # (its catalog view may lag)
        b.produce("t", [Record(value=marker(4))])
        with Engine.open(data_dir, keyring=keyring) as c:
            assert [r.value for r in c.read("t", 0, 0, 10)] == [marker(i) for i in range(5)]
            assert c.segments.verify(["t"], decrypt=True)["ok"]
    finally:
        a.close()
        b.close()
    (p0, h0) = batches_of(path)[0]
    forge_plaintext(path, p0, 0, h0.size)
    with Engine.open(data_dir, keyring=keyring) as c:
        with pytest.raises(CorruptRecordError, match="plaintext"):
            c.read("t", 0, 0, 1)
        assert [r.value for r in c.read("t", 0, 2, 10)] == [marker(i) for i in range(2, 5)]


def test_maintenance_never_turns_a_forged_plaintext_batch_into_a_sealed_one(data_dir, keyring):
    """Re-encryption and compaction read every batch they keep: a forged plaintext one stops
    them (nothing swapped) instead of being sealed, or copied, as if rivven wrote it."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, {**ENC, "cleanup.policy": "compact", "segment.bytes": "1024"})
        for i in range(30):
            eng.produce("t", [Record(key=b"k%d" % (i % 3), value=marker(i))])
    path = segment_files(data_dir, "t")[0]
    pos, h = batches_of(path)[1]
    forge_plaintext(path, pos, h.base_offset, h.size)
    before = open(path, "rb").read()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.keys.rotate("t")
        with pytest.raises(CorruptRecordError, match="plaintext"):
            eng.keys.reencrypt("t")
        with pytest.raises(CorruptRecordError, match="plaintext"):
            eng.maintenance.compact("t", force=True)
    assert open(path, "rb").read() == before


def test_a_reader_looks_at_the_ranges_again_before_refusing_a_plaintext_batch():
    """A read takes the ranges once, as it starts; a writer that turns encryption off narrows
    them before it appends plaintext, so a batch the read's ranges claim is refused only if
    the ranges as they are now still claim it."""
    from engine.crypto.topic import PlaintextBatch, SealedOpener
    from engine.format.records import read_header
    from engine.segments.sealed_range import Span

    h = read_header(bytes(encode_batch([None], [b"x"], 0).assign(5)))
    now = [(Span(0, None),)]
    opener = SealedOpener(lambda *a: b"", "t-0", (Span(0, None),), lambda: now[0])
    with pytest.raises(PlaintextBatch, match="offsets 5..5"):
        opener.plain(h)
    now[0] = (Span(0, 5),)  # (the writer, meanwhile: encryption off, plaintext from 5)
    opener.plain(h)
    with pytest.raises(PlaintextBatch):
        SealedOpener(lambda *a: b"", "t-0", (Span(0, None),), None).plain(h)


def test_verify_looks_at_the_ranges_again_before_reporting_a_plaintext_batch(
        data_dir, keyring, monkeypatch):
    """``segment verify`` on a live partition: the ranges it read as it started may still
    claim a plaintext batch a writer appended after narrowing them; it is reported only if
    the file as it is now claims it too."""
    from engine.segments.sealed_range import Span
    from engine.tools import verify

    sealed_topic(data_dir, keyring, n=1)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        eng.produce("t", [Record(value=marker(1))])  # (the ranges: [0, 1) now)
        real = verify._sealed_range
        seen: list[int] = []

        def stale_first(directory: str):  # (as read before the writer narrowed it)
            seen.append(1)
            return ((Span(0, None),), None) if len(seen) == 1 else real(directory)

        monkeypatch.setattr(verify, "_sealed_range", stale_first)
        assert eng.segments.verify(["t"])["ok"] and len(seen) == 2


def test_segment_recover_cuts_a_forged_plaintext_batch_as_damage(data_dir, keyring):
    path = sealed_topic(data_dir, keyring)
    (_, _), (_, _), (p2, h2) = batches_of(path)
    forge_plaintext(path, p2, h2.base_offset, h2.size)
    with Engine.open(data_dir, keyring=keyring) as eng:
        size = os.path.getsize(path)
        eng.segments.recover([path], truncate_corrupt=True, dry_run=True)
        assert os.path.getsize(path) == size  # (a dry run: nothing cut)
        eng.segments.recover([path], truncate_corrupt=True)
        assert eng.segments.verify(["t"], decrypt=True)["ok"]
        assert [r.value for r in eng.read("t", 0, 0, 10)] == [marker(0), marker(1)]
        eng.produce("t", [Record(value=marker(3))])  # (sealed, in the range: reads)
        assert [r.value for r in eng.read("t", 0, 0, 10)][-1] == marker(3)


def test_compaction_with_encryption_off_takes_the_offsets_it_rewrites_as_text_out_first(
        data_dir, keyring):
    """Compaction re-encodes the batches it keeps in part: with encryption turned off, as
    plaintext. The swap takes their offsets out of the sealed ranges before it installs them,
    so nothing rivven wrote is refused, and the sealed batches it copied stay claimed."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, {**ENC, "cleanup.policy": "compact", "segment.bytes": "1024"})
        for i in range(30):  # (a key of its own and a shared one: batches kept in part)
            eng.produce("t", [Record(key=b"u%d" % i, value=marker(i)),
                              Record(key=b"k", value=marker(100 + i))])
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        before = eng.keys.status("t")[0]["sealed_ranges"]
        eng.maintenance.compact("t", force=True)
        after = eng.keys.status("t")[0]["sealed_ranges"]
        values = [r.value for r in eng.read("t", 0, 0, 100)]
        assert set(values) >= {marker(i) for i in range(30)} | {marker(129)}
        assert len(values) < 60  # (the active segment's are left as they are)
        assert eng.segments.verify(["t"], decrypt=True)["ok"]
    assert before == [[[0, None]]] and after != before, after


def test_reencrypt_stops_at_a_damaged_batch_naming_its_offsets_and_the_repair(data_dir, keyring):
    """(Issue 29, item 0.) Re-encryption rewrites whole segments: it does not go past a damaged
    batch (nor drop it unrecorded), and says which offsets and how to cut it out."""
    from helpers.damage import damage_batch, make_topic

    from engine.segments.damage import DamagedRange

    make_topic(data_dir, 3)
    log, _ = damage_batch(data_dir, 50)
    before = open(log, "rb").read()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.alter_topic_config("t", set={"encryption.enable": "true", "encryption.key.id": "k1"})
        with pytest.raises(DamagedRange) as e:
            eng.keys.reencrypt("t")
    assert "offsets 50..99" in str(e.value) and "--truncate-corrupt" in str(e.value)
    assert open(log, "rb").read() == before
