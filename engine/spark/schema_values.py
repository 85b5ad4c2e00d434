"""Values between a schema's decoder and Arrow (the ``rivven`` source's decoded columns) and
between Arrow and a schema's encoder (the sink's ``valueSchema``), each compiled once per
schema or type into small functions so a record costs no schema walking.

Decoding: what fastavro, protobuf and json give, shaped as the column's Spark type
(schema_types) wants it in ``pyarrow.array``: a struct as a dict (fields missing: null; fields
the type does not name: ignored), an array as a list, a map as a dict.
Encoding: ``Array.to_pylist()`` values (structs as dicts, maps as lists of pairs) as the
schema's ``encode`` takes them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructType,
)

from ..schemas.errors import SchemaMismatch
from . import schema_types as st

Convert = Callable[[Any], Any]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LONG = (-(1 << 63), (1 << 63) - 1)
INT = (-(1 << 31), (1 << 31) - 1)


def _within(name: str, e: SchemaMismatch) -> SchemaMismatch:
    """``e`` one level down: its field path under ``name``."""
    field = name + ("" if not e.field else e.field if e.field.startswith("[") else "." + e.field)
    return SchemaMismatch(field, e.problem)


def _got(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (str, int, float, bool)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


# ------------------------------------------------------------------------ AVRO, decoding
def avro_values(schema: Any, named: dict[str, Any]) -> Convert | None:
    """What fastavro's reader (``return_named_type=True, return_named_type_override=True``)
    gives for values of the parsed ``schema`` (``named``: its named types), as its Spark type
    (schema_types.avro_type) takes it; None when the values fit as they are."""
    return _av(schema, named)


def _av(s: Any, named: dict[str, Any]) -> Convert | None:
    if isinstance(s, str):
        return None if s in st.AVRO_PRIMITIVES else _av(named[s], named)
    if isinstance(s, list):
        return _av_union(s, named)
    t = s["type"]
    if isinstance(t, (dict, list)) or (t not in st.AVRO_PRIMITIVES and t not in st.AVRO_COMPLEX):
        return _av(t, named)
    logical = s.get("logicalType")
    if logical == "uuid" and t == "string":
        return lambda v: str(v) if isinstance(v, uuid.UUID) else v
    if (logical, t) in (("time-millis", "int"), ("time-micros", "long")):
        per = 1000 if t == "int" else 1_000_000
        return lambda v: _time_of_day(v, per)
    if t in ("record", "error"):
        convs: list[tuple[str, Convert]] = []
        for f in s["fields"]:
            c = _av(f["type"], named)
            if c is not None:
                convs.append((f["name"], c))
        if not convs:
            return None

        def record(v: Any) -> Any:
            for name, c in convs:  # (fastavro's dict is this record's own: changed in place)
                x = v.get(name)
                if x is not None:
                    v[name] = c(x)
            return v
        return record
    if t == "array":
        item = _av(s["items"], named)
        return None if item is None else lambda v: [None if x is None else item(x) for x in v]
    if t == "map":
        value = _av(s["values"], named)
        return None if value is None else \
            lambda v: {k: None if x is None else value(x) for k, x in v.items()}
    return None


def _time_of_day(v: Any, per_second: int) -> Any:
    if not isinstance(v, dt.time):
        return v
    micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return micros // (1_000_000 // per_second)


def _av_union(union: list[Any], named: dict[str, Any]) -> Convert | None:
    rest, how = st.avro_branches(union, named)
    if how == "one":
        return _av(rest[0], named)
    if how != "members":
        return None
    branches = []
    by_name: dict[str, tuple[str, Convert | None]] = {}
    for i, b in enumerate(rest):
        key, conv = f"member{i}", _av(b, named)
        name = _avro_name(b, named)
        if name is not None:
            by_name[name] = (key, conv)
        branches.append((key, _avro_is(b, named), conv))

    def union_value(v: Any) -> Any:
        if type(v) is tuple:  # (a named type's name, its value): several named branches
            key, conv = by_name[v[0]]
            return {key: v[1] if conv is None else conv(v[1])}
        for key, test, conv in branches:
            if test(v):
                return {key: v if conv is None else conv(v)}
        raise SchemaMismatch("", f"{_got(v)} is of no branch of the union")
    return union_value


def _avro_name(s: Any, named: dict[str, Any]) -> str | None:
    """The full name of a named type (record, enum, fixed), else None."""
    if isinstance(s, str):
        return s if s in named else None
    if isinstance(s, dict) and s.get("type") in ("record", "error", "enum", "fixed"):
        return str(s["name"])
    return None


def _avro_is(s: Any, named: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a decoded value is of the union branch ``s`` (the first that is, wins: as
    values come from one branch, only branches of one Python type could both say yes)."""
    while isinstance(s, str) and s in named:
        s = named[s]
    logical = s.get("logicalType") if isinstance(s, dict) else None
    kind = st.avro_kind(s, named)
    if logical == "date":
        return lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    if logical in ("time-millis", "time-micros"):
        return lambda v: isinstance(v, dt.time) or type(v) is int
    if logical is not None and logical.startswith(("timestamp-", "local-timestamp-")):
        return lambda v: isinstance(v, dt.datetime)
    if logical == "decimal":
        return lambda v: isinstance(v, Decimal)
    if logical == "uuid":
        return lambda v: isinstance(v, (uuid.UUID, str))
    tests: dict[str, Callable[[Any], bool]] = {
        "boolean": lambda v: type(v) is bool,
        "int": lambda v: type(v) is int, "long": lambda v: type(v) is int,
        "float": lambda v: type(v) in (int, float), "double": lambda v: type(v) in (int, float),
        "string": lambda v: isinstance(v, str), "enum": lambda v: isinstance(v, str),
        "bytes": lambda v: isinstance(v, bytes), "fixed": lambda v: isinstance(v, bytes),
        "array": lambda v: isinstance(v, list), "map": lambda v: isinstance(v, dict),
        "record": lambda v: isinstance(v, dict),
    }
    return tests.get(kind, lambda v: False)


