"""Encryption at rest through the engine (docs/ENCRYPTION.md): no plaintext of a value in any
file the engine writes (segments, WAL, cold store, compaction and tiering output, offsets),
the same records as an unencrypted copy on every read path, rotation, rewrap, re-encryption,
tamper and relocation caught, and a writer that never seals with a version dropped under it.
"""

from __future__ import annotations

import base64
import os
import struct

import pyarrow as pa
import pytest
from helpers import new_key, write_keyring
from helpers.encryption import ENC, batches_of, marker, plaintext_in, reseal_crc, rows, segment_files

from engine import Engine, Record
from engine.errors import CorruptRecordError, InvalidConfig, KeyUnavailable, WrongKey
from engine.fetch.positions import Position
from engine.format.records import HEADER_SIZE


# ---------------------------------------------------------------- no plaintext anywhere
def test_no_value_is_in_any_file_the_engine_writes(data_dir, keyring):
    eng = Engine.open(data_dir, keyring=keyring)
    eng.create_topic("c", 2, {**ENC, "cleanup.policy": "compact", "segment.bytes": "2048"})
    eng.create_topic("t", 1, {**ENC, "segment.bytes": "2048", "remote.storage.enable": "true",
                              "local.retention.bytes": "4096"})
    eng.create_topic("z", 1, {**ENC, "compression.type": "zstd"})
    needles = [marker(i) for i in range(300)]
    for i, m in enumerate(needles):
        eng.produce("c", [Record(key=b"key%d" % (i % 17), value=m,
                                 headers=[("h", marker(i, b"HDR"))])])
        eng.produce("t", [Record(key=marker(i, b"KEY"), value=m)])
    eng.produce_batch("z", needles)
    tp = eng.producer(transactional_id="tx")
    tp.begin()
    tp.produce("c", [Record(key=b"key1", value=marker(1, b"TXN"))])
    tp.commit()
    c = eng.consumer("g", "c", enable_auto_commit=False)
    c.commit({("c", 0): 3}, metadata=marker(0, b"META").decode())
    c.close()
    everything = needles + [marker(i, b"HDR") for i in range(300)] + \
        [marker(i, b"KEY") for i in range(300)] + [marker(1, b"TXN"), marker(0, b"META")]
    # the WAL holds them before any checkpoint: the very same sealed bytes
    assert os.listdir(os.path.join(data_dir, "wal"))
    assert plaintext_in([data_dir], everything) == []
    eng.maintenance.compact("c", force=True)
    out = eng.maintenance.tier("t")
    assert sum(len(p["uploaded"]) for p in out["partitions"]) > 0
    assert os.listdir(os.path.join(data_dir, "cold"))
    assert plaintext_in([data_dir], everything) == []
    assert {r[4] for r in rows(eng, "t")} == set(needles)  # cold segments included
    eng.close()
    assert plaintext_in([data_dir], everything) == []


