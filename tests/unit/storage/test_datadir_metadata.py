"""The data dir's metadata as crafted: topics.json (values JSON cannot hold, wrong types, bad
configs) and rivven.json are damage naming the file in every command, never an internal error;
the catalog is sealed, and one written before seals is read and sealed on the next change."""

from __future__ import annotations

import json
import os

import pytest
from helpers import flip
from helpers.crafted import clean, entry


def catalog_text(topics) -> str:
    return json.dumps({"format": 1, "topics": topics})


CRAFTED_CATALOGS = {
    "infinity": catalog_text({"t": entry()}).replace('"created_ms": 1', '"created_ms": Infinity'),
    "nan": catalog_text({"t": entry()}).replace('"partitions": 1', '"partitions": NaN'),
    "huge-float": catalog_text({"t": entry()}).replace('"created_ms": 1', '"created_ms": 1e400'),
    "deep": '{"format": 1, "topics": ' + "[" * 10_000 + "]" * 10_000 + "}",
    "deep-config": catalog_text({"t": entry()}).replace(
        '"config": {}', '"config": ' + '{"a":' * 10_000 + "1" + "}" * 10_000),
    "non-hex-id": catalog_text({"t": entry(id="z" * 32)}),
    "short-id": catalog_text({"t": entry(id="abc")}),
    "int-id": catalog_text({"t": entry(id=12345)}),
    "float-partitions": catalog_text({"t": entry(partitions=2.5)}),
    "bool-partitions": catalog_text({"t": entry(partitions=True)}),
    "string-created": catalog_text({"t": entry(created_ms="yesterday")}),
    "negative-created": catalog_text({"t": entry(created_ms=-5)}),
    "bad-config-value": catalog_text({"t": entry(config={"retention.ms": "soon"})}),
    "unknown-config-key": catalog_text({"t": entry(config={"retention.mss": "1"})}),
    "non-string-config": catalog_text({"t": entry(config={"retention.ms": 5})}),
    "config-list": catalog_text({"t": entry(config=["retention.ms"])}),
    "topics-list": json.dumps({"format": 1, "topics": ["t"]}),
    "topic-not-object": catalog_text({"t": 5}),
    "not-utf8": b'{"format": 1, "topics": {"\xff": 1}}',
}


@pytest.mark.parametrize("case", sorted(CRAFTED_CATALOGS))
def test_a_crafted_catalog_is_damage_naming_the_file_in_every_command(cli, data_dir, case):
    assert cli("topic", "create", "t").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    text = CRAFTED_CATALOGS[case]
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    before = open(path, "rb").read()
    for args in (("topic", "list"), ("consume", "t", "-n", "1"), ("topic", "create", "u")):
        err = clean(cli(*args, input=b"x\n"), 3)
        assert path in err and "damaged" in err, (args, err)
    r = cli("produce", "t", input=b"x\n")
    assert path in clean(r, 3)
    assert open(path, "rb").read() == before  # never rewritten from damage


def test_a_bad_stored_config_value_names_the_topic_the_key_and_the_file(rivven, data_dir):
    assert rivven("topic", "create", "orders", "-c", "retention.ms=1000").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    doc = json.loads(open(path).read())
    doc.pop("crc32c", None)
    doc["topics"]["orders"]["config"]["retention.ms"] = "-7"
    with open(path, "w") as f:
        f.write(json.dumps(doc))
    err = clean(rivven("topic", "describe", "orders"), 3)
    assert "topic orders" in err and "retention.ms" in err and path in err


def test_the_catalog_is_sealed_and_a_flipped_bit_is_damage(rivven, data_dir):
    assert rivven("topic", "create", "t", "-p", "2").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    raw = open(path, "rb").read()
    assert b'"crc32c"' in raw
    # '2' -> '3': still a valid catalog, but not the one written
    flip(path, raw.index(b'"partitions": 2') + len(b'"partitions": '), 0)
    err = clean(rivven("topic", "list"), 3)
    assert "checksum mismatch" in err and path in err


def test_a_catalog_written_before_seals_is_still_read_and_sealed_on_the_next_change(
        rivven, data_dir):
    assert rivven("topic", "create", "old").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    doc = json.loads(open(path).read())
    del doc["crc32c"]  # as rivven wrote it before seals
    with open(path, "w") as f:
        f.write(json.dumps(doc, indent=1))
    r = rivven("topic", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [t["topic"] for t in json.loads(r.stdout)] == ["old"]
    assert rivven("topic", "create", "new").returncode == 0
    doc = json.loads(open(path).read())
    assert sorted(doc["topics"]) == ["new", "old"] and "crc32c" in doc


# ================================================================ rivven.json
@pytest.mark.parametrize("text", [
    '{"format": Infinity}',
    '{"format": NaN}',
    '{"format": 1.0}',
    '{"format": "1"}',
    '{"format": true}',
    "[1]",
    "1e400",
    "[" * 10_000 + "]" * 10_000,
    '{"format": ' + "[" * 10_000 + "]" * 10_000 + "}",
])
def test_a_crafted_marker_is_damage_naming_the_file(cli, data_dir, text):
    assert cli("topic", "create", "t").returncode == 0
    marker = os.path.join(data_dir, "rivven.json")
    with open(marker, "w") as f:
        f.write(text)
    for args in (("topic", "list"), ("produce", "t")):
        err = clean(cli(*args, input=b"x\n"), 3)
        assert marker in err and "damaged" in err
    assert open(marker).read() == text
