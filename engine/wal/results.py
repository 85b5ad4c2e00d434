"""What ``Engine.recovery`` returns: typed rows (dicts at run time: ``rivven wal ... --json``
prints them as they are, so a key here is a key of the JSON)."""

from __future__ import annotations

from typing import Any, TypedDict


class TornTailFound(TypedDict):
    """A dead stream's file whose records end before the file does (a replay found it)."""

    file: str
    position: int
    bytes: int
    reason: str
    incomplete: bool  # an unfinished write (routine after a crash), not damaged bytes


class PartitionReplayed(TypedDict):
    topic: str
    partition: int
    applied: int  # batches put back into the segments (a dry run: that would be)
    skipped: int  # already in the log
    dropped: int  # past a hole (never applied)


class ReplayReport(TypedDict, total=False):
    """A replay of the dead streams (``replay``); what a writable open ran (``at_open``) is
    this report, or ``deferred`` alone (a full disk: the replay waits for the next open)."""

    streams: list[str]  # the dead streams' folders
    partitions: list[PartitionReplayed]
    applied: int
    skipped: int
    dropped: int
    torn_tails: list[TornTailFound]
    kept: bool  # a full disk: the streams stay (replayed again by a later open)
    deferred: str


class TailCut(TypedDict):
    """A cut of a dead stream's file (``cut_tails``; a dry run: that would be)."""

    file: str
    truncate_at: int
    bytes_removed: int
    reason: str
    incomplete: bool
    damaged_record: bool  # a damaged record (and what follows it), not an unfinished write
    records_after: int  # records with an intact frame after it, dropped with it


class StreamInfo(TypedDict):
    stream: str  # the folder's name (its process's pid in it)
    path: str
    live: bool
    files: int
    bytes: int  # up to where the records end
    records: int
    partitions: list[str]  # "topic-partition"
    torn_tail: dict[str, Any] | None  # file, position, reason


class Checkpointed(TypedDict, total=False):
    """A partition checkpointed: the recovery point written (its ``.checkpoint``), or
    ``not_written`` (``checkpoint_all`` on a full disk: the segment synced, its point not
    written)."""

    topic: str
    partition: int
    segment: int  # the active segment's base offset
    position: int
    recovery_point: int
    log_start_offset: int
    not_written: str


class CheckpointedAll(TypedDict):
    replayed: ReplayReport
    checkpoints: list[Checkpointed]


class Repair(TypedDict, total=False):
    """What opening a partition mended or set aside (``repairs``): ``action`` "cut", a
    damaged segment tail cut (``file, position, bytes, reason``), or "ignored", a damaged
    metadata file not acted on (``file, reason``)."""

    action: str
    file: str
    position: int
    bytes: int
    reason: str
