"""engine.settings: per-process engine settings and their checks."""

import pytest

from engine.errors import InvalidConfig
from engine.settings import DEFAULTS, Settings


def test_defaults():
    s = Settings.parse(None)
    assert s.wal_sync == "always"
    assert s.wal_sync_interval_ms == 0
    assert s.wal_segment_bytes == 64 << 20
    assert s.checkpoint_bytes == 64 << 20
    assert s.checkpoint_ms == 60000
    assert s.hot_max_bytes == 32 << 20
    assert s.tier_cache_max_bytes == 1 << 30
    assert Settings.parse({}) == s


def test_parse_does_not_change_the_defaults():
    before = dict(DEFAULTS)
    Settings.parse({"wal.sync": "none", "hot.max.bytes": "0"})
    assert DEFAULTS == before
    assert Settings.parse(None).wal_sync == "always"


@pytest.mark.parametrize("text, mode, interval", [
    ("always", "always", 0),
    ("none", "none", 0),
    ("NONE", "none", 0),
    (" Always ", "always", 0),
    ("interval:250", "interval", 250),
    ("interval:1", "interval", 1),
    ("Interval:1000", "interval", 1000),
])
def test_wal_sync_modes(text, mode, interval):
    s = Settings.parse({"wal.sync": text})
    assert (s.wal_sync, s.wal_sync_interval_ms) == (mode, interval)


@pytest.mark.parametrize("text", ["sometimes", "", "interval", "fsync", "always,none"])
def test_bad_wal_sync_modes(text):
    with pytest.raises(InvalidConfig, match=r"invalid wal.sync .*use always, interval:<ms> or none"):
        Settings.parse({"wal.sync": text})


@pytest.mark.parametrize("text", ["interval:0", "interval:-5", "interval:", "interval:fast",
                                  "interval:1.5"])
def test_bad_wal_sync_intervals(text):
    with pytest.raises(InvalidConfig, match="invalid wal.sync .*must be an integer >= 1"):
        Settings.parse({"wal.sync": text})


@pytest.mark.parametrize("key, value, field", [
    ("wal.segment.bytes", "4096", "wal_segment_bytes"),
    ("wal.segment.bytes", 1 << 30, "wal_segment_bytes"),
    ("checkpoint.interval.bytes", "1", "checkpoint_bytes"),
    ("checkpoint.interval.ms", "10", "checkpoint_ms"),
    ("hot.max.bytes", "0", "hot_max_bytes"),
    ("tier.cache.max.bytes", "0", "tier_cache_max_bytes"),
    ("tier.cache.max.bytes", " 77 ", "tier_cache_max_bytes"),
])
def test_integer_settings(key, value, field):
    assert getattr(Settings.parse({key: value}), field) == int(str(value))


@pytest.mark.parametrize("key, value, lo", [
    ("wal.segment.bytes", "4095", 4096),
    ("wal.segment.bytes", "64MB", 4096),
    ("checkpoint.interval.bytes", "0", 1),
    ("checkpoint.interval.ms", "-1", 1),
    ("checkpoint.interval.ms", "1e3", 1),
    ("hot.max.bytes", "-1", 0),
    ("tier.cache.max.bytes", "", 0),
])
def test_bad_integer_settings(key, value, lo):
    with pytest.raises(InvalidConfig) as e:
        Settings.parse({key: value})
    assert str(e.value) == f"invalid {key} {value!r}: must be an integer >= {lo}"


@pytest.mark.parametrize("key", ["wal_sync", "sync", "hot.max_bytes", "retention.ms"])
def test_unknown_settings(key):
    with pytest.raises(InvalidConfig) as e:
        Settings.parse({key: "1"})
    msg = str(e.value)
    assert f"unknown engine setting {key!r}" in msg
    assert "wal.sync" in msg and "tier.cache.max.bytes" in msg


def test_settings_are_frozen():
    s = Settings.parse(None)
    with pytest.raises(AttributeError):
        s.wal_sync = "none"


def test_as_config_names_every_setting_and_parses_back():
    assert Settings.parse({}).as_config() == DEFAULTS
    given = {"wal.sync": "interval:250", "lock.timeout.ms": "-1", "metrics.enabled": "false",
             "hot.max.bytes": "0"}
    st = Settings.parse(given)
    assert st.as_config() == {**DEFAULTS, **given}
    assert Settings.parse(st.as_config()) == st


def test_describe_pairs_each_value_with_its_default():
    rows = Settings.parse({"hot.max.bytes": "0"}).describe()
    assert [r[0] for r in rows] == list(DEFAULTS)
    assert {k: (v, d) for k, v, d in rows}["hot.max.bytes"] == ("0", DEFAULTS["hot.max.bytes"])
    assert sum(v != d for _, v, d in rows) == 1
