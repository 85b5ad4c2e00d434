"""``TopicAdmin`` alone (built from the catalog and a LogFinder, no Engine): what Kafka's
admin APIs need of it — a create or a config change checked without being made
(validate_only), AlterConfigs' replacement of a topic's whole config set, partitions added or
only checked."""

from __future__ import annotations

import os

import pytest

from engine.crypto.topic import Vault
from engine.errors import InvalidArgument, InvalidConfig, InvalidTopicName, TopicExists, UnknownTopic
from engine.fs.locks import LockWait
from engine.storage.finder import LogFinder
from engine.storage.partitions import Partitions
from engine.storage.topics import Topics
from engine.topic_admin import TopicAdmin
from engine.txn.hook import PartitionProducers


@pytest.fixture
def admin(data_dir):
    from engine import Engine

    Engine.open(data_dir).close()  # (an initialized data dir)
    vault = Vault(None)
    topics = Topics(data_dir, LockWait(), vault)
    vault.lookup = topics.catalog.get
    parts = Partitions(data_dir, True, "none", producers=PartitionProducers)
    yield TopicAdmin(data_dir, topics, LogFinder(topics, parts, lambda log: None), lambda: None)
    parts.forget_all()


def catalog(admin):
    """The catalog file's bytes (None before the first topic)."""
    path = admin.topics.catalog.path
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def test_check_create_says_what_create_would_make_and_writes_nothing(admin):
    admin.create("other")
    before = catalog(admin)
    meta = admin.check_create("new", 3, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert (meta.name, meta.partitions) == ("new", 3)
    assert meta.config == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert catalog(admin) == before
    assert not os.path.exists(os.path.join(admin.data_dir, "topics", "new"))
    with pytest.raises(UnknownTopic):
        admin.topics.get("new")


@pytest.mark.parametrize("name, partitions, config, error", [
    ("bad/name", 1, {}, InvalidTopicName),
    ("ok", 0, {}, InvalidArgument),
    ("ok", 1, {"retention.msx": "1"}, InvalidConfig),
    ("ok", 1, {"local.retention.ms": "-1"}, InvalidConfig),  # (a combination rule)
    ("there", 1, {}, TopicExists),
])
def test_check_create_raises_what_create_raises(admin, name, partitions, config, error):
    admin.create("there")
    with pytest.raises(error):
        admin.check_create(name, partitions, config)
    with pytest.raises(error):
        admin.create(name, partitions, config)


def test_replace_keeps_only_the_given_configs(admin):
    admin.create("t", 1, {"retention.ms": "1000", "segment.bytes": "4096"})
    meta = admin.alter_config("t", {"cleanup.policy": "compact"}, replace=True)
    assert meta.config == {"cleanup.policy": "compact"}
    assert admin.topics.get("t").config == {"cleanup.policy": "compact"}
    assert admin.alter_config("t", {}, replace=True).config == {}


def test_validate_only_alter_checks_and_writes_nothing(admin):
    admin.create("t", 1, {"retention.ms": "1000"})
    before = catalog(admin)
    meta = admin.alter_config("t", {"segment.bytes": "4096"}, validate_only=True)
    assert meta.config == {"retention.ms": "1000", "segment.bytes": "4096"}
    meta = admin.alter_config("t", {"segment.bytes": "4096"}, replace=True, validate_only=True)
    assert meta.config == {"segment.bytes": "4096"}
    assert catalog(admin) == before
    with pytest.raises(InvalidConfig, match="segment.bytes"):
        admin.alter_config("t", {"segment.bytes": "1"}, validate_only=True)
    with pytest.raises(UnknownTopic):
        admin.alter_config("nope", {}, validate_only=True)


def test_validate_only_add_partitions(admin):
    admin.create("t", 2)
    before = catalog(admin)
    assert admin.add_partitions("t", 5, validate_only=True).partitions == 5
    assert catalog(admin) == before and admin.topics.get("t").partitions == 2
    assert not os.path.exists(os.path.join(admin.data_dir, "topics", "t", "partition-2"))
    with pytest.raises(InvalidArgument, match="has 2 partitions"):
        admin.add_partitions("t", 2, validate_only=True)
    assert admin.add_partitions("t", 3).partitions == 3


def test_config_keys_list_every_topic_config_with_its_kafka_type(admin):
    from engine.storage.config import KEYS

    rows = admin.config_keys()
    assert [r["key"] for r in rows] == sorted(KEYS)
    by = {r["key"]: r for r in rows}
    assert by["message.timestamp.type"]["default"] == "CreateTime"
    assert by["cleanup.policy"]["kind"] == "list" and by["retention.ms"]["kind"] == "long"
    assert all(r["doc"] for r in rows)


def test_append_and_subtract_list_values_from_the_current_one(admin):
    admin.create("t")
    # unset: from the default (delete)
    assert admin.alter_config("t", append={"cleanup.policy": "compact"}).config == \
        {"cleanup.policy": "compact,delete"}
    assert admin.alter_config("t", append={"cleanup.policy": "compact"}).config == \
        {"cleanup.policy": "compact,delete"}  # (already there: no twin)
    assert admin.alter_config("t", subtract={"cleanup.policy": "delete"}).config == \
        {"cleanup.policy": "compact"}
    with pytest.raises(InvalidConfig, match="invalid value '' for cleanup.policy"):
        admin.alter_config("t", subtract={"cleanup.policy": "compact"})
    with pytest.raises(InvalidConfig, match="Config value append is not allowed for config "
                                            "key: retention.ms"):
        admin.alter_config("t", append={"retention.ms": "1"})
    with pytest.raises(InvalidConfig, match="unknown topic config 'cleanup.polcy'"):
        admin.alter_config("t", subtract={"cleanup.polcy": "x"})
    before = catalog(admin)
    assert admin.alter_config("t", append={"cleanup.policy": "delete"},
                              validate_only=True).config == {"cleanup.policy": "compact,delete"}
    assert catalog(admin) == before and admin.topics.get("t").config == {"cleanup.policy": "compact"}
