"""The ``_schemas`` topic's records, as Confluent's registry writes them (its ``*Key`` and
``*Value`` classes through Jackson): JSON keys with a fixed field order — compaction keeps the
last record of each key's *bytes*, so a key must always serialize the same — and JSON values,
``None`` for a tombstone. A record that does not parse is skipped, never trusted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TOPIC = "_schemas"
MAX_KEY = 64 << 10  # a key longer than this is not one of ours
MAX_VALUE = 64 << 20


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    doc: dict[str, Any] = {"keytype": "CONFIG"}
    if subject is not None:
        doc["subject"] = subject
    doc["magic"] = 0
    return _dump(doc)


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)
    deleted: bool = False

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id,
                               "schemaType": self.schema_type}
        if self.references:
            doc["references"] = [{"name": n, "subject": s, "version": v}
                                 for n, s, v in self.references]
        doc["schema"] = self.schema
        doc["deleted"] = self.deleted
        return _dump(doc)


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


@dataclass(frozen=True)
class Parsed:
    """One record of the topic, understood: ``kind`` is the key's type (SCHEMA, CONFIG,
    DELETE_SUBJECT, CLEAR_SUBJECT, MODE, NOOP); ``value`` None for a tombstone."""

    kind: str
    subject: str | None
    version: int | None
    value: Any


_INT_MAX = 2**31 - 1


def _int(v: Any, lo: int = 0) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= _INT_MAX else None


def parse(key: bytes | None, value: bytes | None) -> Parsed | None:
    """The record understood, or None for one that is not of a kind the registry knows or
    does not check out (wrong types, out-of-range numbers, malformed JSON)."""
    if not key or len(key) > MAX_KEY or (value is not None and len(value) > MAX_VALUE):
        return None
    try:
        k = json.loads(key)
        v = json.loads(value) if value is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        return None
    kind = k["keytype"]
    subject = k.get("subject")
    if subject is not None and not isinstance(subject, str):
        return None
    if kind == "SCHEMA":
        version = _int(k.get("version"), 1)
        if subject is None or version is None:
            return None
        if v is None:
            return Parsed(kind, subject, version, None)
        sv = _schema_value(v, subject, version)
        return Parsed(kind, subject, version, sv) if sv is not None else None
    if kind == "CONFIG":
        if v is None:
            return Parsed(kind, subject, None, None)
        level = v.get("compatibilityLevel") if isinstance(v, dict) else None
        return Parsed(kind, subject, None, level) if isinstance(level, str) else None
    if kind == "DELETE_SUBJECT":
        ver = _int(v.get("version"), 1) if isinstance(v, dict) else None
        return Parsed(kind, subject, ver, ver) if subject is not None and ver else None
    if kind == "CLEAR_SUBJECT":
        return Parsed(kind, subject, None, v) if subject is not None else None
    if kind in ("MODE", "NOOP"):
        return Parsed(kind, subject, None, v)
    return None


def _schema_value(v: Any, subject: str, version: int) -> SchemaValue | None:
    if not isinstance(v, dict):
        return None
    sid = _int(v.get("id"), 0)
    schema = v.get("schema")
    stype = v.get("schemaType") or "AVRO"
    deleted = v.get("deleted", False)
    refs_raw = v.get("references") or []
    if sid is None or not isinstance(schema, str) or not isinstance(stype, str) \
            or not isinstance(deleted, bool) or not isinstance(refs_raw, list):
        return None
    refs = []
    for r in refs_raw:
        if not isinstance(r, dict):
            return None
        name, rs, rv = r.get("name"), r.get("subject"), _int(r.get("version"), 1)
        if not isinstance(name, str) or not isinstance(rs, str) or rv is None:
            return None
        refs.append((name, rs, rv))
    return SchemaValue(subject, version, sid, stype.upper(), schema, tuple(refs), deleted)
