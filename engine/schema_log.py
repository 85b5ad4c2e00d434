"""The ``_schemas`` topic as ``engine.schemas.registry.SchemaLog``: the registry reads and
appends through the engine's public paths (the WAL makes an append durable before it
returns), so it knows nothing of the engine above its layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import OffsetOutOfRange, UnknownTopic
from .format.records import Record
from .schemas.records import TOPIC

if TYPE_CHECKING:
    from .engine import Engine

CONFIG = {"cleanup.policy": "compact"}


class EngineSchemaLog:
    def __init__(self, eng: Engine) -> None:
        self._eng = eng

    def end(self) -> int:
        try:
            return self._eng.offsets.end(TOPIC).get(0, 0)
        except UnknownTopic:
            return 0

    def read(self, offset: int, max_records: int) -> list[tuple[int, bytes | None, bytes | None]]:
        try:
            recs = self._eng.read(TOPIC, 0, offset, max_records)
        except UnknownTopic:
            return []
        except OffsetOutOfRange as e:
            if e.start is None or offset >= e.start:
                return []
            recs = self._eng.read(TOPIC, 0, e.start, max_records)
        return [(r.offset, r.key, r.value) for r in recs if r.offset is not None]

    def append(self, recs: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._eng.create_topic(TOPIC, 1, dict(CONFIG), if_not_exists=True)
        self._eng.produce(TOPIC, [Record(key=k, value=v) for k, v in recs], partition=0)