def test_the_same_data_unencrypted_is_found_by_the_same_search(data_dir, keyring):
    """The search above can fail: a plain topic's values are found."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("p", 1)
        eng.produce("p", [Record(value=marker(7))])
        assert plaintext_in([data_dir], [marker(7)]) != []


# ---------------------------------------------------------------- same records
def fill(eng: Engine, topic: str) -> None:
    eng.produce(topic, [Record(key=None if i % 7 == 0 else b"k%d" % i,
                               value=None if i % 11 == 0 else marker(i),
                               headers=[("a", b"1"), ("b", None)] if i % 3 == 0 else (),
                               timestamp=1_700_000_000_000 + i) for i in range(100)])
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        eng.produce(topic, [Record(key=b"c", value=marker(i), timestamp=1_700_000_001_000 + i)
                            for i in range(50)], compression=codec, partition=1)
    eng.produce_batch(topic, [marker(i) for i in range(2000)], partition=0,
                      timestamps=1_700_000_002_000)


def columns(eng: Engine, topic: str, p: int) -> list[list]:
    return [[list(c) for c in cols] for cols in eng.read_columns(topic, p, 0, 10_000)]


@pytest.mark.parametrize("cipher", ["aes-256-gcm", "chacha20-poly1305"])
def test_every_read_path_gives_what_an_unencrypted_copy_gives(data_dir, keyring, cipher):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("enc", 2, {**ENC, "encryption.cipher": cipher, "segment.bytes": "8192"})
        eng.create_topic("plain", 2, {"segment.bytes": "8192"})
        fill(eng, "enc")
        fill(eng, "plain")
        assert rows(eng, "enc") == rows(eng, "plain")
        for p in (0, 1):
            a = eng.read_arrow("enc", p, 0)
            b = eng.read_arrow("plain", p, 0)
            assert a.num_rows > 0 and a.equals(b)
            assert columns(eng, "enc", p) == columns(eng, "plain", p)
            assert eng.offset_for_time("enc", p, 1_700_000_000_050) == \
                eng.offset_for_time("plain", p, 1_700_000_000_050)
        sa = [(b.partition, list(b.offsets), list(b.values)) for b in eng.stream("enc")]
        sb = [(b.partition, list(b.offsets), list(b.values)) for b in eng.stream("plain")]
        assert sa == sb
        got = {}
        for t in ("enc", "plain"):
            c = eng.consumer("g-" + t, t, enable_auto_commit=False)
            recs = []
            while True:
                batch = c.poll(timeout_ms=50)
                if not batch:
                    break
                recs += [(r.partition, r.offset, r.value) for r in batch]
            c.close()
            got[t] = sorted(recs)
        assert got["enc"] == got["plain"] and len(got["enc"]) == 2300
        st = eng.keys.status("enc")[0]
        assert st["plaintext"]["bytes"] == 0 and st["keys"][0]["cipher"] == cipher


def test_transactions_and_idempotence_on_an_encrypted_topic(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        for t, cfg in (("enc", ENC), ("plain", {})):
            eng.create_topic(t, 1, cfg)
            tp = eng.producer(transactional_id="tx-" + t)
            tp.begin()
            tp.produce(t, [Record(value=marker(1))])
            tp.commit()
            tp.begin()
            tp.produce(t, [Record(value=marker(2))])
            tp.abort()
            p = eng.producer()
            first = p.produce(t, [Record(value=marker(3))])
            assert p.retry_last() == first  # a duplicate: nothing written twice
        for level in ("read_committed", "read_uncommitted"):
            assert [r[:2] + r[3:] for r in rows(eng, "enc", isolation_level=level)] == \
                [r[:2] + r[3:] for r in rows(eng, "plain", isolation_level=level)]
        assert [r[4] for r in rows(eng, "enc", isolation_level="read_committed")] == \
            [marker(1), marker(3)]


# ---------------------------------------------------------------- keys over time
def test_rotate_rewrap_remove_the_old_master_key_then_reencrypt_drops_old_keys(
        data_dir, keyring, keys):
    eng = Engine.open(data_dir, keyring=keyring)
    eng.create_topic("t", 2, {**ENC, "segment.bytes": "4096"})
    for i in range(200):
        eng.produce("t", [Record(key=b"k", value=marker(i))], partition=i % 2)
    assert eng.keys.rotate("t") == {"topic": "t", "version": 2, "cipher": "aes-256-gcm",
                                   "master_key_id": "k1", "previous_version": 1}
    for i in range(200, 300):
        eng.produce("t", [Record(key=b"k", value=marker(i))], partition=i % 2)
    before = rows(eng, "t")
    st = eng.keys.status("t")[0]
    assert [(k["version"], k["current"], k["bytes"] > 0) for k in st["keys"]] == \
        [(1, False, True), (2, True, True)]
    out = eng.keys.rewrap("k2")
    assert out == {"master_key_id": "k2", "topics": [
        {"topic": "t", "versions": 2, "previous_master_key_ids": ["k1"]}]}
    assert eng.topic("t").config["encryption.key.id"] == "k2"
    eng.close()
    write_keyring(keyring, {"k2": keys["k2"]})  # the old master key leaves the keyring
    eng = Engine.open(data_dir, keyring=keyring)
    assert rows(eng, "t") == before
    out = eng.keys.reencrypt("t")
    assert out["dropped_versions"] == [1] and out["kept_versions"] == [2]
    assert sum(p["batches_rewritten"] for p in out["partitions"]) == 200
    assert rows(eng, "t") == before
    st = eng.keys.status("t")[0]
    assert [k["version"] for k in st["keys"]] == [2] and st["plaintext"]["bytes"] == 0
    assert [k.version for k in eng.topic("t").keys.versions] == [2]
    assert eng.keys.reencrypt("t")["partitions"][0]["local_segments"] == []  # nothing left to do
    eng.close()


def test_encryption_turned_on_later_then_off_reencrypt_follows_the_config(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "4096"})
        for i in range(100):
            eng.produce("t", [Record(value=marker(i))])
        eng.alter_topic_config("t", dict(ENC))
        for i in range(100, 150):
            eng.produce("t", [Record(value=marker(i))])
        before = rows(eng, "t")
        assert plaintext_in([data_dir], [marker(5)]) != []  # old batches stay as they were
        assert plaintext_in([data_dir], [marker(120)]) == []
        dry = eng.keys.reencrypt("t", dry_run=True)
        assert dry["target_version"] == 1 and dry["partitions"][0]["local_segments"]
        assert plaintext_in([data_dir], [marker(5)]) != []  # a dry run changes nothing
        eng.keys.reencrypt("t")
        assert plaintext_in([data_dir], [marker(i) for i in range(150)]) == []
        assert rows(eng, "t") == before
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        eng.produce("t", [Record(value=marker(150))])
        out = eng.keys.reencrypt("t")  # every batch back to plaintext
        assert out["target_version"] is None
        assert eng.keys.status("t")[0]["keys"][0]["bytes"] == 0
        assert rows(eng, "t")[:150] == before
        assert plaintext_in([data_dir], [marker(3), marker(150)]) != []


def test_a_cipher_change_is_a_new_data_key_and_old_batches_stay_readable(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(1))])
        eng.alter_topic_config("t", {"encryption.cipher": "chacha20-poly1305"})
        eng.produce("t", [Record(value=marker(2))])
        ks = eng.topic("t").keys
        assert [(k.version, k.cipher) for k in ks.versions] == \
            [(1, "aes-256-gcm"), (2, "chacha20-poly1305")] and ks.current == 2
        assert [r[4] for r in rows(eng, "t")] == [marker(1), marker(2)]
        versions = [h.key_version for p in segment_files(data_dir, "t") for _, h in batches_of(p)]
        assert versions == [1, 2]


def test_a_writer_never_seals_with_a_version_dropped_in_another_engine(
        data_dir, keyring, monkeypatch):
    """Two engines stand for two processes: A keeps its keys in memory; B rotates,
    re-encrypts and drops version 1. A's next append looks at the catalog when it takes the
    partition's lock, so it seals with version 2, and everything stays readable."""
    # A's produce path would otherwise look at the catalog itself (every 10 ms): keep its
    # cached entry, as a produce that started just before B's drop has
    monkeypatch.setattr("engine.produce.path.CATALOG_RECHECK_S", 3600)
    a = Engine.open(data_dir, keyring=keyring)
    a.create_topic("t", 1, ENC)
    a.produce("t", [Record(value=marker(1))])
    b = Engine.open(data_dir, keyring=keyring)
    b.keys.rotate("t")
    assert b.keys.reencrypt("t")["dropped_versions"] == [1]
    a.produce("t", [Record(value=marker(2))])  # A's catalog view is as old as its last produce
    versions = [h.key_version for p in segment_files(data_dir, "t") for _, h in batches_of(p)]
    assert versions == [2, 2]
    assert [r[4] for r in rows(b, "t")] == [marker(1), marker(2)]
    a.close()
    b.close()


