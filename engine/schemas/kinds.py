"""The interface every schema type implements, and ``parse`` picking the type by name."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import InvalidSchema

TYPES = ("AVRO", "PROTOBUF", "JSON")
_MODULES = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json_schema"}


@dataclass(frozen=True)
class Reference:
    """A schema another one refers to, resolved by the registry: ``name`` is how the
    referring schema names it (an Avro full name, a .proto import path, a JSON ``$ref``),
    ``schema`` its text as registered."""

    name: str
    subject: str
    version: int
    schema_type: str
    schema: str


class Parsed(Protocol):
    """A schema that parsed, with what it refers to."""

    schema_type: str  # "AVRO" | "PROTOBUF" | "JSON"

    def canonical(self) -> str:
        """The form two registrations are compared in: equal ``canonical()``, same schema
        (whitespace and key order do not count; for ``normalize=true`` see ``normalized``)."""
        ...

    def normalized(self) -> str:
        """Confluent's ``normalize=true`` form (also the canonical form where the type has no
        separate one)."""
        ...

    def text(self, fmt: str | None = None) -> str:
        """The schema as GET returns it: the registered text; ``fmt="serialized"`` for
        PROTOBUF: the base64 ``FileDescriptorProto`` (what confluent-kafka's Protobuf
        deserializer asks for). Unknown formats: the registered text."""
        ...

    def problems_reading(self, writer: Parsed) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (for JSON Schema:
        why a document ``writer`` accepts may be refused by this one); empty when it can.
        BACKWARD is ``new.problems_reading(old)``, FORWARD ``old.problems_reading(new)``."""
        ...

    def encode(self, value: Any) -> bytes:
        """The payload after the 5-byte header (PROTOBUF: the message indexes, then the
        message) of a Python value (Avro: fastavro's values; PROTOBUF: a dict or a message;
        JSON: any JSON value); SchemaMismatch naming the field when it does not fit."""
        ...

    def decode(self, payload: bytes) -> Any:
        """The Python value of a payload (the bytes after the 5-byte header); SchemaMismatch
        when it does not decode."""
        ...

    def from_json(self, doc: Any) -> Any:
        """A parsed JSON value (a ``rivven produce`` input line) as ``encode`` takes it;
        SchemaMismatch naming the field when it does not fit."""
        ...

    def to_json(self, value: Any) -> Any:
        """A decoded value as JSON values (``rivven consume --decode``)."""
        ...


def parse(schema_type: str, text: str, references: Sequence[Reference] = ()) -> Parsed:
    """``text`` as a schema of ``schema_type``, with ``references`` (every schema it refers
    to, directly or not, in the order they must be read: a reference before what refers to
    it); InvalidSchema (42201) with the parser's message when it does not parse."""
    name = (schema_type or "AVRO").upper()
    if name not in _MODULES:
        raise InvalidSchema(f"Invalid schema type {schema_type!r}: use AVRO, PROTOBUF or JSON")
    module: Any = importlib.import_module(f"{__package__}.{_MODULES[name]}")
    parsed: Parsed = module.parse(text, references)
    return parsed
