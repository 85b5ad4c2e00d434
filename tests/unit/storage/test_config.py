"""engine.storage.config: topic config keys, validation, normalization and combination rules."""

import pytest

from engine.errors import InvalidArgument, InvalidConfig
from engine.storage.config import (
    INT64_MAX,
    KEYS,
    TopicConfig,
    check_combination,
    effective,
    parse_pairs,
    validate,
)


def test_every_default_is_valid_and_normalized():
    defaults = {k: key.default for k, key in KEYS.items()}
    assert validate(defaults) == defaults
    check_combination({})


def test_invalid_config_is_an_invalid_argument():
    assert issubclass(InvalidConfig, InvalidArgument)


# ---------------------------------------------------------------- unknown keys
@pytest.mark.parametrize("typo, hint", [
    ("retention.msx", "retention.ms"),
    ("retention_ms", "retention.ms"),
    ("segment.byte", "segment.bytes"),
    ("cleanup.polcy", "cleanup.policy"),
])
def test_unknown_key_with_a_did_you_mean_hint(typo, hint):
    with pytest.raises(InvalidConfig) as e:
        validate({typo: "1"})
    msg = str(e.value)
    assert f"unknown topic config {typo!r}" in msg
    assert f"(did you mean {hint}?)" in msg
    assert "valid keys: cleanup.policy, compression.type" in msg


def test_unknown_key_without_a_close_match_has_no_hint():
    with pytest.raises(InvalidConfig) as e:
        validate({"zzzz": "1"})
    assert "did you mean" not in str(e.value)
    assert "valid keys:" in str(e.value)


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("key, value, why", [
    ("retention.ms", "abc", "must be an integer"),
    ("retention.ms", "-5", "(or -1 for unlimited)"),
    ("retention.ms", "1.5", "must be an integer"),
    ("retention.ms", str(INT64_MAX + 1), "must be between"),
    ("retention.bytes", "-2", "(or -1 for unlimited)"),
    ("segment.bytes", "127", "must be between 128 and"),
    ("segment.bytes", "-1", "must be between 128 and"),
    ("segment.ms", "0", "must be between 1 and"),
    ("segment.index.bytes", "63", "must be between 64 and"),
    ("max.message.bytes", str((1 << 31) - 1024), "must be between 128 and"),
    ("delete.retention.ms", "-1", "must be between 0 and"),
    ("min.compaction.lag.ms", "x", "must be an integer"),
    ("index.interval.bytes", "-1", "must be between 0 and"),
    ("min.cleanable.dirty.ratio", "1.5", "must be between 0 and 1"),
    ("min.cleanable.dirty.ratio", "-0.1", "must be between 0 and 1"),
    ("min.cleanable.dirty.ratio", "half", "must be a number between 0 and 1"),
    ("min.cleanable.dirty.ratio", "nan", "must be between 0 and 1"),
    ("cleanup.policy", "remove", "must be delete, compact or compact,delete"),
    ("cleanup.policy", "", "must be delete, compact or compact,delete"),
    ("cleanup.policy", "delete,archive", "must be delete, compact or compact,delete"),
    ("compression.type", "brotli", "must be one of producer, "),
    ("remote.storage.enable", "yes", "must be true or false"),
    ("remote.storage.enable", "1", "must be true or false"),
    ("remote.storage.uri", "/mnt/cold", "must be a URI such as"),
    ("remote.storage.uri", "s3://", "must be a URI such as"),
    ("remote.storage.uri", "S3://bucket", "must be a URI such as"),
    ("local.retention.ms", "-3", "must be -2 (same as retention), -1 (unlimited) or >= 0"),
    ("local.retention.bytes", "lots", "must be an integer: -2"),
    ("message.timestamp.type", "AppendTime", "must be CreateTime or LogAppendTime"),
    ("message.timestamp.type", "", "must be CreateTime or LogAppendTime"),
    ("message.timestamp.before.max.ms", "-1", "must be between 0 and"),
    ("message.timestamp.after.max.ms", "soon", "must be an integer"),
])
def test_bad_values(key, value, why):
    with pytest.raises(InvalidConfig) as e:
        validate({key: value})
    msg = str(e.value)
    assert f"invalid value {value!r} for {key}: " in msg
    assert why in msg


