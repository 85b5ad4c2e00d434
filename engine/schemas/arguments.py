"""The registry's arguments checked as Confluent's registry checks them: versions (``latest``,
-1, 1..2^31-1: 42202), compatibility levels (42203), schema types and texts (42201, 42209),
subjects (42208), references (400, 42201)."""

from __future__ import annotations

from typing import Any

from .errors import (
    BadRequest,
    InvalidCompatibility,
    InvalidSchema,
    InvalidSubject,
    InvalidVersion,
    SchemaTooLarge,
)
from .kinds import TYPES

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")
MAX_SCHEMA = 8 << 20  # characters of one schema
MAX_VERSION = 2**31 - 1
Refs = tuple[tuple[str, str, int], ...]


def check_version(version: str | int | None) -> int | None:
    """A version argument: None for ``latest`` (or -1), else 1..2^31-1 (42202 otherwise)."""
    if version is None or version == "latest" or version == -1 or version == "-1":
        return None
    if isinstance(version, str) and version.isdigit() and len(version) < 12:
        version = int(version)
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= MAX_VERSION:
        return version
    raise InvalidVersion(f"The specified version '{version}' is not a valid version id. Allowed "
                         'values are between [1, 2^31-1] and the string "latest"')


def check_level(level: Any) -> str:
    lv = level.upper() if isinstance(level, str) else ""
    if lv not in LEVELS:
        raise InvalidCompatibility(
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive")
    return lv


def check_type(schema_type: Any) -> str:
    t = (schema_type or "AVRO")
    if not isinstance(t, str) or t.upper() not in TYPES:
        raise InvalidSchema(f"Invalid schema type {schema_type!r}: use AVRO, PROTOBUF or JSON")
    return t.upper()


def check_subject(subject: Any) -> str:
    if not isinstance(subject, str) or not subject or len(subject) > 4096 \
            or any(ord(c) < 32 for c in subject):
        raise InvalidSubject(f"The specified subject '{subject}' is not a valid.")
    return subject


def check_refs(references: Any) -> Refs:
    if references is None:
        return ()
    if not isinstance(references, (list, tuple)):
        raise BadRequest("references: use a list of {name, subject, version}")
    out = []
    for r in references:
        if isinstance(r, tuple) and len(r) == 3:
            name, subject, version = r
        elif isinstance(r, dict):
            name, subject, version = r.get("name"), r.get("subject"), r.get("version")
        else:
            raise BadRequest("references: each one is {name, subject, version}")
        if not isinstance(name, str) or not name or not isinstance(subject, str) or not subject:
            raise BadRequest("references: each one needs a name and a subject")
        n = check_version(version if version is not None else "latest")
        if n is None:
            raise InvalidSchema(f"Invalid schema: the reference {name!r} needs a version "
                                "number, not latest")
        out.append((name, subject, n))
    return tuple(out)


def check_schema(schema: Any) -> str:
    if not isinstance(schema, str) or not schema.strip():
        raise InvalidSchema("Invalid schema: the schema is empty or not a string")
    if len(schema) > MAX_SCHEMA:
        raise SchemaTooLarge("Register operation failed because schema is too large")
    return schema
