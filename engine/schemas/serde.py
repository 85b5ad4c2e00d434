"""Confluent's wire format: the magic byte 0, the schema id as 4 bytes big-endian, then the
payload of the schema's type (Avro's binary body, Protobuf's message indexes and message,
JSON's UTF-8 text) — what confluent-kafka's serializers write and read, so records written
by either read with the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .errors import RegistryError, SchemaMismatch
from .kinds import Parsed

MAGIC = 0
HEADER = 5


class Schemas(Protocol):
    """What the serializers need of a registry."""

    def parsed(self, sid: int) -> Parsed: ...

    def version(self, subject: str, version: str | int, deleted: bool = False,
                fmt: str | None = None) -> dict[str, Any]: ...


def header(sid: int) -> bytes:
    return bytes((MAGIC,)) + sid.to_bytes(4, "big")


def split(data: bytes | bytearray | memoryview | None) -> tuple[int, bytes]:
    """``(schema id, payload)`` of a value in the wire format; SchemaMismatch saying why
    when it is not one."""
    if data is None:
        raise SchemaMismatch("", "a null value has no schema id (a tombstone?)")
    b = bytes(data)
    if len(b) < HEADER or b[0] != MAGIC:
        what = "too short" if len(b) < HEADER else f"magic byte {b[0]}, not 0"
        raise SchemaMismatch("", f"not in Confluent's wire format ({what}): was it written "
                                 "with a schema?")
    return int.from_bytes(b[1:5], "big"), b[5:]


def schema_ref(text: str) -> tuple[str | None, int | None]:
    """``SUBJECT`` or ``id:N`` (``--value-schema``): ``(subject, None)`` or ``(None, id)``."""
    if text.startswith("id:"):
        n = text[3:]
        if not n.isdigit() or not 0 <= int(n) < 2**31:
            raise SchemaMismatch("", f"{text!r}: use id:N with N a schema id, e.g. id:1")
        return None, int(n)
    if not text:
        raise SchemaMismatch("", "an empty schema name: use SUBJECT or id:N")
    return text, None


class Serializer:
    """Values to the wire format under one schema: a subject's latest version (looked up
    once), or an id. ``message`` picks a Protobuf message other than the file's first."""

    def __init__(self, schemas: Schemas, schema: str | int, message: str | None = None) -> None:
        if isinstance(schema, int):
            sid = schema
        else:
            subject, n = schema_ref(schema)
            sid = n if n is not None else int(schemas.version(subject or "", "latest")["id"])
        parsed = schemas.parsed(sid)
        if message is not None:
            pick: Callable[[str], Parsed] | None = getattr(parsed, "message", None)
            if pick is None:
                raise SchemaMismatch("", f"--message {message}: only a PROTOBUF schema has "
                                         f"messages to choose; schema {sid} is "
                                         f"{parsed.schema_type}")
            parsed = pick(message)
        self.id = sid
        self.schema = parsed
        self._head = header(sid)

    def __call__(self, value: Any) -> bytes:
        return self._head + self.schema.encode(value)

    def from_json(self, doc: Any) -> bytes:
        """A parsed JSON value (an input line) in the wire format."""
        s = self.schema
        return self._head + s.encode(s.from_json(doc))


class Deserializer:
    """Wire-format values back to values: each schema id looked up once and kept."""

    def __init__(self, schemas: Schemas) -> None:
        self._schemas = schemas
        self._cache: dict[int, Parsed] = {}

    def schema(self, sid: int) -> Parsed:
        p = self._cache.get(sid)
        if p is None:
            try:
                p = self._cache[sid] = self._schemas.parsed(sid)
            except RegistryError as e:
                raise SchemaMismatch("", f"schema id {sid}: {e}") from None
        return p

    def __call__(self, data: bytes | None) -> Any:
        sid, payload = split(data)
        return self.schema(sid).decode(payload)

    def to_json(self, data: bytes | None) -> Any:
        """The value as JSON values (``rivven consume --decode``)."""
        sid, payload = split(data)
        s = self.schema(sid)
        return s.to_json(s.decode(payload))