@pytest.mark.parametrize("key, value, normal", [
    ("compression.type", "uncompressed", "none"),
    ("compression.type", " UNCOMPRESSED ", "none"),
    ("compression.type", "ZSTD", "zstd"),
    ("compression.type", "Producer", "producer"),
    ("remote.storage.enable", "TRUE", "true"),
    ("remote.storage.enable", " False ", "false"),
    ("cleanup.policy", "delete,compact", "compact,delete"),
    ("cleanup.policy", " Compact ", "compact"),
    ("cleanup.policy", "compact,compact", "compact"),
    ("remote.storage.uri", "s3://bucket/prefix/", "s3://bucket/prefix"),
    ("remote.storage.uri", "file:///mnt/cold///", "file:///mnt/cold"),
    ("remote.storage.uri", " gs://b/p ", "gs://b/p"),
    ("remote.storage.uri", "file:///", "file:///"),
    ("remote.storage.uri", "s3://b/", "s3://b"),
    ("remote.storage.uri", "", ""),
    ("retention.ms", " 1000 ", "1000"),
    ("retention.ms", "-1", "-1"),
    ("retention.ms", "+5", "5"),
    ("retention.bytes", "-1", "-1"),
    ("local.retention.ms", "-2", "-2"),
    ("local.retention.bytes", "-1", "-1"),
    ("min.cleanable.dirty.ratio", "1", "1.0"),
    ("min.cleanable.dirty.ratio", "0.25", "0.25"),
    ("segment.bytes", "128", "128"),
    ("message.timestamp.type", "logappendtime", "LogAppendTime"),
    ("message.timestamp.type", " CREATETIME ", "CreateTime"),
])
def test_values_are_normalized(key, value, normal):
    assert validate({key: value}) == {key: normal}


def test_non_string_values_are_accepted_as_their_text():
    assert validate({"retention.ms": 1000, "remote.storage.enable": True}) == \
        {"retention.ms": "1000", "remote.storage.enable": "true"}


def test_validate_returns_only_the_given_keys():
    assert validate({}) == {}
    assert set(validate({"retention.ms": "1", "segment.ms": "2"})) == {"retention.ms", "segment.ms"}


# ---------------------------------------------------------------- combinations
@pytest.mark.parametrize("overrides, kind", [
    ({"local.retention.ms": "2000", "retention.ms": "1000"}, "ms"),
    ({"local.retention.ms": "-1"}, "ms"),  # unlimited locally, limited in total
    ({"local.retention.bytes": "200", "retention.bytes": "100"}, "bytes"),
    ({"local.retention.bytes": "-1", "retention.bytes": "100"}, "bytes"),
])
def test_local_retention_must_not_exceed_retention(overrides, kind):
    with pytest.raises(InvalidConfig) as e:
        check_combination(overrides)
    msg = str(e.value)
    assert f"must not exceed retention.{kind}=" in msg
    assert f"set it to -2 (same as retention.{kind})" in msg


@pytest.mark.parametrize("overrides", [
    {"local.retention.ms": "1000", "retention.ms": "1000"},
    {"local.retention.ms": "1", "retention.ms": "1000"},
    {"local.retention.ms": "-1", "retention.ms": "-1"},
    {"local.retention.ms": "5000000000000", "retention.ms": "-1"},
    {"local.retention.ms": "-2", "retention.ms": "5"},
    {"local.retention.bytes": "100"},  # retention.bytes defaults to -1 (no limit)
    {"local.retention.bytes": "0", "retention.bytes": "0"},
    {"remote.storage.enable": "true", "cleanup.policy": "delete"},
    {"remote.storage.enable": "false", "cleanup.policy": "compact"},
])
def test_allowed_combinations(overrides):
    check_combination(overrides)


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_remote_storage_on_a_compacted_topic_is_refused(policy):
    with pytest.raises(InvalidConfig, match=f"cleanup.policy={policy} .*use cleanup.policy=delete"):
        check_combination({"remote.storage.enable": "true", "cleanup.policy": policy})


# ---------------------------------------------------------------- the typed view
def test_from_overrides_defaults():
    cfg = TopicConfig.from_overrides({})
    assert cfg.cleanup_policy == "delete"
    assert cfg.compression_type == "producer"
    assert cfg.retention_ms == 604800000
    assert cfg.retention_bytes == -1
    assert cfg.segment_bytes == 1 << 30
    assert cfg.index_interval_bytes == 4096
    assert cfg.min_cleanable_dirty_ratio == 0.5
    assert cfg.remote_storage_enable is False
    assert cfg.remote_storage_uri == ""
    assert cfg.local_retention_ms == cfg.local_retention_bytes == -2
    assert not cfg.compacted


def test_from_overrides_parses_types():
    cfg = TopicConfig.from_overrides({"retention.ms": "1000", "remote.storage.enable": "true",
                                      "min.cleanable.dirty.ratio": "0.1",
                                      "remote.storage.uri": "s3://b/p/"})
    assert cfg.retention_ms == 1000 and isinstance(cfg.retention_ms, int)
    assert cfg.remote_storage_enable is True
    assert cfg.min_cleanable_dirty_ratio == 0.1
    assert cfg.remote_storage_uri == "s3://b/p"


