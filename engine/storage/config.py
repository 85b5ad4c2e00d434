"""Topic configuration: every key, its type, default, bounds and meaning, in one table.

Values are stored as strings (like Kafka) and validated on the way in; ``TopicConfig`` is the
typed view the engine reads. Durations are milliseconds, sizes are bytes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..crypto.ciphers import CIPHERS
from ..crypto.keyring import KEY_ID, KEY_ID_RULE
from ..errors import InvalidConfig
from ..format.codecs import NAMES as CODEC_NAMES

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Key:
    name: str
    default: str
    doc: str
    parse: Callable[[str], object]
    # its type as Kafka's ConfigDef names it (DescribeConfigs' config type): boolean, string,
    # int, long, double or list
    kind: str = "string"


def _int(lo: int, hi: int, allow_minus_one: bool = False) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text.strip())
        except ValueError:
            raise ValueError(f"must be an integer between {lo} and {hi}") from None
        if allow_minus_one and v == -1:
            return v
        if not lo <= v <= hi:
            extra = " (or -1 for unlimited)" if allow_minus_one else ""
            raise ValueError(f"must be between {lo} and {hi}{extra}")
        return v

    return parse


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError("must be a number between 0 and 1") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError("must be between 0 and 1")
    return v


def _policy(text: str) -> str:
    parts = sorted({p.strip().lower() for p in text.split(",") if p.strip()})
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("must be delete, compact or compact,delete")
    return ",".join(parts)


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("must be true or false")
    return v == "true"


def _local(text: str) -> int:
    try:
        v = int(text.strip())
    except ValueError:
        raise ValueError("must be an integer: -2 (same as retention), -1 (unlimited) or >= 0"
                         ) from None
    if v < -2:
        raise ValueError("must be -2 (same as retention), -1 (unlimited) or >= 0")
    return v


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*://.+")


def _uri(text: str) -> str:
    v = text.strip()
    if v and not _SCHEME.fullmatch(v):
        raise ValueError("must be a URI such as file:///mnt/cold, s3://bucket/prefix (or empty "
                         "for file://<data dir>/cold)")
    while v.endswith("/") and not v.endswith(":///") and not v.endswith("://"):
        v = v[:-1]
    return v


def _compression(text: str) -> str:
    v = text.strip().lower()
    if v == "uncompressed":
        v = "none"
    if v != "producer" and v not in CODEC_NAMES:
        raise ValueError(f"must be one of producer, {', '.join(CODEC_NAMES)}")
    return v


def _timestamp_type(text: str) -> str:
    v = {"createtime": "CreateTime", "logappendtime": "LogAppendTime"}.get(text.strip().lower())
    if v is None:
        raise ValueError("must be CreateTime or LogAppendTime")
    return v


def _key_id(text: str) -> str:
    v = text.strip()
    if v and not KEY_ID.fullmatch(v):
        raise ValueError(f"must be a master key id of the keyring: {KEY_ID_RULE}")
    return v


def _cipher(text: str) -> str:
    v = text.strip().lower()
    if v not in CIPHERS:
        raise ValueError(f"must be one of {', '.join(CIPHERS)}")
    return v


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("cleanup.policy", "delete", "delete (retention), compact, or compact,delete", _policy, kind="list"),
    Key("compression.type", "producer",
        "codec for new batches: producer (the call's choice, else none), none, gzip, snappy, lz4, zstd",
        _compression),
    Key("delete.retention.ms", "86400000",
        "how long a tombstone survives compaction after the pass that first kept it",
        _int(0, INT64_MAX), kind="long"),
    Key("encryption.cipher", "aes-256-gcm",
        "cipher of new batches: aes-256-gcm or chacha20-poly1305 (a change makes a new data key)",
        _cipher),
    Key("encryption.enable", "false",
        "encrypt new batches at rest (old ones: rivven key reencrypt); needs encryption.key.id",
        _bool, kind="boolean"),
    Key("encryption.key.id", "",
        "id of the keyring's master key that wraps the topic's data keys (a change rewraps them)",
        _key_id),
    Key("index.interval.bytes", "4096", "bytes of log between two offset/time index entries",
        _int(0, INT32_MAX), kind="int"),
    Key("local.retention.bytes", "-2",
        "local (warm) bytes kept before old segments move to the cold store; -2: retention.bytes",
        _local, kind="long"),
    Key("local.retention.ms", "-2",
        "age after which segments move to the cold store; -2: retention.ms", _local, kind="long"),
    Key("max.message.bytes", "1048576", "largest record batch accepted, in bytes",
        _int(128, INT32_MAX - 1024), kind="int"),
    Key("message.timestamp.after.max.ms", str(INT64_MAX),
        "how far past the append time a CreateTime record's timestamp may be (a later one: the "
        "batch is refused, INVALID_TIMESTAMP)", _int(0, INT64_MAX), kind="long"),
    Key("message.timestamp.before.max.ms", str(INT64_MAX),
        "how far before the append time a CreateTime record's timestamp may be (an earlier "
        "one: the batch is refused, INVALID_TIMESTAMP)", _int(0, INT64_MAX), kind="long"),
    Key("message.timestamp.difference.max.ms", str(INT64_MAX),
        "deprecated (as in Kafka): both of the above when they are left at their default",
        _int(0, INT64_MAX), kind="long"),
    Key("message.timestamp.type", "CreateTime",
        "CreateTime (the producer's timestamps) or LogAppendTime (every record stamped with "
        "the time it is appended)", _timestamp_type),
    Key("min.cleanable.dirty.ratio", "0.5",
        "dirty share of a log below which compaction skips it", _ratio, kind="double"),
    Key("min.compaction.lag.ms", "0", "records younger than this are never compacted",
        _int(0, INT64_MAX), kind="long"),
    Key("producer.id.expiration.ms", "86400000",
        "how long a producer's sequence state is kept after its last batch (duplicates of "
        "older retries are stored again)", _int(1, INT64_MAX), kind="long"),
    Key("remote.storage.enable", "false",
        "tier old segments to the cold store (rivven spark tier)", _bool, kind="boolean"),
    Key("remote.storage.uri", "",
        "fsspec URI of the cold store; empty: file://<data dir>/cold", _uri),
    Key("retention.bytes", "-1", "size above which old segments are deleted (-1: no limit)",
        _int(0, INT64_MAX, allow_minus_one=True), kind="long"),
    Key("retention.ms", "604800000", "age after which old segments are deleted (-1: forever)",
        _int(0, INT64_MAX, allow_minus_one=True), kind="long"),
    Key("segment.bytes", "1073741824", "size at which the active segment is rolled",
        _int(128, INT32_MAX), kind="int"),
    Key("segment.index.bytes", "10485760", "size of an offset index before the segment rolls",
        _int(64, INT32_MAX), kind="int"),
    Key("segment.ms", "604800000", "age at which the active segment is rolled",
        _int(1, INT64_MAX), kind="long"),
)}


def validate(updates: dict[str, str]) -> dict[str, str]:
    """Check keys and values; returns the normalized string values. Raises InvalidConfig."""
    out: dict[str, str] = {}
    for k, v in updates.items():
        key = KEYS.get(k)
        if key is None:
            hint = difflib.get_close_matches(k, KEYS, n=1)
            more = f" (did you mean {hint[0]}?)" if hint else ""
            raise InvalidConfig(
                f"unknown topic config {k!r}{more}; valid keys: {', '.join(sorted(KEYS))}"
            )
        try:
            parsed = key.parse(str(v))
        except ValueError as e:
            raise InvalidConfig(f"invalid value {str(v)!r} for {k}: {e}") from None
        out[k] = str(parsed).lower() if isinstance(parsed, bool) else str(parsed)
    return out


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` (CLI form) to a dict; raises InvalidConfig on a malformed pair."""
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise InvalidConfig(f"config {p!r} is not in key=value form, e.g. retention.ms=86400000")
        out[k.strip()] = v.strip()
    return out


