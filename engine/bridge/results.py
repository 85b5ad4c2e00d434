"""What the copies return."""

from __future__ import annotations

from typing import TypedDict


class Exported(TypedDict):
    """One ``export_topic`` run: ``positions`` per source partition the next source offset
    the destination's mirror group holds (where a restart resumes)."""

    topic: str
    to_topic: str
    group: str
    created: bool
    records: int
    transactions: int
    positions: dict[int, int]