def test_from_overrides_ignores_unknown_keys():
    assert TopicConfig.from_overrides({"no.such.key": "x"}) == TopicConfig.from_overrides({})


def test_from_overrides_with_a_bad_value_raises():
    with pytest.raises(ValueError):
        TopicConfig.from_overrides({"retention.ms": "soon"})


@pytest.mark.parametrize("policy, compacted", [("delete", False), ("compact", True),
                                               ("compact,delete", True)])
def test_compacted(policy, compacted):
    assert TopicConfig.from_overrides({"cleanup.policy": policy}).compacted is compacted


@pytest.mark.parametrize("overrides, local_ms, local_bytes", [
    ({}, 604800000, -1),
    ({"retention.ms": "5000", "retention.bytes": "700"}, 5000, 700),
    ({"retention.ms": "5000", "local.retention.ms": "1000"}, 1000, -1),
    ({"retention.bytes": "700", "local.retention.bytes": "100"}, 604800000, 100),
    ({"retention.ms": "-1", "local.retention.ms": "-1"}, -1, -1),
    ({"local.retention.ms": "0", "local.retention.bytes": "0"}, 0, 0),
])
def test_local_ms_and_local_bytes(overrides, local_ms, local_bytes):
    cfg = TopicConfig.from_overrides(overrides)
    assert (cfg.local_ms, cfg.local_bytes) == (local_ms, local_bytes)


@pytest.mark.parametrize("overrides, bounds", [
    ({}, None),
    ({"message.timestamp.before.max.ms": "1000"}, (1000, INT64_MAX)),
    ({"message.timestamp.after.max.ms": "5"}, (INT64_MAX, 5)),
    # the deprecated key stands in for a bound left at its default, as in Kafka 3.6+
    ({"message.timestamp.difference.max.ms": "700"}, (700, 700)),
    ({"message.timestamp.difference.max.ms": "700", "message.timestamp.after.max.ms": "5"},
     (700, 5)),
    # LogAppendTime: the client's timestamps are replaced, so never checked
    ({"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1"}, None),
])
def test_timestamp_bounds(overrides, bounds):
    cfg = TopicConfig.from_overrides(overrides)
    assert cfg.timestamp_bounds == bounds
    assert cfg.log_append_time is (overrides.get("message.timestamp.type") == "LogAppendTime")


def test_every_key_has_a_kafka_type():
    assert {k.kind for k in KEYS.values()} <= {"boolean", "string", "int", "long", "double",
                                                "list"}
    assert KEYS["cleanup.policy"].kind == "list"
    assert KEYS["retention.ms"].kind == "long"
    assert KEYS["message.timestamp.type"].kind == "string"


def test_every_key_has_a_field():
    fields = set(TopicConfig.__dataclass_fields__)
    assert fields == {k.replace(".", "_") for k in KEYS}


# ---------------------------------------------------------------- listing and parsing
def test_effective_lists_every_key_with_its_source():
    rows = effective({"retention.ms": "1000"})
    assert [r[0] for r in rows] == sorted(KEYS)
    by_key = {k: (v, src) for k, v, src in rows}
    assert by_key["retention.ms"] == ("1000", "topic")
    assert by_key["segment.bytes"] == ("1073741824", "default")
    assert sum(1 for r in rows if r[2] == "topic") == 1


def test_effective_without_overrides_is_all_defaults():
    assert all(src == "default" for _, _, src in effective({}))
    assert {k: v for k, v, _ in effective({})} == {k: key.default for k, key in KEYS.items()}


def test_parse_pairs():
    assert parse_pairs([]) == {}
    assert parse_pairs(["retention.ms=1000", " segment.bytes = 2048 "]) == \
        {"retention.ms": "1000", "segment.bytes": "2048"}
    assert parse_pairs(["remote.storage.uri=s3://b/p?x=1"]) == {"remote.storage.uri": "s3://b/p?x=1"}
    assert parse_pairs(["remote.storage.uri="]) == {"remote.storage.uri": ""}
    assert parse_pairs(["a=1", "a=2"]) == {"a": "2"}  # the last one wins


@pytest.mark.parametrize("pair", ["retention.ms", "=1000", " =1", "", "retention.ms:1000"])
def test_parse_pairs_malformed(pair):
    with pytest.raises(InvalidConfig) as e:
        parse_pairs(["segment.ms=1", pair])
    assert f"config {pair!r} is not in key=value form" in str(e.value)
