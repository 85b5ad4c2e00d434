"""``Registry`` (``Engine.schemas``): the operations of Confluent's REST API over the data
dir's ``_schemas`` topic. Every answer is Confluent's response JSON; every refusal a
``RegistryError`` with Confluent's code and message.

Writers in every process take the same flock (``schemas/lock``), read the topic to its end,
decide, append (durable before the call returns) and read their record back: so an id is
given once, to one schema, whichever process asks. ``schemas/ids`` keeps the highest id
ever given (a hard delete's tombstone may later be compacted away, yet its id stays used).
Readers follow other processes' appends by reading on from where they stopped."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from ..fs import jsondoc
from ..fs.durable import write_atomic
from ..fs.guard import make_dir
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path
from . import records
from .arguments import (
    Refs,
    check_level,
    check_refs,
    check_schema,
    check_subject,
    check_type,
    check_version,
)
from .errors import (
    IncompatibleSchema,
    InvalidSchema,
    ReferenceExists,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from .kinds import Parsed, Reference, parse
from .records import SchemaValue
from .serde import Deserializer, Serializer
from .view import View

READ_BATCH = 5000


class SchemaLog(Protocol):
    """The ``_schemas`` topic, as the façade hands it over."""

    def end(self) -> int:
        """The next offset (0 when the topic does not exist)."""
        ...

    def read(self, offset: int, max_records: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """``(offset, key, value)`` from ``offset`` on (from the log start when ``offset``
        is below it)."""
        ...

    def append(self, recs: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append to the topic (made first: one partition, compacted), durable on return."""
        ...