def test_a_flipped_ciphertext_bit_with_a_good_crc_is_damage(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(i)) for i in range(10)])
    path = segment_files(data_dir, "t")[0]

    def flip(buf: bytearray) -> None:
        buf[HEADER_SIZE + 40] ^= 1  # inside the ciphertext

    reseal_crc(path, 0, flip)
    with Engine.open(data_dir, keyring=keyring) as eng:
        with pytest.raises(CorruptRecordError, match=rf"does not decrypt.*{path} at position 0"):
            eng.read("t", 0, 0)
        assert eng.segments.verify(["t"])["ok"]  # without keys: its CRC and layout are fine
        found = eng.segments.verify(["t"], decrypt=True)["findings"]
        assert [(f["kind"], f["path"], f["position"]) for f in found] == [("body", path, 0)]


def test_a_batch_moved_to_another_offset_or_partition_does_not_decrypt(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 2, ENC)
        eng.produce("t", [Record(value=marker(0))], partition=0)
        eng.produce("t", [Record(value=marker(1))], partition=1)
        eng.produce("t", [Record(value=marker(2))], partition=1)
    p0, p1 = segment_files(data_dir, "t", 0)[0], segment_files(data_dir, "t", 1)[0]
    with open(p0, "rb") as f:
        batch0 = f.read()
    (pos1, _), (pos2, h2) = batches_of(p1)
    # partition 0's batch in place of partition 1's first batch (same offset 0): the CRC is
    # its own, valid; only the associated data (the partition) tells it apart
    with open(p1, "r+b") as f:
        f.write(batch0)
    with Engine.open(data_dir, keyring=keyring) as eng:
        with pytest.raises(CorruptRecordError, match="does not decrypt"):
            eng.read("t", 1, 0, 1)
    # partition 1's second batch renumbered to offset 5 (a later offset), CRC made valid
    reseal_crc(p1, pos2, lambda buf: struct.pack_into("<q", buf, 0, 5))
    with Engine.open(data_dir, keyring=keyring) as eng:
        seg_batch = batches_of(p1)[1][1]
        assert seg_batch.base_offset == 5
        opener = eng.keys.topic_keys("t").opener_for(1)
        with open(p1, "rb") as f:
            data = f.read()
        with pytest.raises(CorruptRecordError, match="does not decrypt"):
            opener(data, pos2, seg_batch, "")
        assert eng.read("t", 0, 0, 1)[0].value == marker(0)  # partition 0 untouched


