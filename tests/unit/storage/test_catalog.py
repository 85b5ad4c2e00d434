"""engine.storage.catalog: topics.json, its names, atomic changes and damage reports."""

import json
import os

import pytest

from engine.errors import DamagedMetadata, InvalidTopicName
from engine.storage.catalog import CATALOG, Catalog, TopicMeta, check_topic_name
from engine.storage.config import TopicConfig


@pytest.fixture
def ddir(data_dir):
    os.makedirs(data_dir)
    return data_dir


@pytest.mark.parametrize("name", ["a", "orders", "Orders.v1_eu-west-2", "_", "-", "...", ".a",
                                  "a" * 249, "0"])
def test_valid_topic_names(name):
    check_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "/", "a b", "ü", "a\n",
                                  "topic:1", "a\\b"])
def test_invalid_topic_names(name):
    with pytest.raises(InvalidTopicName, match="invalid topic name"):
        check_topic_name(name)


@pytest.mark.parametrize("name", [None, 5, b"orders"])
def test_a_topic_name_must_be_a_str(name):
    with pytest.raises(InvalidTopicName):
        check_topic_name(name)


def test_a_long_invalid_name_is_shortened_in_the_message():
    with pytest.raises(InvalidTopicName) as e:
        check_topic_name("x" * 250)
    msg = str(e.value)
    assert "x" * 60 + "..." in msg
    assert "x" * 61 not in msg
    assert "1-249 characters" in msg


def test_topic_meta_new_and_json():
    cfg = {"retention.ms": "1000"}
    t = TopicMeta.new("orders", 3, cfg)
    assert len(t.id) == 32 and int(t.id, 16) >= 0
    assert t.created_ms > 1_600_000_000_000
    cfg["retention.ms"] = "5"  # the meta holds its own copy
    assert t.config == {"retention.ms": "1000"}
    assert t.to_json() == {"id": t.id, "partitions": 3, "config": {"retention.ms": "1000"},
                           "created_ms": t.created_ms}
    assert TopicMeta.new("orders", 3, {}).id != t.id


