"""The registry's state, rebuilt from the ``_schemas`` topic record by record (as Confluent's
``KafkaStoreMessageHandler`` does): the versions of each subject, every id's schema, the
compatibility levels. Only ``apply`` changes it; ``generation`` moves with every change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from .records import Parsed, SchemaValue

DEFAULT_LEVEL = "BACKWARD"


@dataclass(frozen=True)
class IdSchema:
    """What an id stands for: the same for every subject and version that holds it."""

    id: int
    schema_type: str
    schema: str
    references: tuple[tuple[str, str, int], ...]


class View:
    def __init__(self) -> None:
        self.versions: dict[str, dict[int, SchemaValue]] = {}  # subject -> version -> value
        self.ids: dict[int, IdSchema] = {}
        self.holders: dict[int, set[tuple[str, int]]] = {}  # id -> (subject, version)
        self.exact: dict[tuple[str, str, tuple[tuple[str, str, int], ...]], int] = {}
        self.levels: dict[str | None, str] = {}  # None: the global level
        self.max_id = 0
        self.generation = 0

    # ------------------------------------------------------------------ reading
    def live(self, subject: str) -> list[SchemaValue]:
        """The subject's versions not deleted, oldest first."""
        vs = self.versions.get(subject, {})
        return [vs[v] for v in sorted(vs) if not vs[v].deleted]

    def all(self, subject: str) -> list[SchemaValue]:
        vs = self.versions.get(subject, {})
        return [vs[v] for v in sorted(vs)]

    def next_version(self, subject: str) -> int:
        vs = self.versions.get(subject)
        return max(vs) + 1 if vs else 1

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.levels:
            return self.levels[subject]
        return self.levels.get(None, DEFAULT_LEVEL)

    def values(self) -> Iterator[SchemaValue]:
        for vs in self.versions.values():
            yield from vs.values()

    def referrers(self, subject: str, version: int) -> list[SchemaValue]:
        """Live versions whose references name ``subject`` version ``version``."""
        return [v for v in self.values() if not v.deleted
                and any(rs == subject and rv == version for _, rs, rv in v.references)]

    # ------------------------------------------------------------------ changing
    def apply(self, rec: Parsed) -> None:
        if rec.kind == "SCHEMA":
            assert rec.subject is not None and rec.version is not None
            if rec.value is None:
                self._remove(rec.subject, rec.version)
            else:
                self._put(rec.value)
        elif rec.kind == "CONFIG":
            if rec.value is None:
                self.levels.pop(rec.subject, None)
            else:
                self.levels[rec.subject] = str(rec.value).upper()
        elif rec.kind == "DELETE_SUBJECT":
            assert rec.subject is not None and isinstance(rec.value, int)
            for v, sv in list(self.versions.get(rec.subject, {}).items()):
                if v <= rec.value and not sv.deleted:
                    self.versions[rec.subject][v] = replace(sv, deleted=True)
        elif rec.kind == "CLEAR_SUBJECT":
            assert rec.subject is not None
            for v, sv in list(self.versions.get(rec.subject, {}).items()):
                if sv.deleted:
                    self._remove(rec.subject, v)
        else:
            return
        self.generation += 1

    def _put(self, sv: SchemaValue) -> None:
        old = self.versions.get(sv.subject, {}).get(sv.version)
        if old is not None and old.id != sv.id:
            self._unhold(old)
        self.versions.setdefault(sv.subject, {})[sv.version] = sv
        if sv.id not in self.ids:
            self.ids[sv.id] = IdSchema(sv.id, sv.schema_type, sv.schema, sv.references)
            self.exact.setdefault((sv.schema_type, sv.schema, sv.references), sv.id)
        self.holders.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self.max_id = max(self.max_id, sv.id)

    def _remove(self, subject: str, version: int) -> None:
        vs = self.versions.get(subject)
        if not vs or version not in vs:
            return
        sv = vs.pop(version)
        if not vs:
            del self.versions[subject]
        self._unhold(sv)

    def _unhold(self, sv: SchemaValue) -> None:
        held = self.holders.get(sv.id)
        if held is None:
            return
        held.discard((sv.subject, sv.version))
        if not held:  # (no version holds the id any more: the id is gone; max_id stays)
            del self.holders[sv.id]
            ids = self.ids.pop(sv.id)
            key = (ids.schema_type, ids.schema, ids.references)
            if self.exact.get(key) == sv.id:
                del self.exact[key]
