"""Avro values: JSON input (and Python values) checked and turned into what fastavro's writer
takes, and decoded values turned back into JSON. Compiled once per schema into a tree of small
functions, so a record costs a few function calls and no schema walking. This module is the
compiler (records, unions, named and recursive types, the branch a value belongs to); the leaf
converters are ``avro_convert``'s, the logical types ``avro_logical``'s.

JSON forms taken (``to_avro``), after Avro's JSON encoding and what people type:
- bytes and fixed: a string of code points 0-255 (Avro's JSON encoding: ISO-8859-1), or bytes;
- unions: the plain value (the first branch that takes it) or Avro's tagged form
  ``{"type name": value}`` (``{"com.acme.Address": {...}}`` for a named type);
- logical types: decimal as a number or a decimal string ("12.30"); uuid as its string; date
  as days since 1970-01-01 or "YYYY-MM-DD"; time-* as ms/µs since midnight or "HH:MM:SS[.f]";
  timestamp-* and local-timestamp-* as ms/µs since the epoch or an ISO 8601 string (UTC when it
  has no offset); Python's Decimal, UUID, date, time and datetime also do.
- a record field left out takes the field's default; fields the schema does not name are
  ignored (as fastavro and Avro's JSON decoder do).

``to_json`` gives what Confluent's console consumer shows, except unions (plain, untagged):
bytes and fixed as ISO-8859-1 strings, dates and times as the numbers Avro stores
(days, ms or µs), uuid as its string; decimals as decimal strings ("12.30").
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .avro_convert import (
    PRIMITIVE_TO_AVRO,
    PRIMITIVES,
    Bad,
    Convert,
    array_to_avro,
    bytes_to_json,
    enum_to_avro,
    fixed_to_avro,
    map_to_avro,
)
from .avro_logical import LOGICAL_TO_JSON, logical_to_avro
from .errors import got

_MISSING = object()


class Compiler:
    """The converters of one fastavro-parsed schema; ``named`` is fastavro's named schemas
    (the schema's own and its references'), by full name."""

    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self._to_avro: dict[str, Convert] = {}
        self._to_json: dict[str, Convert | None] = {}

    # ---- JSON / Python values -> fastavro's values, checked ----

    def to_avro(self, schema: Any) -> Convert:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return PRIMITIVE_TO_AVRO[schema]
            return self._named_to_avro(schema)
        if isinstance(schema, list):
            return self._union_to_avro(schema)
        t = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            conv = logical_to_avro(schema, logical)
            if conv is not None:
                return conv
        if t == "record" or t == "error":
            return self._record_to_avro(schema)
        if t == "enum":
            return enum_to_avro(schema)
        if t == "fixed":
            return fixed_to_avro(schema["size"], schema["name"])
        if t == "array":
            return array_to_avro(self.to_avro(schema["items"]))
        if t == "map":
            return map_to_avro(self.to_avro(schema["values"]))
        return self.to_avro(t)

    def _named_to_avro(self, name: str) -> Convert:
        conv = self._to_avro.get(name)
        if conv is None:
            cell: list[Convert] = []
            # a recursive type meets itself through this forwarder while being compiled
            self._to_avro[name] = lambda v: cell[0](v)
            conv = self.to_avro(self.named[name])
            cell.append(conv)
            self._to_avro[name] = conv
        return conv

    def _record_to_avro(self, schema: dict[str, Any]) -> Convert:
        name = schema["name"]
        cell: list[Convert] = []
        mine = name not in self._to_avro  # else _named_to_avro set the forwarder
        if mine:
            self._to_avro[name] = lambda v: cell[0](v)
        fields = []
        for f in schema["fields"]:
            conv = self.to_avro(f["type"])
            default = _MISSING
            if "default" in f:
                try:
                    default = conv(self._default(f["type"], f["default"]))
                except Bad:  # fastavro checked it, in its own way: let the writer have it
                    default = f["default"]
            fields.append((f["name"], conv, default))
        kind = f"an object (record {name})"

        def record(v: Any) -> Any:
            if type(v) is not dict:
                if not isinstance(v, dict):
                    raise Bad(f"expected {kind}, got {got(v)}")
            out = {}
            for fname, conv, default in fields:
                x = v.get(fname, _MISSING)
                if x is _MISSING:
                    if default is _MISSING:
                        e = Bad("missing, and the field has no default")
                        e.where.append(fname)
                        raise e
                    out[fname] = default
                    continue
                try:
                    out[fname] = conv(x)
                except Bad as e:
                    e.where.append(fname)
                    raise
            return out

        cell.append(record)
        if mine:
            self._to_avro[name] = record
        return record

    def _default(self, schema: Any, value: Any) -> Any:
        """A default as the input forms take it: a decimal's default is its unscaled
        two's-complement bytes, as an ISO-8859-1 string (Avro's JSON encoding of bytes)."""
        if isinstance(schema, list) and schema:  # a union's default is of its first branch
            schema = schema[0]
        if isinstance(schema, str):
            schema = self.named.get(schema, schema)
        if isinstance(value, str) and isinstance(schema, dict) and \
                schema.get("logicalType") == "decimal":
            try:
                unscaled = int.from_bytes(value.encode("latin-1"), "big", signed=True)
            except UnicodeEncodeError:
                return value
            return Decimal(unscaled).scaleb(-(schema.get("scale", 0) or 0))
        return value

    def _union_to_avro(self, branches: list[Any]) -> Convert:
        convs = [(branch_name(b), self.to_avro(b), _accepts(b, self.named)) for b in branches]
        by_name = {n: c for n, c, _ in convs}
        for b in branches:  # a named type's short name also tags it
            n = branch_name(b)
            by_name.setdefault(n.rpartition(".")[2], by_name[n])
        names = " or ".join(n for n, _, _ in convs)
        if len(convs) == 2 and convs[0][0] == "null":  # the common optional field, fast
            other, oconv, oaccepts = convs[1]

            def optional(v: Any) -> Any:
                if v is None:
                    return ("null", None)
                if type(v) is dict and len(v) == 1:
                    (k, inner), = v.items()
                    c = by_name.get(k)
                    if c is not None:
                        return ("null", c(inner)) if k == "null" else (other, c(inner))
                try:
                    return (other, oconv(v))
                except Bad:
                    if oaccepts(v):  # of the branch's kind: its own problem is the clearer
                        raise
                    raise Bad(f"expected {names}, got {got(v)}") from None
            return optional

        def union(v: Any) -> Any:
            if type(v) is dict and len(v) == 1:
                (k, inner), = v.items()
                c = by_name.get(k)
                if c is not None:
                    return (_full(k, convs), c(inner))
            if type(v) is tuple and len(v) == 2 and isinstance(v[0], str) and v[0] in by_name:
                # fastavro's tuple notation, from Python callers
                return (_full(v[0], convs), by_name[v[0]](v[1]))
            first: Bad | None = None
            candidates = 0
            for n, c, accepts in convs:
                if not accepts(v):
                    continue
                candidates += 1
                try:
                    return (n, c(v))
                except Bad as e:
                    first = first or e
            if candidates == 1 and first is not None:
                raise first  # the one branch of its kind: its own problem is the clearer
            raise Bad(f"expected {names}, got {got(v)}")

        return union

    # ---- decoded values -> JSON (None: the value is its own JSON) ----

    def to_json(self, schema: Any) -> Convert | None:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return bytes_to_json if schema == "bytes" else None
            return self._named_to_json(schema)
        if isinstance(schema, list):
            return self._union_to_json(schema)
        t = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            conv = LOGICAL_TO_JSON.get((logical, t if isinstance(t, str) else ""), _MISSING)
            if conv is not _MISSING:
                return conv  # type: ignore[return-value]
        if t == "record" or t == "error":
            return self._record_to_json(schema)
        if t == "enum":
            return None
        if t == "fixed":
            return bytes_to_json
        if t == "array":
            items = self.to_json(schema["items"])
            return None if items is None else (lambda v: [items(x) for x in v])
        if t == "map":
            values = self.to_json(schema["values"])
            return None if values is None else (lambda v: {k: values(x) for k, x in v.items()})
        return self.to_json(t)

    def _named_to_json(self, name: str) -> Convert | None:
        if name not in self._to_json:
            cell: list[Convert | None] = []
            self._to_json[name] = lambda v: cell[0](v) if cell[0] else v
            conv = self.to_json(self.named[name])
            cell.append(conv)
            self._to_json[name] = conv
        return self._to_json[name]

    def _record_to_json(self, schema: dict[str, Any]) -> Convert | None:
        name = schema["name"]
        cell: list[Convert | None] = []
        self._to_json.setdefault(name, lambda v: cell[0](v) if cell[0] else v)
        fields = [(f["name"], self.to_json(f["type"])) for f in schema["fields"]]
        changing = [(n, c) for n, c in fields if c is not None]
        if not changing:
            cell.append(None)
            return None

        def record(v: dict[str, Any]) -> Any:
            out = dict(v)
            for n, c in changing:
                if n in out:
                    out[n] = c(out[n])
            return out

        cell.append(record)
        return record

    def _union_to_json(self, branches: list[Any]) -> Convert | None:
        convs = [(_decoded_is(b, self.named), self.to_json(b)) for b in branches]
        if all(c is None for _, c in convs):
            return None

        def union(v: Any) -> Any:
            for is_it, c in convs:
                if is_it(v):
                    return v if c is None else c(v)
            return v

        return union


def branch_name(schema: Any) -> str:
    """How fastavro and Avro's JSON encoding name a union branch: a named type's full name,
    else the type's name."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    t = schema["type"]
    if t in ("record", "error", "enum", "fixed"):
        return str(schema["name"])
    return t if isinstance(t, str) else branch_name(t)


