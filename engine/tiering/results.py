"""What the tiering calls of ``Engine.maintenance`` return: typed rows (dicts at run time:
``rivven tier ... --json`` prints them as they are, so a key here is a key of the JSON)."""

from __future__ import annotations

from typing import Any, TypedDict


class ManifestRow(TypedDict):
    base_offset: int
    next_offset: int
    bytes: int
    crc32c: int
    object: str


class TierPartition(TypedDict, total=False):
    topic: str
    partition: int
    planned: list[dict[str, Any]]
    already_cold: list[dict[str, Any]]
    orphans_removed: list[str]
    uploaded: list[ManifestRow]
    local_deleted: list[dict[str, Any]]
    bytes: int


class TierRun(TypedDict, total=False):
    dry_run: bool
    partitions: list[TierPartition]
    tasks: int
    plan_bytes: int
    copy_s: float
    seconds: float


class TierStatus(TypedDict):
    """Where a partition's offsets live."""

    topic: str
    partition: int
    log_start_offset: int
    end_offset: int
    cold_segments: int
    cold_start_offset: int | None
    cold_end_offset: int | None
    cold_bytes: int
    local_segments: int
    local_start_offset: int
    local_end_offset: int
    local_bytes: int
    hot_bytes: int
    hot_hits: int
    hot_misses: int
    hot_hit_rate: float | None
    last_upload_ms: int | None


class ColdCheck(TypedDict):
    """A partition's cold copies read back and checked."""

    topic: str
    partition: int
    segments: int
    bytes: int
    findings: list[dict[str, Any]]


class ColdReport(TypedDict):
    """The cold copies of some partitions checked against their tier manifests
    (``segment verify --cold``), and this process's cold cache."""

    segments: int
    objects: int
    bytes: int
    cached: int  # cached copies checked
    findings: list[dict[str, Any]]  # {"object", "base_offset", "problem"}


class Restored(TypedDict):
    topic: str
    partition: int
    from_offset: int
    dry_run: bool
    segments: list[ManifestRow]  # the cold segments brought back (or that would be)
    bytes: int