# ---------------------------------------------------------------- keys missing or wrong
def test_reads_without_the_key_name_it_and_writes_nothing(data_dir, keyring, keys, tmp_path):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(1))])
    size = os.path.getsize(segment_files(data_dir, "t")[0])
    with Engine.open(data_dir) as eng:  # no keyring at all
        with pytest.raises(KeyUnavailable, match="master key 'k1'.*--keyring"):
            eng.read("t", 0, 0)
        with pytest.raises(KeyUnavailable, match="'k1'"):
            eng.produce("t", [Record(value=marker(2))])
        assert eng.keys.status("t")[0]["keys"][0]["bytes"] > 0  # status needs no key
    other = write_keyring(str(tmp_path / "other.json"), {"k2": keys["k2"]})
    with Engine.open(data_dir, keyring=other) as eng:
        with pytest.raises(KeyUnavailable, match="master key 'k1' is not in the keyring"):
            eng.read("t", 0, 0)
    wrong = write_keyring(str(tmp_path / "wrong.json"), {"k1": new_key()})
    with Engine.open(data_dir, keyring=wrong) as eng:
        with pytest.raises(WrongKey, match="does not open data key version 1"):
            eng.read("t", 0, 0)
        with pytest.raises(WrongKey):
            eng.produce("t", [Record(value=marker(3))])
    assert os.path.getsize(segment_files(data_dir, "t")[0]) == size
    with Engine.open(data_dir, keyring=keyring) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [marker(1)]


def test_turning_encryption_on_needs_a_master_key_the_keyring_holds(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        with pytest.raises(InvalidConfig, match="needs encryption.key.id"):
            eng.create_topic("a", 1, {"encryption.enable": "true"})
        with pytest.raises(KeyUnavailable, match="master key 'nope'"):
            eng.create_topic("b", 1, {"encryption.enable": "true", "encryption.key.id": "nope"})
        assert [t.name for t in eng.topics()] == []
    with Engine.open(data_dir) as eng:
        with pytest.raises(KeyUnavailable, match="no keyring"):
            eng.create_topic("c", 1, ENC)
        eng.create_topic("d", 1)
        with pytest.raises(KeyUnavailable):
            eng.alter_topic_config("d", dict(ENC))
        assert "encryption.enable" not in eng.topic("d").config


def test_a_custom_keyring_object_stands_in_for_a_kms(data_dir, keys):
    class Kms:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def get(self, key_id: str) -> bytes:
            self.asked.append(key_id)
            return base64.b64decode(keys[key_id])

    kms = Kms()
    with Engine.open(data_dir, keyring=kms) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(1))])
    with Engine.open(data_dir, keyring=Kms()) as eng:
        assert eng.read("t", 0, 0)[0].value == marker(1)
    assert kms.asked and set(kms.asked) == {"k1"}