def test_topic_meta_typed_config():
    t = TopicMeta("t", "id", 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert isinstance(t.typed, TopicConfig)
    assert t.typed.retention_ms == 1000
    assert t.typed.compacted
    assert t.typed.segment_bytes == 1073741824  # a default
    assert t.typed is t.typed  # parsed once


def test_an_empty_data_dir_has_no_topics(ddir):
    c = Catalog(ddir)
    c.refresh()
    assert c.topics == {}
    assert c.get("orders") is None
    assert not os.path.exists(os.path.join(ddir, CATALOG))


def test_mutate_writes_the_file_atomically(ddir):
    c = Catalog(ddir)
    with c.mutate() as topics:
        assert topics == {}
        topics["b-topic"] = TopicMeta.new("b-topic", 2, {"retention.ms": "1000"})
        topics["a-topic"] = TopicMeta.new("a-topic", 1, {})
        # nothing is written before the block ends
        assert not os.path.exists(c.path)
    with open(c.path, "rb") as f:
        doc = json.loads(f.read())
    assert doc["format"] == 1
    assert list(doc["topics"]) == ["a-topic", "b-topic"]  # sorted
    assert doc["topics"]["b-topic"]["partitions"] == 2
    assert doc["topics"]["b-topic"]["config"] == {"retention.ms": "1000"}
    # no temp file left behind, the lock file stays
    assert sorted(os.listdir(ddir)) == ["catalog.lock", "topics.json"]
    assert c.topics["b-topic"].partitions == 2


def test_a_failed_mutation_writes_nothing(ddir):
    c = Catalog(ddir)
    with c.mutate() as topics:
        topics["keep"] = TopicMeta.new("keep", 1, {})
    before = open(c.path, "rb").read()
    with pytest.raises(RuntimeError), c.mutate() as topics:
        topics["lost"] = TopicMeta.new("lost", 1, {})
        raise RuntimeError("caller gave up")
    assert open(c.path, "rb").read() == before
    assert Catalog(ddir).get("lost") is None


def test_a_second_catalog_sees_changes_via_refresh(ddir):
    writer, reader = Catalog(ddir), Catalog(ddir)
    with writer.mutate() as topics:
        topics["orders"] = TopicMeta.new("orders", 3, {"retention.ms": "1000"})
    got = reader.get("orders")
    assert got is not None
    want = writer.topics["orders"]
    assert (got.name, got.id, got.partitions, got.config, got.created_ms) == \
        (want.name, want.id, want.partitions, want.config, want.created_ms)
    with writer.mutate() as topics:
        topics["orders"] = TopicMeta(
            "orders", want.id, 3, {"retention.ms": "2000"}, want.created_ms)
        topics["clicks"] = TopicMeta.new("clicks", 1, {})
    reader.refresh()
    assert sorted(reader.topics) == ["clicks", "orders"]
    assert reader.topics["orders"].config == {"retention.ms": "2000"}
    with writer.mutate() as topics:
        del topics["orders"]
    assert reader.get("orders") is None
    assert reader.get("clicks") is not None


def test_mutate_starts_from_the_file_not_a_stale_copy(ddir):
    a, b = Catalog(ddir), Catalog(ddir)
    a.refresh()
    b.refresh()
    with a.mutate() as topics:
        topics["one"] = TopicMeta.new("one", 1, {})
    with b.mutate() as topics:  # b never refreshed since: it must not drop "one"
        assert "one" in topics
        topics["two"] = TopicMeta.new("two", 1, {})
    fresh = Catalog(ddir)
    fresh.refresh()
    assert sorted(fresh.topics) == ["one", "two"]


def test_a_deleted_catalog_file_reads_as_empty(ddir):
    c = Catalog(ddir)
    with c.mutate() as topics:
        topics["t"] = TopicMeta.new("t", 1, {})
    os.unlink(c.path)
    c.refresh()
    assert c.topics == {}


def write_raw(ddir, text):
    with open(os.path.join(ddir, CATALOG), "w") as f:
        f.write(text)


def topics_doc(**topics):
    return json.dumps({"format": 1, "topics": topics})


ID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("text", [
    "not json",
    "{\"format\": 1, \"topics\": {\"t\": {\"id\": \"x\", \"partitions\"",  # cut short
    "{}",  # no topics
    topics_doc(t={"id": ID}),  # no partitions
    topics_doc(t={"partitions": 1}),  # no id
    topics_doc(t={"id": ID, "partitions": "many"}),
    topics_doc(t={"id": "x", "partitions": 1}),  # not 32 hex digits
    topics_doc(t={"id": ID.upper(), "partitions": 1}),
    topics_doc(t={"id": 7, "partitions": 1}),
    topics_doc(**{"a/b": {"id": ID, "partitions": 1}}),  # an invalid name
    topics_doc(**{"..": {"id": ID, "partitions": 1}}),
    "[1, 2]",
])
def test_a_damaged_catalog_is_damaged_metadata_naming_the_file(ddir, text):
    write_raw(ddir, text)
    c = Catalog(ddir)
    with pytest.raises(DamagedMetadata) as e:
        c.refresh()
    assert e.value.exit_code == 3
    assert c.path in str(e.value)
    assert "damaged" in str(e.value) and "backup" in str(e.value)


@pytest.mark.parametrize("text", [
    json.dumps({"format": 1, "topics": []}),
    topics_doc(t={"id": ID, "partitions": 1, "config": ["a"]}),
    topics_doc(t={"id": ID, "partitions": 1, "config": "retention.ms=1"}),
])
def test_a_catalog_with_a_non_object_where_an_object_belongs(ddir, text):
    write_raw(ddir, text)
    with pytest.raises(DamagedMetadata, match="damaged"):
        Catalog(ddir).refresh()


@pytest.mark.parametrize("parts", [0, -1, 100_001, True, 2.0])
def test_partitions_out_of_range_are_rejected(ddir, parts):
    write_raw(ddir, topics_doc(t={"id": ID, "partitions": parts}))
    with pytest.raises(DamagedMetadata, match=f"topic t: partitions is {parts}, not an integer"):
        Catalog(ddir).get("t")


@pytest.mark.parametrize("parts", [1, 100_000])
def test_partitions_at_the_limits_are_accepted(ddir, parts):
    write_raw(ddir, topics_doc(t={"id": ID, "partitions": parts}))
    assert Catalog(ddir).get("t").partitions == parts


def test_an_unreadable_catalog_path(ddir):
    os.mkdir(os.path.join(ddir, CATALOG))  # a directory where the file should be
    with pytest.raises(DamagedMetadata, match="topic catalog .*topics.json is damaged"):
        Catalog(ddir).refresh()


def test_missing_optional_fields_take_defaults(ddir):
    write_raw(ddir, topics_doc(t={"id": ID, "partitions": 4}))
    t = Catalog(ddir).get("t")
    assert (t.id, t.partitions, t.config, t.created_ms) == (ID, 4, {}, 0)


def test_refresh_notices_a_damaged_rewrite(ddir):
    c = Catalog(ddir)
    with c.mutate() as topics:
        topics["t"] = TopicMeta.new("t", 1, {})
    c.refresh()
    write_raw(ddir, "{broken")
    with pytest.raises(DamagedMetadata):
        c.get("t")
