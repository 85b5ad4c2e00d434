"""What the read path's offset calls return (``Engine.list_offsets``; ``rivven offsets
--json`` prints the rows as they are)."""

from __future__ import annotations

from typing import TypedDict


class OffsetsRow(TypedDict, total=False):
    partition: int
    start_offset: int
    end_offset: int  # read_committed: the last stable offset
    offset: int  # the offset a position names (with ``at``)
    past_end: bool  # the position lies past the end of the log
    timestamp: int  # the time asked for (a timestamp position)


class StableView(TypedDict):
    """What read_committed sees of a partition (the Spark reader's filter)."""

    last_stable_offset: int
    aborted: list[list[int]]  # [[producer id, first offset, last offset], ...]
