"""What the copies return."""

from __future__ import annotations

from typing import TypedDict


class PartitionCopied(TypedDict):
    """One partition of a copy: where it stands in the source (``position``: the next source
    offset to copy, what the mirror group holds), the end it copies to (``end``; with
    ``--follow`` the last seen) and the records copied by this run."""

    topic: str
    partition: int
    to_topic: str
    position: int
    end: int
    lag: int
    records: int


class Copied(TypedDict):
    """One run of a copy (``rivven kafka export`` or ``import``)."""

    direction: str  # export | import
    name: str
    group: str
    transactional_id: str | None  # None: --at-least-once
    exactly_once: bool
    created: list[str]  # destination topics this run created
    records: int
    bytes: int
    transactions: int
    seconds: float
    warnings: list[str]
    partitions: list[PartitionCopied]