def _full(name: str, convs: list[tuple[str, Convert, Any]]) -> str:
    for n, _, _ in convs:
        if n == name or n.rpartition(".")[2] == name:
            return n
    return name


def _kind(schema: Any, named: dict[str, Any]) -> tuple[str, str | None]:
    """(the Avro type, the logical type) of a branch, named types looked up."""
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema, None
        schema = named[schema]
    if isinstance(schema, list):
        return "union", None
    t = schema["type"]
    if not isinstance(t, str) or (t not in PRIMITIVES and t not in (
            "record", "error", "enum", "fixed", "array", "map")):
        return _kind(t, named)
    return t, schema.get("logicalType")


def _accepts(schema: Any, named: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether an input value could be of this branch (its JSON kind), to pick the branches
    worth trying."""
    t, logical = _kind(schema, named)
    if t == "null":
        return lambda v: v is None
    if t == "boolean":
        return lambda v: isinstance(v, bool)
    if logical in ("decimal", "date", "time-millis", "time-micros", "timestamp-millis",
                   "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros",
                   "uuid"):
        return lambda v: v is not None and not isinstance(v, (bool, dict, list))
    if t in ("int", "long"):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if t in ("float", "double"):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if t in ("string", "enum"):
        return lambda v: isinstance(v, str)
    if t in ("bytes", "fixed"):
        return lambda v: isinstance(v, (str, bytes, bytearray, memoryview))
    if t == "array":
        return lambda v: isinstance(v, list)
    return lambda v: isinstance(v, dict)


def _decoded_is(schema: Any, named: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a value fastavro decoded belongs to this branch (by its Python type)."""
    t, logical = _kind(schema, named)
    python = {"decimal": Decimal, "uuid": uuid.UUID, "date": dt.date, "time-millis": dt.time,
              "time-micros": dt.time, "timestamp-millis": dt.datetime,
              "timestamp-micros": dt.datetime, "local-timestamp-millis": dt.datetime,
              "local-timestamp-micros": dt.datetime}.get(logical or "")
    if python is dt.date:
        return lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    if python is not None:
        return lambda v: isinstance(v, python)
    if t in ("record", "error"):
        s = named[schema] if isinstance(schema, str) else schema
        fields = frozenset(f["name"] for f in s["fields"])
        return lambda v: isinstance(v, dict) and v.keys() == fields
    return {
        "null": lambda v: v is None, "boolean": lambda v: isinstance(v, bool),
        "int": _is_int, "long": _is_int, "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float), "string": lambda v: isinstance(v, str),
        "enum": lambda v: isinstance(v, str), "bytes": lambda v: isinstance(v, bytes),
        "fixed": lambda v: isinstance(v, bytes), "array": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
    }.get(t, lambda v: False)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