class Registry:
    def __init__(self, log: SchemaLog, state_dir: str, writable: Callable[[], None],
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self._log = log
        self._dir = state_dir
        self._writable = writable
        self._lock_wait = lock_wait
        self._view = View()
        self._next = 0  # the next offset to read
        self._mu = threading.RLock()  # the view, and reading the topic into it
        self._wmu = threading.Lock()  # this process's writers (the flock is per description)
        self._parsed: dict[int, Parsed] = {}
        self._canon: dict[int, str] = {}
        self._read_at = 0.0
        self.refresh()

    # ------------------------------------------------------------------ following
    @property
    def generation(self) -> int:
        """Moves whenever the view changes (a cache of answers is good while it stays)."""
        return self._view.generation

    def refresh(self) -> int:
        """Read what was appended since the last read (by any process); the generation."""
        with self._mu:
            self._read_at = time.monotonic()
            while True:
                batch = self._log.read(self._next, READ_BATCH)
                if not batch:
                    return self._view.generation
                for offset, key, value in batch:
                    rec = records.parse(key, value)
                    if rec is not None:
                        self._view.apply(rec)
                    self._next = offset + 1
                if len(batch) < READ_BATCH:
                    return self._view.generation

    def maybe_refresh(self, max_age_s: float = 0.05) -> int:
        """``refresh`` unless one ran in the last ``max_age_s``: how the server follows other
        processes' appends without reading the topic on every request."""
        if time.monotonic() - self._read_at >= max_age_s:
            return self.refresh()
        return self._view.generation

    # ------------------------------------------------------------------ subjects
    def types(self) -> list[str]:
        return ["JSON", "PROTOBUF", "AVRO"]

    def subjects(self, deleted: bool = False, deleted_only: bool = False,
                 prefix: str = "") -> list[str]:
        with self._mu:
            out = []
            for s, vs in self._view.versions.items():
                if not s.startswith(prefix):
                    continue
                live = any(not v.deleted for v in vs.values())
                if deleted_only:
                    if any(v.deleted for v in vs.values()):
                        out.append(s)
                elif live or deleted:
                    out.append(s)
            return sorted(out)

    def versions(self, subject: str, deleted: bool = False,
                 deleted_only: bool = False) -> list[int]:
        with self._mu:
            vs = self._view.all(subject)
            if deleted_only:
                out = [v.version for v in vs if v.deleted]
            else:
                out = [v.version for v in vs if deleted or not v.deleted]
            if not vs or (not out and not deleted_only and not deleted):
                raise _no_subject(subject)
            return out

    def version(self, subject: str, version: str | int, deleted: bool = False,
                fmt: str | None = None) -> dict[str, Any]:
        with self._mu:
            sv = self._version(subject, version, deleted)
            return self._entry(sv, fmt)

    def _version(self, subject: str, version: str | int, deleted: bool) -> SchemaValue:
        n = check_version(version)
        allv = self._view.all(subject)
        seen = [v for v in allv if deleted or not v.deleted]
        if not seen:
            raise _no_subject(subject)
        if n is None:
            return seen[-1]
        for v in seen:
            if v.version == n:
                return v
        raise VersionNotFound(f"Version {n} not found.")

    def _entry(self, sv: SchemaValue, fmt: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id,
                               "schemaType": sv.schema_type}
        if sv.references:
            out["references"] = _refs_json(sv.references)
        out["schema"] = self._text(sv.id, sv.schema, fmt, sv.schema_type)
        return out

    def _text(self, sid: int, schema: str, fmt: str | None, schema_type: str) -> str:
        # (a PROTOBUF schema registered as a base64 descriptor answers printed .proto text)
        if not fmt and schema_type != "PROTOBUF":
            return schema
        try:
            return self._parsed_id(sid).text(fmt)
        except InvalidSchema:
            return schema

    # ------------------------------------------------------------------ ids
    def schema_by_id(self, sid: int, subject: str | None = None,
                     fmt: str | None = None) -> dict[str, Any]:
        with self._mu:
            ids = self._view.ids.get(sid)
            if ids is None:
                self.refresh()
                ids = self._view.ids.get(sid)
            if ids is None:
                raise SchemaNotFound(f"Schema {sid} not found", 40403)
            out: dict[str, Any] = {"schemaType": ids.schema_type}
            if ids.references:
                out["references"] = _refs_json(ids.references)
            out["schema"] = self._text(sid, ids.schema, fmt, ids.schema_type)
            return out

    def parsed(self, sid: int) -> Parsed:
        """The schema of id ``sid`` parsed, with its references (cached): what the
        serializers and deserializers encode and decode with."""
        with self._mu:
            if sid not in self._view.ids:
                self.refresh()
            return self._parsed_id(sid)

    def subjects_of(self, sid: int, deleted: bool = False) -> list[str]:
        return sorted({s for s, _ in self._holders(sid, deleted)})

    def versions_of(self, sid: int, deleted: bool = False) -> list[dict[str, Any]]:
        return [{"subject": s, "version": v} for s, v in sorted(self._holders(sid, deleted))]

    def _holders(self, sid: int, deleted: bool) -> list[tuple[str, int]]:
        with self._mu:
            held = self._view.holders.get(sid)
            if held is None:
                raise SchemaNotFound(f"Schema {sid} not found", 40403)
            out = [(s, v) for s, v in held
                   if deleted or not self._view.versions[s][v].deleted]
            return out

    # ------------------------------------------------------------------ lookups
    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: Sequence[Any] = (), normalize: bool = False,
               deleted: bool = False) -> dict[str, Any]:
        stype, refs = check_type(schema_type), check_refs(references)
        with self._mu:
            if not self._view.versions.get(subject):
                raise _no_subject(subject)
            parsed = self._parse(stype, check_schema(schema), refs)
            sv = self._find(subject, parsed, refs, normalize, deleted)
            if sv is None:
                raise SchemaNotFound("Schema not found", 40403)
            return self._entry(sv)

    def _find(self, subject: str, parsed: Parsed, refs: Refs, normalize: bool,
              deleted: bool) -> SchemaValue | None:
        want = parsed.normalized() if normalize else parsed.canonical()
        for sv in reversed(self._view.all(subject)):
            if (sv.deleted and not deleted) or sv.schema_type != parsed.schema_type \
                    or sv.references != refs:
                continue
            if self._canonical(sv.id, normalize) == want:
                return sv
        return None

    def _canonical(self, sid: int, normalize: bool) -> str:
        if normalize:
            return self._parsed_id(sid).normalized()
        c = self._canon.get(sid)
        if c is None:
            c = self._canon[sid] = self._parsed_id(sid).canonical()
        return c

    def _same_id(self, parsed: Parsed, text: str, refs: Refs) -> int | None:
        """An id already given to this schema (in any subject): Confluent gives one schema
        one id."""
        sid = self._view.exact.get((parsed.schema_type, text, refs))
        if sid is not None:
            return sid
        want = parsed.canonical()
        for sid, ids in self._view.ids.items():
            if ids.schema_type == parsed.schema_type and ids.references == refs:
                try:
                    if self._canonical(sid, False) == want:
                        return sid
                except InvalidSchema:
                    continue
        return None

    # ------------------------------------------------------------------ register
    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: Sequence[Any] = (), normalize: bool = False) -> dict[str, Any]:
        check_subject(subject)
        stype, refs = check_type(schema_type), check_refs(references)
        schema = check_schema(schema)
        with self._mu:
            self.maybe_refresh()
            parsed = self._parse(stype, schema, refs)
            found = self._find(subject, parsed, refs, normalize, False)
            if found is not None:
                return {"id": found.id}
        self._writable()
        with self._writing():
            parsed = self._parse(stype, schema, refs)
            found = self._find(subject, parsed, refs, normalize, False)
            if found is not None:
                return {"id": found.id}
            level = self._view.level(subject)
            problems = self._problems(subject, parsed, level)
            if problems:
                raise IncompatibleSchema(
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: [{", ".join(problems)}]')
            text = parsed.normalized() if normalize else schema
            sid = self._same_id(parsed, text, refs)
            if sid is None:
                sid = max(self._view.max_id, self._high_water()) + 1
                self._set_high_water(sid)
            version = self._view.next_version(subject)
            sv = SchemaValue(subject, version, sid, stype, text, refs)
            self._append([(records.schema_key(subject, version), sv.encode())])
            return {"id": sid}

    def _problems(self, subject: str, new: Parsed, level: str,
                  against: Sequence[SchemaValue] | None = None) -> list[str]:
        if level == "NONE":
            return []
        live = list(against) if against is not None else self._view.live(subject)
        if not live:
            return []
        olds = live if level.endswith("_TRANSITIVE") else live[-1:]
        base = level.removesuffix("_TRANSITIVE")
        for old in reversed(olds):
            op = self._parsed_id(old.id)
            msgs = []
            if base in ("BACKWARD", "FULL"):
                msgs += new.problems_reading(op)
            if base in ("FORWARD", "FULL"):
                msgs += op.problems_reading(new)
            if msgs:
                return msgs + [f"{{oldSchemaVersion: {old.version}}}",
                               f"{{compatibility: '{level}'}}"]
        return []

    def check(self, subject: str, version: str | int | None, schema: str,
              schema_type: str = "AVRO", references: Sequence[Any] = (),
              normalize: bool = False, verbose: bool = False) -> dict[str, Any]:
        """Whether ``schema`` could be registered under ``subject`` against ``version``
        (None: the versions its level compares with)."""
        stype, refs = check_type(schema_type), check_refs(references)
        n = check_version(version) if version is not None else None
        with self._mu:
            self.maybe_refresh()
            parsed = self._parse(stype, check_schema(schema), refs)
            level = self._view.level(subject)
            if version is None:
                problems = self._problems(subject, parsed, level)
            else:
                live = self._view.live(subject)
                if not live:
                    if n is None:
                        return {"is_compatible": True, **({"messages": []} if verbose else {})}
                    raise _no_subject(subject)
                old = self._version(subject, version, False)
                problems = self._problems(subject, parsed, level.removesuffix("_TRANSITIVE"),
                                          [old])
        out: dict[str, Any] = {"is_compatible": not problems}
        if verbose:
            out["messages"] = problems
        return out

    # ------------------------------------------------------------------ config
    def config(self, subject: str | None = None,
               default_to_global: bool = False) -> dict[str, Any]:
        with self._mu:
            if subject is None or default_to_global or subject in self._view.levels:
                return {"compatibilityLevel": self._view.level(subject)}
            raise SubjectConfigNotFound(
                f"Subject '{subject}' does not have subject-level compatibility configured")

    def subject_levels(self) -> dict[str, str]:
        """The subjects with a level of their own, and it."""
        with self._mu:
            return {s: lv for s, lv in self._view.levels.items() if s is not None}

    def set_config(self, subject: str | None, level: str) -> dict[str, Any]:
        lv = check_level(level)
        if subject is not None:
            check_subject(subject)
        self._writable()
        with self._writing():
            self._append([(records.config_key(subject), records.config_value(lv))])
        return {"compatibility": lv}

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        """A subject's own level removed (the global one applies again); None: the global
        level back to the default, BACKWARD. The level that was."""
        self._writable()
        with self._writing():
            if subject is None:
                was = self._view.level(None)
                if None in self._view.levels:
                    self._append([(records.config_key(None), None)])
                return {"compatibilityLevel": was}
            if subject not in self._view.levels:
                if subject not in self._view.versions:
                    raise _no_subject(subject)
                raise SubjectConfigNotFound(
                    f"Subject '{subject}' does not have subject-level compatibility configured")
            was = self._view.levels[subject]
            self._append([(records.config_key(subject), None)])
        return {"compatibilityLevel": was}

    def mode(self, subject: str | None = None) -> dict[str, Any]:
        return {"mode": "READWRITE"}

    # ------------------------------------------------------------------ delete
    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        self._writable()
        with self._writing():
            vs = self._view.all(subject)
            if not vs:
                raise _no_subject(subject)
            live = [v for v in vs if not v.deleted]
            if permanent:
                if live:
                    raise SubjectNotSoftDeleted(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted", 40405)
                for v in vs:
                    self._no_referrers(v)
                recs: list[tuple[bytes, bytes | None]] = [
                    (records.schema_key(subject, v.version), None) for v in vs]
                if subject in self._view.levels:
                    recs.append((records.config_key(subject), None))
                self._append(recs)
                return [v.version for v in vs]
            if not live:
                raise SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                    "permanently", 40404)
            for v in live:
                self._no_referrers(v)
            self._append([(records.schema_key(subject, v.version), _deleted(v).encode())
                          for v in live])
            return [v.version for v in live]

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        n = check_version(version)
        self._writable()
        with self._writing():
            vs = self._view.all(subject)
            if not vs:
                raise _no_subject(subject)
            pool = vs if permanent else [v for v in vs if not v.deleted] or vs
            sv = pool[-1] if n is None else next((v for v in vs if v.version == n), None)
            if sv is None:
                raise VersionNotFound(f"Version {n} not found.")
            if permanent:
                if not sv.deleted:
                    raise VersionNotSoftDeleted(
                        f"Subject '{subject}' Version {sv.version} was not deleted first before "
                        "being permanently deleted", 40407)
                self._no_referrers(sv)
                recs: list[tuple[bytes, bytes | None]] = [
                    (records.schema_key(subject, sv.version), None)]
                if len(vs) == 1 and subject in self._view.levels:
                    recs.append((records.config_key(subject), None))
                self._append(recs)
                return sv.version
            if sv.deleted:
                raise VersionSoftDeleted(
                    f"Subject '{subject}' Version {sv.version} was soft deleted.Set "
                    "permanent=true to delete permanently", 40406)
            self._no_referrers(sv)
            self._append([(records.schema_key(subject, sv.version), _deleted(sv).encode())])
            return sv.version

    def _no_referrers(self, sv: SchemaValue) -> None:
        users = [u for u in self._view.referrers(sv.subject, sv.version)
                 if (u.subject, u.version) != (sv.subject, sv.version)]
        if users:
            raise ReferenceExists(f"One or more references exist to the schema "
                                  f"{{subject={sv.subject},version={sv.version}}}.")

    # ------------------------------------------------------------------ serdes
    def serializer(self, schema: str | int, message: str | None = None) -> Serializer:
        """Values to Confluent's wire format under ``schema``: a subject (its latest version),
        ``id:N`` or an id (``eng.produce(t, [Record(value=ser(v))])``)."""
        return Serializer(self, schema, message)

    def deserializer(self) -> Deserializer:
        """Wire-format values back to values, whatever schema id each carries."""
        return Deserializer(self)

    # ------------------------------------------------------------------ parts
    def _parse(self, stype: str, schema: str, refs: Refs) -> Parsed:
        try:
            return parse(stype, schema, self._resolve(refs))
        except InvalidSchema as e:
            msg = str(e)
            if msg.startswith("Invalid schema"):
                raise
            raise InvalidSchema(f"Invalid schema of type {stype}, details: {msg}") from None

    def _parsed_id(self, sid: int) -> Parsed:
        p = self._parsed.get(sid)
        if p is None:
            ids = self._view.ids.get(sid)
            if ids is None:
                raise SchemaNotFound(f"Schema {sid} not found", 40403)
            p = self._parsed[sid] = self._parse(ids.schema_type, ids.schema, ids.references)
        return p

    def _resolve(self, refs: Refs) -> list[Reference]:
        """Every schema ``refs`` name, directly or not, a reference before its referrers."""
        out: list[Reference] = []
        seen: set[tuple[str, int]] = set()

        def visit(name: str, subject: str, version: int, depth: int) -> None:
            if (subject, version) in seen:
                return
            if depth > 64:
                raise InvalidSchema(f"Invalid schema: references nest deeper than 64 at {name}")
            seen.add((subject, version))
            sv = self._view.versions.get(subject, {}).get(version)
            if sv is None:
                raise InvalidSchema(f"Invalid schema: the reference {name!r} names subject "
                                    f"{subject!r} version {version}, which does not exist")
            for n, s, v in sv.references:
                visit(n, s, v, depth + 1)
            out.append(Reference(name, subject, version, sv.schema_type, sv.schema))

        for name, subject, version in refs:
            visit(name, subject, version, 0)
        return out

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """This process's writers one at a time, every process's under the flock, the view
        read to the topic's end inside."""
        make_dir(self._dir)
        with self._wmu, lock_path(os.path.join(self._dir, "lock"), self._lock_wait):
            self.refresh()
            yield

    def _append(self, recs: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._log.append(recs)
        self.refresh()

    def _high_water(self) -> int:
        path = os.path.join(self._dir, "ids")
        raw = jsondoc.read(path, "the schema id high-water mark", limit=4096)
        if raw is None:
            return 0
        doc = jsondoc.unseal(raw, path, "the schema id high-water mark")
        return jsondoc.get_int(doc, "max_id", path, "the schema id high-water mark")

    def _set_high_water(self, sid: int) -> None:
        write_atomic(os.path.join(self._dir, "ids"), jsondoc.seal({"max_id": sid}))


def _no_subject(subject: str) -> SubjectNotFound:
    return SubjectNotFound(f"Subject '{subject}' not found.")


def _deleted(sv: SchemaValue) -> SchemaValue:
    return SchemaValue(sv.subject, sv.version, sv.id, sv.schema_type, sv.schema, sv.references,
                       True)


def _refs_json(refs: Refs) -> list[dict[str, Any]]:
    return [{"name": n, "subject": s, "version": v} for n, s, v in refs]