@dataclass(frozen=True)
class TopicConfig:
    cleanup_policy: str
    compression_type: str
    delete_retention_ms: int
    encryption_cipher: str
    encryption_enable: bool
    encryption_key_id: str
    index_interval_bytes: int
    local_retention_bytes: int
    local_retention_ms: int
    max_message_bytes: int
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    producer_id_expiration_ms: int
    remote_storage_enable: bool
    remote_storage_uri: str
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_ms: int

    @classmethod
    def from_overrides(cls, overrides: dict[str, str]) -> TopicConfig:
        values = {}
        for name, key in KEYS.items():
            values[name.replace(".", "_")] = key.parse(overrides.get(name, key.default))
        return cls(**values)  # type: ignore[arg-type]

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """Every record is stamped with its append time (message.timestamp.type)."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_bounds(self) -> tuple[int, int] | None:
        """``(before, after)``: how far a CreateTime record's timestamp may be before and
        after the append time, or None when unbounded (the defaults) or LogAppendTime. As in
        Kafka, message.timestamp.difference.max.ms stands in for a bound left at default."""
        if self.log_append_time:
            return None
        diff = self.message_timestamp_difference_max_ms
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        before = diff if before == INT64_MAX else before
        after = diff if after == INT64_MAX else after
        return None if before == after == INT64_MAX else (before, after)

    @property
    def local_ms(self) -> int:
        """Effective local retention by time (-1: unlimited)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_bytes(self) -> int:
        """Effective local retention by size (-1: unlimited)."""
        return (self.retention_bytes if self.local_retention_bytes == -2
                else self.local_retention_bytes)


def check_combination(overrides: dict[str, str]) -> None:
    """Rules between keys (Kafka's, KIP-405): local retention within total retention, and
    remote storage not on compacted topics. Raises InvalidConfig."""
    cfg = TopicConfig.from_overrides(overrides)
    for kind, local, total in (("ms", cfg.local_retention_ms, cfg.retention_ms),
                               ("bytes", cfg.local_retention_bytes, cfg.retention_bytes)):
        if local == -2 or total == -1:
            continue
        if local == -1 or local > total:
            raise InvalidConfig(
                f"local.retention.{kind}={local} must not exceed retention.{kind}={total}: "
                f"lower local.retention.{kind} or set it to -2 (same as retention.{kind})")
    if cfg.remote_storage_enable and cfg.compacted:
        raise InvalidConfig("remote.storage.enable=true cannot be combined with cleanup.policy="
                            f"{cfg.cleanup_policy} (as in Kafka): use cleanup.policy=delete")
    if cfg.encryption_enable and not cfg.encryption_key_id:
        raise InvalidConfig("encryption.enable=true needs encryption.key.id: the id of the "
                            "keyring's master key that wraps the topic's data keys (e.g. "
                            "--config encryption.key.id=k1)")


def effective(overrides: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(key, value, source)`` for every key, source being ``topic`` or ``default``."""
    return [(k, overrides.get(k, key.default), "topic" if k in overrides else "default")
            for k, key in sorted(KEYS.items())]
