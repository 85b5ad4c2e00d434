"""What ``Engine.segments`` (and ``Engine.describe_topic``) return: typed rows (dicts at run
time: ``rivven segment ... --json`` prints them as they are, so a key here is a key of the
JSON)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..tiering.results import ColdReport


class SegmentRow(TypedDict, total=False):
    """A segment, cold ones first (``segment list``)."""

    partition: int
    tier: str  # local, cold
    file: str
    base_offset: int
    last_offset: int | None
    records: int | None  # None: a cold segment (not read)
    bytes: int
    min_timestamp: int | None
    max_timestamp: int | None
    damage: str | None  # a local segment whose headers could not all be read


class VerifyReport(TypedDict, total=False):
    segments: int
    batches: int
    records: int
    bytes: int
    ok: bool
    findings: list[dict[str, Any]]
    # offsets a repair cut out (``.gaps``): path of the segment, first, last, time_ms, reason
    known_gaps: list[dict[str, Any]]
    cold: ColdReport  # with cold=True: the cold copies checked


class CutOut(TypedDict):
    """A damaged batch a repair cuts out of its segment (an intact batch follows it): the
    bytes ``[position, end)`` and the offsets ``first`` .. ``last`` between the intact batches
    around it (None when unknown), ``records`` as its damaged header says (0: unknown)."""

    position: int
    end: int
    bytes: int
    first: int | None
    last: int | None
    offsets: int
    records: int
    reason: str


class SegmentRepair(TypedDict, total=False):
    """What recovering one segment does (or would: a dry run). ``truncate_at`` cuts the file
    there (a torn tail, or damage nothing intact follows), and the counts (bytes, records,
    batches, offsets removed, ``offset_range``) are that cut's; ``cut_out`` removes damaged
    batches from inside it, each counted in its own row.
    ``recorded_gaps`` are the offsets it leaves missing that ``.gaps`` records (``by``:
    cut-out, or truncate for a sealed segment cut short)."""

    path: str
    size: int
    truncate_at: int | None
    bytes_removed: int
    records_removed: int
    batches_removed: int
    incomplete_batch: bool
    offsets_removed: int
    offset_range: list[int] | None
    end_offset: int | None
    sealed: bool
    holes: list[dict[str, int]]
    cut_out: list[CutOut]
    recorded_gaps: list[dict[str, Any]]
    needs_confirmation: bool
    unrepaired: list[dict[str, Any]]
    reindexed: bool


class Reindexed(TypedDict):
    path: str
    index_entries: int
    timeindex_entries: int
    valid_bytes: int


class PartitionInfo(TypedDict):
    partition: int
    start_offset: int
    end_offset: int
    segments: int
    bytes: int


class ConfigEntry(TypedDict):
    key: str
    value: str
    source: str  # topic, default


class TopicDescription(TypedDict):
    topic: str
    id: str
    partitions: int
    config: list[ConfigEntry]
    partition_info: list[PartitionInfo]
