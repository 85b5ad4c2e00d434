"""What ``Engine.maintenance`` and ``Engine.keys`` return: typed rows (dicts at run time: the
commands' ``--json`` prints them as they are, so a key here is a key of the JSON)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..tiering.results import ManifestRow


class SegmentDeleted(TypedDict, total=False):
    """A segment retention deletes (or would: a dry run)."""

    topic: str
    partition: int
    segment: str  # its path, or its cold object's URL
    tier: str  # local, cold
    base_offset: int
    next_offset: int
    bytes: int
    max_timestamp: int
    reason: str  # time, size, log-start
    detail: str
    new_log_start_offset: int


class StartMoved(TypedDict):
    """A partition's log start moved by delete-records (or that would be: a dry run)."""

    topic: str
    partition: int
    prior_log_start_offset: int
    new_log_start_offset: int
    # local segments (base_offset, next_offset, bytes), cold ones (their manifest rows)
    deleted_segments: list[dict[str, Any] | ManifestRow]


class CleanerState(TypedDict):
    """A partition's ``.cleaner`` file: where cleaning got to, and its passes."""

    cleaned_end: int
    passes: list[list[int]]  # [[end offset, time ms], ...]
    min_tombstone: int | None


class CompactionPlan(TypedDict, total=False):
    """What the next compaction pass over a partition cleans, and why not the rest."""

    topic: str
    partition: int
    dir: str
    log_start_offset: int
    cleanable_end: int
    first_dirty: int
    active_base: int
    end_offset: int
    held_by_lag: dict[str, int] | None
    held_by_transaction: dict[str, int] | None
    aborted: list[list[int]]
    aborted_txns: list[list[int]]  # [producer id, first, last, lso] with the marker in range
    markers_kept: list[int]  # last batches of producers in range (a marker there stays)
    clean_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    segments: list[dict[str, Any]]
    groups: list[list[dict[str, Any]]]
    tombstone_bound: int
    cleaner: CleanerState
    skip: str | None


class Explanation(CompactionPlan, total=False):
    """``CompactionPlan`` (without ``groups`` and ``dir``) and the tombstones' horizons."""

    tombstones: dict[str, Any]
    markers: dict[str, int]  # transaction markers: count, removable_now, kept_as_last
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    delete_retention_ms: int
    passes: int
    last_pass: int | None


class CompactionResult(TypedDict, total=False):
    """One partition's pass: its plan, ``skipped`` (why not), or what it did."""

    plan: CompactionPlan
    skipped: str | None
    keys: int
    tombstones_kept: int
    bytes_in: int
    bytes_out: int
    records_in: int
    records_out: int
    tombstones_in: int
    batches_copied: int
    batches_rewritten: int
    markers_in: int  # transaction markers (not counted as records)
    markers_kept: int
    segments_before: int
    segments_after: int


class KeyRange(TypedDict):
    partition: int
    tier: str
    base_offset: int
    next_offset: int
    segments: int
    bytes: int


class KeyUse(TypedDict, total=False):
    """A data key version (or plaintext) and what it covers."""

    version: int
    cipher: str | None
    master_key_id: str | None
    created_ms: int | None
    current: bool
    missing: bool  # a version batches use that the catalog does not hold (damage)
    bytes: int
    segments: int
    ranges: list[KeyRange]


class KeyStatus(TypedDict):
    topic: str
    topic_id: str
    encryption: bool
    cipher: str
    master_key_id: str | None
    current_version: int | None
    keys: list[KeyUse]
    plaintext: KeyUse
    # per partition, the [from, until] offset ranges (until None: to the end) at which it
    # records that every data batch is sealed (engine.segments.sealed_range); [] for none
    sealed_ranges: list[list[list[int | None]]]


class KeyRotated(TypedDict):
    topic: str
    version: int
    cipher: str
    master_key_id: str
    previous_version: int | None


class RewrappedTopic(TypedDict):
    topic: str
    versions: int
    previous_master_key_ids: list[str]


class Rewrapped(TypedDict):
    master_key_id: str
    topics: list[RewrappedTopic]


class ReencryptPartition(TypedDict, total=False):
    partition: int
    rolled: bool  # its active segment was sealed so the pass reaches its newest batches
    local_segments: list[int]  # base offsets planned
    cold_segments: list[int]
    bytes: int
    segments_rewritten: int
    cold_rewritten: int
    batches_rewritten: int
    batches_copied: int
    bytes_written: int
    # from which offset the partition now records every batch sealed (None: no record,
    # with encryption off; engine.segments.sealed_range)
    sealed_from: int | None


class Reencrypted(TypedDict, total=False):
    topic: str
    target_version: int | None
    dry_run: bool
    partitions: list[ReencryptPartition]
    would_drop: list[int]
    metadata_resealed: int
    dropped_versions: list[int]
    kept_versions: list[int]


class MaintenancePass(TypedDict, total=False):
    """One pass of the background maintenance (engine.maintenance.scheduler) over one
    partition: what it did, or why it did not."""

    kind: str  # retention, compaction, tier
    topic: str
    partition: int
    outcome: str  # ok; failed (backs off); busy (another pass held the partition)
    started_ms: int  # when it began, its lock taken (Unix time, ms; else when it was tried)
    seconds: float  # how long it held the lock (else how long it took to find it busy)
    reclaimed_bytes: int
    detail: str  # what it did, or the error
    via: str  # a compaction: "in process" or "spark"
    failures: int  # failed passes of this kind on this partition in a row (0 after a success)
    retry_in_s: float  # a failed pass: the next one waits this long
