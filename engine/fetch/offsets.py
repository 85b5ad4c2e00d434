"""``Offsets`` (``Engine.offsets``): where a topic's partitions start and end (the last stable
offset for read_committed), the first offset at a time, the offset a ``Position`` names —
Kafka's ListOffsets. ``list_offsets`` is the one implementation; the others are views of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import UnknownTopic
from ..storage.finder import LogFinder
from .results import OffsetsRow, StableView

if TYPE_CHECKING:
    from .positions import Position

# (txn.isolation's: the read path below is imported on first use, so that listing topics
# with ``unopened`` imports nothing of engine.txn)
READ_UNCOMMITTED = "read_uncommitted"


class Offsets:
    def __init__(self, find: LogFinder) -> None:
        self.find = find

    def list_offsets(self, topic: str, at: Position | None = None,
                     isolation_level: str = READ_UNCOMMITTED,
                     partitions: Sequence[int] | None = None) -> list[OffsetsRow]:
        """Per partition (of ``partitions``, default all): ``start_offset`` and
        ``end_offset`` (read_committed: the last stable offset is the end), and with ``at``
        the ``offset`` it names (``past_end``; a time's ``timestamp``)."""
        from ..txn import isolation
        from . import positions

        committed = isolation.check_level(isolation_level)
        return positions.list_offsets(self.find.logs(topic, partitions), at, committed)

    def end(self, topic: str, isolation_level: str = READ_UNCOMMITTED) -> dict[int, int]:
        """Per partition, the log end offset (the next offset written); with
        ``isolation_level="read_committed"`` the last stable offset."""
        return {r["partition"]: r["end_offset"] for r in self.list_offsets(topic, None, isolation_level)}

    def start(self, topic: str) -> dict[int, int]:
        """Per partition, the log start offset."""
        return {r["partition"]: r["start_offset"] for r in self.list_offsets(topic)}

    def of_partition(self, topic: str, partition: int,
                     isolation_level: str = READ_UNCOMMITTED) -> tuple[int, int]:
        """(log start offset, log end offset) of one partition (read_committed: the end is
        the last stable offset)."""
        (r,) = self.list_offsets(topic, None, isolation_level, [partition])
        return r["start_offset"], r["end_offset"]

    def unopened(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition ``(log start, log end)`` read cheaply: the partitions the engine
        has open as they are, the others from their files without opening them (``rivven
        topic list`` on 10,000 partitions)."""
        return self.find.partitions.offsets(self.find.topic(topic))

    def of_topic(self, topic: str) -> dict[int, tuple[int, int]] | None:
        """Per partition (log start, log end); None when there is no such topic."""
        try:
            return {r["partition"]: (r["start_offset"], r["end_offset"]) for r in self.list_offsets(topic)}
        except UnknownTopic:
            return None

    def for_time(self, topic: str, partition: int, timestamp: int,
                 isolation_level: str = READ_UNCOMMITTED) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (None if none is),
        cold segments included (read_committed: below the last stable offset only)."""
        from ..txn import isolation
        from . import positions

        committed = isolation.check_level(isolation_level)
        return positions.offset_for_time(self.find.partition(topic, partition), timestamp,
                                         committed)

    def resolve(self, topic: str, partition: int, position: Position) -> int:
        """The offset a ``Position`` (beginning, end, offset N, from_end N, timestamp T) names
        in a partition, inside its [log start, log end]."""
        from . import positions

        return positions.resolve(self.find.partition(topic, partition), position)

    def stable_view(self, topic: str, partitions: Sequence[int] | None = None
                    ) -> dict[int, StableView]:
        """Per partition what read_committed sees: ``last_stable_offset`` and ``aborted``, the
        aborted transactions with data between the log start and it, as ``[[producer id,
        first offset, last offset]...]`` (the Spark reader's filter)."""
        from ..txn import isolation

        out: dict[int, StableView] = {}
        for log in self.find.logs(topic, partitions):
            lso, aborted = isolation.view(log, log.offsets()[0])
            out[log.partition] = {"last_stable_offset": lso, "aborted": aborted.ranges()}
        return out
