"""What ``Engine.groups`` returns: typed rows (dicts at run time: ``rivven group ... --json``
prints them as they are, so a key here is a key of the JSON)."""

from __future__ import annotations

from typing import Any, TypedDict


class GroupPartition(TypedDict):
    """A partition the group reads or has committed (``describe``)."""

    topic: str
    partition: int
    current_offset: int | None  # the committed offset (None: none yet)
    log_start_offset: int | None  # None: the topic is gone
    log_end_offset: int | None
    lag: int | None
    last_commit: int | None  # ms
    metadata: str | None  # the commit's metadata (None: none, or sealed without its key)
    metadata_encrypted: bool
    consumer: str | None  # the member id holding its lease


class GroupMember(TypedDict):
    member_id: Any
    client_id: Any
    host: Any
    pid: Any
    topics: Any
    joined: Any  # ms
    assignment: list[dict[str, Any]]  # {"topic", "partition"} the member holds


class GroupLive(TypedDict):
    """Who reads a group now (``live``)."""

    group: str
    kind: str | None  # "rivven" (native consumers), "kafka" (rivven serve's clients), None
    state: str  # Empty, Active (native), or a Kafka group's: Stable, PreparingRebalance, ...
    protocol: str | None  # the assignor (a Kafka group's protocol name; None: not chosen yet)
    server_pid: int | None  # the rivven serve coordinating a Kafka-protocol group
    members: list[GroupMember]


class CommittedOffset(TypedDict):
    offset: int
    metadata: str | None  # None: sealed (an encrypted topic's) and its key not at hand
    timestamp: int  # commit time, ms


class GroupDescription(TypedDict):
    group: str
    state: str  # Active (live native members), Empty, or a Kafka-protocol group's state
    members: list[GroupMember]
    partitions: list[GroupPartition]
    total_lag: int


class GroupState(TypedDict):
    """One line about a group (``describe --state``, a row of ``list``)."""

    group: str
    state: str
    assignment_strategy: str
    members: int
    topics: list[str]
    total_lag: int


class ResetRow(TypedDict):
    topic: str
    partition: int
    prior: int | None  # the committed offset before
    new: int  # the offset set (requested, clamped into the log)
    requested: int
    clamped: bool
    log_start_offset: int
    log_end_offset: int


class ResetPlan(TypedDict):
    group: str
    mode: str
    executed: bool
    new_group: bool  # it had no offsets: the reset sets them up
    active_members: int
    skipped_topics: list[str]  # left out: no committed offset there (new_topics=False)
    partitions: list[ResetRow]


class GroupRemoved(TypedDict):
    group: str
    deleted_offsets: int | None  # None: its offsets log was damaged


class GroupOffsetsDeleted(TypedDict):
    group: str
    topic: str
    partitions: list[int]