# -------------------------------------------------------------------- PROTOBUF, decoding
class ProtobufValues:
    """Messages as dicts of their fields (schema_types.protobuf_type's shapes), a function
    per message type made on first use (a recursive type's values are finite)."""

    def __init__(self) -> None:
        self._made: dict[Any, Convert] = {}

    def __call__(self, msg: Any) -> dict[str, Any]:
        return self.of(msg.DESCRIPTOR)(msg)

    def of(self, desc: Any) -> Convert:
        conv = self._made.get(desc)
        if conv is None:
            self._made[desc] = lambda m: self._made[desc](m)  # (a recursive type's own)
            conv = self._made[desc] = self._message(desc)
        return conv

    def _message(self, desc: Any) -> Convert:
        getters = [(f.name, self._field(f)) for f in desc.fields]

        def message(m: Any) -> dict[str, Any]:
            return {name: get(m) for name, get in getters}
        return message

    def _field(self, f: Any) -> Convert:
        name = f.name
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value = self._single(f.message_type.fields_by_name["value"])
            if value is None:
                return lambda m: dict(getattr(m, name))
            return lambda m: {k: value(x) for k, x in getattr(m, name).items()}
        one = self._single(f)
        if f.is_repeated:
            if one is None:
                return lambda m: list(getattr(m, name))
            return lambda m: [one(x) for x in getattr(m, name)]
        if f.has_presence:  # (messages, proto2 and `optional` fields, oneof members)
            if one is None:
                return lambda m: getattr(m, name) if m.HasField(name) else None
            return lambda m: one(getattr(m, name)) if m.HasField(name) else None
        if one is None:
            return lambda m: getattr(m, name)
        return lambda m: one(getattr(m, name))

    def _single(self, f: Any) -> Convert | None:
        if f.type == st.PB_ENUM:
            names = {v.number: v.name for v in f.enum_type.values}
            return lambda x: names.get(x, str(x))  # (an open enum's unknown number)
        if f.type not in (st.PB_MESSAGE, st.PB_GROUP):
            return None
        full = f.message_type.full_name
        if full == st.TIMESTAMP:
            return lambda x: EPOCH + dt.timedelta(seconds=x.seconds, microseconds=x.nanos // 1000)
        if full in st.WRAPPERS:
            return lambda x: x.value
        if full in st.AS_JSON:
            from google.protobuf import json_format

            return lambda x: json.dumps(json_format.MessageToDict(x), separators=(",", ":"))
        return self.of(f.message_type)


# ------------------------------------------------------------------------ JSON, decoding
def json_values(t: DataType) -> Convert:
    """A parsed JSON document as the Spark type ``t`` takes it (schema_types.json_type's):
    objects to structs by property name (missing: null), a string column takes any value
    that is not a string as its JSON text; SchemaMismatch naming the field otherwise (the
    payload was not checked against its schema when it was written, or not this one)."""
    if isinstance(t, StructType):
        fields = [(f.name, json_values(f.dataType)) for f in t.fields]

        def obj(v: Any) -> Any:
            if not isinstance(v, dict):
                raise SchemaMismatch("", f"expected an object, got {_got(v)}")
            out = {}
            for name, conv in fields:
                x = v.get(name)
                try:
                    out[name] = None if x is None else conv(x)
                except SchemaMismatch as e:
                    raise _within(name, e) from None
            return out
        return obj
    if isinstance(t, ArrayType):
        item = json_values(t.elementType)

        def array(v: Any) -> Any:
            if not isinstance(v, list):
                raise SchemaMismatch("", f"expected an array, got {_got(v)}")
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(None if x is None else item(x))
                except SchemaMismatch as e:
                    raise _within(f"[{i}]", e) from None
            return out
        return array
    if isinstance(t, MapType):
        value = json_values(t.valueType)

        def mapping(v: Any) -> Any:
            if not isinstance(v, dict):
                raise SchemaMismatch("", f"expected an object, got {_got(v)}")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = None if x is None else value(x)
                except SchemaMismatch as e:
                    raise _within(k, e) from None
            return out
        return mapping
    if isinstance(t, StringType):
        return lambda v: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
    if isinstance(t, (LongType, IntegerType)):
        low, high = LONG if isinstance(t, LongType) else INT

        def integer(v: Any) -> Any:
            if type(v) is float and v.is_integer():
                v = int(v)
            if type(v) is not int or not low <= v <= high:
                raise SchemaMismatch("", f"expected an integer, got {_got(v)}")
            return v
        return integer
    if isinstance(t, (DoubleType, FloatType)):
        def number(v: Any) -> Any:
            if type(v) not in (int, float):
                raise SchemaMismatch("", f"expected a number, got {_got(v)}")
            return float(v)
        return number
    if isinstance(t, BooleanType):
        def boolean(v: Any) -> Any:
            if type(v) is not bool:
                raise SchemaMismatch("", f"expected true or false, got {_got(v)}")
            return v
        return boolean
    if isinstance(t, NullType):
        def null(v: Any) -> Any:
            raise SchemaMismatch("", f"expected null, got {_got(v)}")
        return null
    raise TypeError(f"no JSON values for Spark type {t.simpleString()}")  # (json_type makes none)


# ------------------------------------------------------------------------------ encoding
def encodable(arrow_type: Any, schema_type: str) -> Convert | None:
    """``to_pylist()`` values of ``arrow_type`` as the encoder of a ``schema_type`` schema
    takes them: maps as dicts; for PROTOBUF and JSON, fields that are null left out (an
    unset field; a JSON property left out), for PROTOBUF bytes in base64 and timestamps in
    RFC 3339 (proto3's JSON mapping, what the Protobuf type's dicts are), for JSON dates and
    timestamps in ISO 8601 and decimals as numbers. None when the values fit as they are."""
    import pyarrow as pa

    drop_nulls = schema_type in ("PROTOBUF", "JSON")
    t = arrow_type
    if pa.types.is_struct(t):
        convs = [(t.field(i).name, encodable(t.field(i).type, schema_type))
                 for i in range(t.num_fields)]
        if not drop_nulls and all(c is None for _, c in convs):
            return None

        def struct(v: Any) -> Any:
            out: dict[str, Any] = {}
            for name, c in convs:
                x = v.get(name)
                if x is None:
                    if not drop_nulls:
                        out[name] = None
                else:
                    out[name] = x if c is None else c(x)
            return out
        return _unless_null(struct)
    if pa.types.is_map(t):
        value = encodable(t.item_type, schema_type)
        return _unless_null(lambda v: {k: x if value is None or x is None else value(x)
                                       for k, x in v})
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = encodable(t.value_type, schema_type)
        return None if item is None else \
            _unless_null(lambda v: [x if x is None else item(x) for x in v])
    if schema_type == "PROTOBUF":
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return _unless_null(lambda v: base64.b64encode(v).decode("ascii"))
        if pa.types.is_timestamp(t):
            return _unless_null(_rfc3339)
        if pa.types.is_decimal(t):
            return _unless_null(lambda v: int(v) if v == v.to_integral_value() else str(v))
    if schema_type == "JSON":
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            return _unless_null(lambda v: v.isoformat())
        if pa.types.is_decimal(t):
            return _unless_null(lambda v: int(v) if v == v.to_integral_value() else float(v))
    return None


def _unless_null(conv: Convert) -> Convert:
    return lambda v: None if v is None else conv(v)


def _rfc3339(v: dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return v.isoformat() + "Z"


def avro_encodable(schema: Any, named: dict[str, Any]) -> Convert | None:
    """A union Spark holds as a struct of ``member0``, ``member1``... (schema_types) back to
    the value of its one member that is not null, for values of the parsed Avro ``schema``
    (``named``: its named types); None when no such union is in it."""
    return _ae(schema, named, ())


def _ae(s: Any, named: dict[str, Any], stack: tuple[str, ...]) -> Convert | None:
    if isinstance(s, str):
        if s in st.AVRO_PRIMITIVES or s in stack:
            return None
        return _ae(named[s], named, stack)
    if isinstance(s, list):
        rest, how = st.avro_branches(s, named)
        if how == "one":
            return _ae(rest[0], named, stack)
        if how != "members":
            return None
        members = [(f"member{i}", _ae(b, named, stack)) for i, b in enumerate(rest)]
        keys = {k for k, _ in members}

        def member(v: Any) -> Any:
            if not isinstance(v, dict) or not v.keys() <= keys:
                return v  # (a plain value: the union's own converter picks the branch)
            for key, c in members:
                x = v.get(key)
                if x is not None:
                    return x if c is None else c(x)
            return None
        return member
    t = s["type"]
    if isinstance(t, (dict, list)) or (t not in st.AVRO_PRIMITIVES and t not in st.AVRO_COMPLEX):
        return _ae(t, named, stack)
    if t in ("record", "error"):
        inner = (*stack, s["name"])
        convs: list[tuple[str, Convert]] = []
        for f in s["fields"]:
            c = _ae(f["type"], named, inner)
            if c is not None:
                convs.append((f["name"], c))
        return _fields(convs)
    if t == "array":
        item = _ae(s["items"], named, stack)
        return None if item is None else \
            lambda v: [x if x is None else item(x) for x in v] if isinstance(v, list) else v
    if t == "map":
        value = _ae(s["values"], named, stack)
        return None if value is None else \
            lambda v: {k: x if x is None else value(x) for k, x in v.items()} \
            if isinstance(v, dict) else v
    return None


def protobuf_encodable(descriptor: Any) -> Convert | None:
    """Message dicts of ``descriptor`` with the JSON text Spark holds for Struct, Value and
    ListValue fields (schema_types.AS_JSON) parsed back; None when the message has none."""
    return _pe(descriptor, ())


def _pe(desc: Any, stack: tuple[str, ...]) -> Convert | None:
    if desc.full_name in stack:
        return None
    inner = (*stack, desc.full_name)
    convs: list[tuple[str, Convert]] = []
    for f in desc.fields:
        if f.message_type is None:
            continue
        entry = f.message_type.GetOptions().map_entry
        t = f.message_type.fields_by_name["value"].message_type if entry else f.message_type
        if t is None:
            continue
        one = _from_json_text if t.full_name in st.AS_JSON else _pe(t, inner)
        if one is None:
            continue
        if entry:
            convs.append((f.name, _each_value(one)))
        elif f.is_repeated:
            convs.append((f.name, _each_item(one)))
        else:
            convs.append((f.name, one))
    return _fields(convs)


def _from_json_text(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v)
    except ValueError:
        raise SchemaMismatch("", f"expected JSON text, got {_got(v)}") from None


def _fields(convs: list[tuple[str, Convert]]) -> Convert | None:
    """A dict's named fields converted (those not null), the rest as they are; None when
    there is nothing to convert."""
    if not convs:
        return None

    def fields(v: Any) -> Any:
        if isinstance(v, dict):
            v = dict(v)
            for name, c in convs:
                if v.get(name) is not None:
                    v[name] = c(v[name])
        return v
    return fields


def _each_value(one: Convert) -> Convert:
    return lambda v: {k: x if x is None else one(x) for k, x in v.items()} \
        if isinstance(v, dict) else v


def _each_item(one: Convert) -> Convert:
    return lambda v: [x if x is None else one(x) for x in v] if isinstance(v, list) else v


def json_encodable(shape: st.Shape) -> Convert | None:
    """Values with the JSON text Spark holds for parts of a JSON schema it has no type for
    (schema_types.TEXT) parsed back; None when the schema has no such part."""
    kind = shape[0]
    if kind == "text":
        return _from_json_text
    if kind == "struct":
        return _fields([(k, c) for k, sub in shape[1].items()
                        if (c := json_encodable(sub)) is not None])
    if kind in ("array", "map"):
        one = json_encodable(shape[1])
        return None if one is None else (_each_item if kind == "array" else _each_value)(one)
    return None
