"""Engine settings (per process, not per topic), with their units, in one place.

Passed as ``Engine.open(path, settings={...})``; ``sync=False`` is shorthand for
``{"wal.sync": "none"}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidConfig

DEFAULTS: dict[str, str] = {
    # when a produce call returns: "always" = after its WAL bytes are fdatasync'ed (one fsync
    # shared by every thread waiting meanwhile); "interval:<ms>" = a background fsync every
    # <ms> milliseconds (a machine crash loses at most that window); "none" = the OS decides
    "wal.sync": "always",
    "wal.segment.bytes": str(64 << 20),  # bytes per WAL file before rotating
    "checkpoint.interval.bytes": str(64 << 20),  # WAL bytes between checkpoints
    "checkpoint.interval.ms": "60000",  # ms between checkpoints
    # bytes of recently written batches kept in memory for tailing readers (all partitions
    # together); 0 turns the hot tier off
    "hot.max.bytes": str(32 << 20),
    # bytes of cold segments kept in the local read cache (data dir's .tier-cache)
    "tier.cache.max.bytes": str(1 << 30),
    # longest wait for a lock another process holds (a partition's, the catalog's, a group's,
    # the WAL recovery lock) before LockTimeout names the holder; -1 waits for ever. A wait
    # is reported (with the holder's pid) after 3 s, or half this when that is shorter
    "lock.timeout.ms": "30000",
    # count appends, reads, fsyncs... in .stats/ for `rivven metrics` (docs/METRICS.md);
    # false: this engine counts nothing (the data dir's gauges are still read at a scrape)
    "metrics.enabled": "true",
    # most descriptors the engine's partitions keep open: past it the least recently used
    # partitions close their files (reopened on next use; engine.storage.budget). The soft
    # RLIMIT_NOFILE is raised toward the hard one to fit it plus 256 for everything else
    "files.max.open": "4096",
    # (wal.sync=always) a batch of at least this many bytes is written once, straight to
    # its segment, and fdatasynced there instead of in the WAL; smaller ones share the WAL's
    # group fsync. -1: every batch goes through the WAL (docs/DURABILITY.md, "Direct appends")
    "append.direct.bytes": str(64 << 10),
}


@dataclass(frozen=True)
class Settings:
    wal_sync: str
    wal_sync_interval_ms: int
    wal_segment_bytes: int
    checkpoint_bytes: int
    checkpoint_ms: int
    hot_max_bytes: int
    tier_cache_max_bytes: int
    lock_timeout_ms: int = 30000  # -1: no limit
    metrics_enabled: bool = True
    files_max_open: int = 4096
    append_direct_bytes: int = 64 << 10  # -1: never

    @classmethod
    def parse(cls, overrides: dict[str, str] | None) -> Settings:
        values = dict(DEFAULTS)
        for k, v in (overrides or {}).items():
            if k not in DEFAULTS:
                raise InvalidConfig(f"unknown engine setting {k!r}; valid: {', '.join(DEFAULTS)}")
            values[k] = str(v)
        mode = values["wal.sync"].strip().lower()
        interval = 0
        if mode.startswith("interval:"):
            interval = _int("wal.sync", mode.partition(":")[2], 1)
            mode = "interval"
        elif mode not in ("always", "none"):
            raise InvalidConfig(f"invalid wal.sync {values['wal.sync']!r}: use always, "
                                "interval:<ms> or none")
        return cls(mode, interval, _int("wal.segment.bytes", values["wal.segment.bytes"], 4096),
                   _int("checkpoint.interval.bytes", values["checkpoint.interval.bytes"], 1),
                   _int("checkpoint.interval.ms", values["checkpoint.interval.ms"], 1),
                   _int("hot.max.bytes", values["hot.max.bytes"], 0),
                   _int("tier.cache.max.bytes", values["tier.cache.max.bytes"], 0),
                   _lock_timeout(values["lock.timeout.ms"]),
                   _bool("metrics.enabled", values["metrics.enabled"]),
                   _int("files.max.open", values["files.max.open"], 16),
                   _direct(values["append.direct.bytes"]))


    def as_config(self) -> dict[str, str]:
        """Every setting under its name, as text that parses back to it (DEFAULTS' form)."""
        sync = (f"interval:{self.wal_sync_interval_ms}" if self.wal_sync == "interval"
                else self.wal_sync)
        return {"wal.sync": sync, "wal.segment.bytes": str(self.wal_segment_bytes),
                "checkpoint.interval.bytes": str(self.checkpoint_bytes),
                "checkpoint.interval.ms": str(self.checkpoint_ms),
                "hot.max.bytes": str(self.hot_max_bytes),
                "tier.cache.max.bytes": str(self.tier_cache_max_bytes),
                "lock.timeout.ms": str(self.lock_timeout_ms),
                "metrics.enabled": str(self.metrics_enabled).lower(),
                "files.max.open": str(self.files_max_open),
                "append.direct.bytes": str(self.append_direct_bytes)}


    def describe(self) -> list[tuple[str, str, str]]:
        """``(name, value, default)`` of every setting (values as ``as_config`` gives them)."""
        return [(k, v, DEFAULTS[k]) for k, v in self.as_config().items()]


def _bool(name: str, text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise InvalidConfig(f"invalid {name} {text!r}: use true or false")
    return v == "true"


def _direct(text: str) -> int:
    return _or_minus_one("append.direct.bytes", text, 0,
                         "(bytes), or -1 to log every batch in the WAL")


def _lock_timeout(text: str) -> int:
    return _or_minus_one("lock.timeout.ms", text, 1, "(milliseconds), or -1 to wait for ever")


def _or_minus_one(name: str, text: str, lo: int, meaning: str) -> int:
    """An integer >= ``lo``, or -1 (its ``meaning`` says what each is)."""
    if text.strip() == "-1":
        return -1
    try:
        return _int(name, text, lo)
    except InvalidConfig:
        raise InvalidConfig(f"invalid {name} {text!r}: must be an integer >= {lo} "
                            f"{meaning}") from None


def _int(name: str, text: str, lo: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise InvalidConfig(f"invalid {name} {text!r}: must be an integer >= {lo}") from None
    if v < lo:
        raise InvalidConfig(f"invalid {name} {text!r}: must be an integer >= {lo}")
    return v