# ---------------------------------------------------------------- offsets' metadata
def test_committed_metadata_is_sealed_and_reencrypt_reseals_it(data_dir, keyring):
    text = marker(9, b"META").decode()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        eng.produce("t", [Record(value=marker(1))])
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.commit({("t", 0): 1}, metadata=text)
        c.close()
        row = eng.groups.describe("g")["partitions"][0]
        assert (row["metadata"], row["metadata_encrypted"]) == (text, True)
        when = row["last_commit"]
    assert plaintext_in([data_dir], [text.encode()]) == []
    with Engine.open(data_dir) as eng:  # offsets and lag need no key; the text does
        row = eng.groups.describe("g")["partitions"][0]
        assert (row["current_offset"], row["lag"], row["metadata"]) == (1, 0, None)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.keys.rotate("t")
        out = eng.keys.reencrypt("t")
        assert out["metadata_resealed"] == 1 and out["dropped_versions"] == [1]
        row = eng.groups.describe("g")["partitions"][0]
        assert (row["metadata"], row["last_commit"]) == (text, when)
    assert plaintext_in([data_dir], [text.encode()]) == []


def test_table_of_arrow_reads_is_zero_copy_for_plain_and_whole_for_encrypted(data_dir, keyring):
    """read_arrow of an encrypted topic builds its arrays over the opened bodies: the schema
    and values are those of a plain read."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("e", 1, ENC)
        eng.produce_batch("e", [marker(i) for i in range(5000)])
        t = eng.read_arrow("e", 0, 1000, 10)
        assert t["offset"].to_pylist() == list(range(1000, 1010))
        assert t["value"].to_pylist() == [marker(i) for i in range(1000, 1010)]
        assert t.schema.field("value").type == pa.binary()
        assert eng.resolve_offset("e", 0, Position("end")) == 5000


def test_a_stale_catalog_entry_never_takes_a_writer_back_to_an_older_key(data_dir, keyring):
    """A produce may use a catalog entry read up to 10 ms before a rotation (its cache): the
    keys it hands the log must not take the log back to the older version, which a
    re-encryption may drop."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, ENC)
        stale = eng.topic("t")
        eng.keys.rotate("t")
        tk = eng.keys.topic_keys("t")
        assert tk.sealer().version == 2
        tk.update(stale.keys)
        assert tk.keyset.current == 2 and tk.sealer().version == 2
        eng.produce("t", [Record(value=marker(1))])
    versions = [h.key_version for p in segment_files(data_dir, "t") for _, h in batches_of(p)]
    assert versions == [2]


def test_compaction_and_tiering_keep_what_an_unencrypted_copy_keeps(data_dir, keyring):
    """The same updates to an encrypted and a plain compacted topic, and to an encrypted and
    a plain tiered topic: compaction keeps the same last value per key (segment bounds differ:
    sealed batches are 44 bytes larger), and reads across the tiers give the same records."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        for name, cfg in (("ce", {**ENC}), ("cp", {})):
            eng.create_topic(name, 1, {**cfg, "cleanup.policy": "compact", "segment.bytes": "2048"})
        for name, cfg in (("te", {**ENC}), ("tp", {})):
            eng.create_topic(name, 1, {**cfg, "segment.bytes": "2048",
                                       "remote.storage.enable": "true",
                                       "local.retention.bytes": "4096"})
        for i in range(400):
            for t in ("ce", "cp"):
                eng.produce(t, [Record(key=b"k%d" % (i % 23),
                                       value=None if i % 41 == 0 else marker(i),
                                       timestamp=1_700_000_000_000 + i)])
            for t in ("te", "tp"):
                eng.produce(t, [Record(key=b"k", value=marker(i), timestamp=1_700_000_000_000 + i)])
        for t in ("ce", "cp"):
            assert eng.maintenance.compact(t, force=True)[0]["records_out"] > 0
        last = {t: {r[3]: r[4] for r in rows(eng, t)} for t in ("ce", "cp")}
        assert last["ce"] == last["cp"] and len(last["ce"]) == 23
        for t in ("te", "tp"):
            assert sum(len(p["uploaded"]) for p in eng.maintenance.tier(t)["partitions"]) > 0
        assert [r[1:] for r in rows(eng, "te")] == [r[1:] for r in rows(eng, "tp")]
        st = eng.keys.status("te")[0]
        assert st["plaintext"]["bytes"] == 0
        assert {r["tier"] for r in st["keys"][0]["ranges"]} == {"cold", "local"}


def test_a_keyring_inside_the_data_dir_is_refused(data_dir, keys):
    from engine.errors import KeyringError

    with Engine.open(data_dir):
        pass
    inside = write_keyring(os.path.join(data_dir, "keyring.json"), keys)
    with pytest.raises(KeyringError, match="inside the data dir"):
        Engine.open(data_dir, keyring=inside)
