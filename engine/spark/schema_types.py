"""Spark types of registered schemas: what a decoded ``key`` or ``value`` column of the
``rivven`` source holds (docs/SPARK.md, "Schemas").

- AVRO, from fastavro's parsed schema, as spark-avro's ``SchemaConverters`` maps it: records
  to structs, enums to strings, fixed and bytes to binary, a union with null to its other
  branch, ``[int, long]`` to long, ``[float, double]`` to double, any other union to a struct
  of ``member0``, ``member1``... (one per branch that is not null); logical types: date,
  timestamp-millis/-micros (timestamp), local-timestamp-* (timestamp_ntz), decimal(p, s)
  (decimal; more than 38 digits is refused), time-millis (int, ms) and time-micros (long, µs),
  uuid (string).
- PROTOBUF, from the message's descriptor: int32/sint32/sfixed32 int; int64/sint64/sfixed64
  long; uint32/fixed32 long; uint64/fixed64 decimal(20,0) (every value fits); float, double,
  bool; string; bytes binary; enums string (the value's name); repeated fields arrays; maps
  maps; messages structs; google.protobuf.Timestamp timestamp; the wrappers
  (google.protobuf.Int64Value...) their value, null when unset; Struct, Value and ListValue
  a string holding their JSON.
- JSON, from the JSON Schema document: an object with ``properties`` (and no
  ``additionalProperties`` but ``false``) a struct of them; an object whose only content is a
  schema in ``additionalProperties`` a map of strings to it; any other object, an array of
  several item schemas (tuples), a value that may be of several types, a recursive one: a
  string holding its JSON. ``integer`` long, ``number`` double, ``boolean``, ``string``; a
  type with ``null`` beside it is that type; ``$ref``s are followed (to the document, or to a
  reference by its name).

Every field is nullable: a field missing from an older writer's record, a null in a union, an
unset message field, a value that did not decode under ``decodeErrors=null`` all read as null.
A recursive type (a record holding itself) has no Spark type: refused, naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..schemas.kinds import Reference

MAX_DECIMAL = 38  # Spark's DecimalType holds at most 38 digits


class Unsupported(ValueError):
    """A schema with a part Spark has no type for (a recursive type, a decimal too wide)."""


def _field(name: str, t: DataType) -> StructField:
    return StructField(name, t, True)


# ---------------------------------------------------------------------------------- AVRO
AVRO_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
AVRO_COMPLEX = frozenset(("record", "error", "enum", "fixed", "array", "map"))


def avro_named(schema: Any) -> dict[str, Any]:
    """The named types fastavro's parsed ``schema`` knows (its own and its references')."""
    return schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}


def avro_type(schema: Any, named: dict[str, Any] | None = None) -> DataType:
    """The Spark type of values of fastavro's parsed Avro ``schema``."""
    return _avro(schema, avro_named(schema) if named is None else named, (), "")


def _avro(s: Any, named: dict[str, Any], stack: tuple[str, ...], at: str) -> DataType:
    if isinstance(s, str):
        if s in AVRO_PRIMITIVES:
            return AVRO_PRIMITIVES[s]
        if s not in named:
            raise Unsupported(f"{at or 'the schema'}: unknown Avro type {s!r}")
        s = named[s]
    if isinstance(s, list):
        return _avro_union(s, named, stack, at)
    t = s["type"]
    if isinstance(t, (dict, list)) or (t not in AVRO_PRIMITIVES and t not in AVRO_COMPLEX):
        return _avro(t, named, stack, at)  # {"type": {...}} or {"type": "a.Named"}
    logical = _avro_logical(s)
    if logical is not None:
        return logical
    if t in ("record", "error"):
        name = s["name"]
        if name in stack:
            raise Unsupported(f"{at or 'the schema'}: the record {name} holds itself; Spark "
                              "has no recursive types")
        return StructType([_field(f["name"], _avro(f["type"], named, (*stack, name),
                                                   _join(at, f["name"])))
                           for f in s["fields"]])
    if t == "enum":
        return StringType()
    if t == "fixed":
        return BinaryType()
    if t == "array":
        return ArrayType(_avro(s["items"], named, stack, at + "[]"), True)
    if t == "map":
        return MapType(StringType(), _avro(s["values"], named, stack, at + "{}"), True)
    return AVRO_PRIMITIVES[t]


def avro_branches(union: list[Any], named: dict[str, Any]) -> tuple[list[Any], str]:
    """A union's branches other than null and how Spark holds it: ``"null"`` (only null),
    ``"one"`` (one branch), ``"long"`` (int and long), ``"double"`` (float and double),
    ``"members"`` (a struct with a field per branch)."""
    rest = [b for b in union if b != "null"]
    if not rest:
        return rest, "null"
    if len(rest) == 1:
        return rest, "one"
    kinds = {avro_kind(b, named) for b in rest}
    if len(rest) == 2 and kinds == {"int", "long"}:
        return rest, "long"
    if len(rest) == 2 and kinds == {"float", "double"}:
        return rest, "double"
    return rest, "members"


def avro_kind(s: Any, named: dict[str, Any]) -> str:
    """The Avro type's name, logical types left aside (spark-avro's ``getType``)."""
    while True:
        if isinstance(s, str):
            if s in named:
                s = named[s]
                continue
            return s
        if isinstance(s, list):
            return "union"
        t = s["type"]
        if isinstance(t, str) and (t in AVRO_PRIMITIVES or t in AVRO_COMPLEX):
            return "record" if t == "error" else t
        s = t


def _avro_union(union: list[Any], named: dict[str, Any], stack: tuple[str, ...],
                at: str) -> DataType:
    rest, how = avro_branches(union, named)
    if how == "null":
        return NullType()
    if how == "one":
        return _avro(rest[0], named, stack, at)
    if how == "long":
        return LongType()
    if how == "double":
        return DoubleType()
    return StructType([_field(f"member{i}", _avro(b, named, stack, _join(at, f"member{i}")))
                       for i, b in enumerate(rest)])


def _avro_logical(s: dict[str, Any]) -> DataType | None:
    logical, t = s.get("logicalType"), s.get("type")
    if logical is None:
        return None
    if logical == "decimal" and t in ("bytes", "fixed"):
        p, scale = s.get("precision"), s.get("scale", 0) or 0
        if not isinstance(p, int) or p <= 0 or not isinstance(scale, int) or not 0 <= scale <= p:
            return None  # not a usable decimal: read as its type (Avro ignores it too)
        if p > MAX_DECIMAL:
            raise Unsupported(f"decimal({p},{scale}) has more than {MAX_DECIMAL} digits, "
                              "which Spark's decimal type holds at most")
        return DecimalType(p, scale)
    return AVRO_LOGICAL.get((str(logical), str(t)))


AVRO_LOGICAL: dict[tuple[str, str], DataType] = {
    ("date", "int"): DateType(), ("time-millis", "int"): IntegerType(),
    ("time-micros", "long"): LongType(), ("timestamp-millis", "long"): TimestampType(),
    ("timestamp-micros", "long"): TimestampType(),
    ("local-timestamp-millis", "long"): TimestampNTZType(),
    ("local-timestamp-micros", "long"): TimestampNTZType(), ("uuid", "string"): StringType()}


def _join(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


# ------------------------------------------------------------------------------ PROTOBUF
# FieldDescriptor.TYPE_* numbers (descriptor.proto's FieldDescriptorProto.Type)
PB_DOUBLE, PB_FLOAT, PB_INT64, PB_UINT64, PB_INT32, PB_FIXED64, PB_FIXED32, PB_BOOL = range(1, 9)
PB_STRING, PB_GROUP, PB_MESSAGE, PB_BYTES, PB_UINT32, PB_ENUM = range(9, 15)
PB_SFIXED32, PB_SFIXED64, PB_SINT32, PB_SINT64 = range(15, 19)
UINT64 = DecimalType(20, 0)  # 2^64 - 1 has 20 digits
PB_SCALARS: dict[int, DataType] = {
    PB_DOUBLE: DoubleType(), PB_FLOAT: FloatType(), PB_BOOL: BooleanType(),
    PB_INT32: IntegerType(), PB_SINT32: IntegerType(), PB_SFIXED32: IntegerType(),
    PB_INT64: LongType(), PB_SINT64: LongType(), PB_SFIXED64: LongType(),
    PB_UINT32: LongType(), PB_FIXED32: LongType(), PB_UINT64: UINT64, PB_FIXED64: UINT64,
    PB_STRING: StringType(), PB_BYTES: BinaryType(), PB_ENUM: StringType(),
}
WRAPPERS = {f"google.protobuf.{n}Value" for n in
            ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}
AS_JSON = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
TIMESTAMP = "google.protobuf.Timestamp"


def protobuf_type(descriptor: Any) -> StructType:
    """The Spark struct of messages of ``descriptor`` (a protobuf ``Descriptor``)."""
    return _pb_message(descriptor, (), "")


def _pb_message(desc: Any, stack: tuple[str, ...], at: str) -> StructType:
    if desc.full_name in stack:
        raise Unsupported(f"{at or 'the schema'}: the message {desc.full_name} holds itself; "
                          "Spark has no recursive types")
    inner = (*stack, desc.full_name)
    return StructType([_field(f.name, _pb_field(f, inner, _join(at, f.name)))
                       for f in desc.fields])


def _pb_field(f: Any, stack: tuple[str, ...], at: str) -> DataType:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return MapType(_pb_single(k, stack, at), _pb_single(v, stack, at + "{}"), True)
    t = _pb_single(f, stack, at)
    return ArrayType(t, True) if f.is_repeated else t


def _pb_single(f: Any, stack: tuple[str, ...], at: str) -> DataType:
    if f.type not in (PB_MESSAGE, PB_GROUP):
        return PB_SCALARS[f.type]
    name = f.message_type.full_name
    if name == TIMESTAMP:
        return TimestampType()
    if name in WRAPPERS:
        return PB_SCALARS[f.message_type.fields_by_name["value"].type]
    if name in AS_JSON:
        return StringType()
    return _pb_message(f.message_type, stack, at)


# ---------------------------------------------------------------------------------- JSON
# A JSON schema's shape: ("struct", {property: shape}), ("array", shape), ("map", shape),
# ("scalar", DataType), or TEXT (a value held as its JSON text in a string column).
Shape = tuple[Any, ...]
TEXT: Shape = ("text",)
JSON_SCALARS: dict[str, DataType] = {"integer": LongType(), "number": DoubleType(),
                                     "boolean": BooleanType(), "string": StringType(),
                                     "null": NullType()}


class JsonRefs:
    """A JSON Schema document and its references, to follow ``$ref``s: ``#/pointer`` within
    the document a ``$ref`` is in, ``NAME`` or ``NAME#/pointer`` in the reference ``NAME``."""

    def __init__(self, text: str, references: Sequence[Reference]) -> None:
        self.root = json.loads(text)
        self.docs = {r.name: json.loads(r.schema) for r in references}

    def resolve(self, ref: str, base: Any) -> tuple[Any, Any] | None:
        """``(schema, its document)`` a ``$ref`` names, or None when it names nothing known."""
        name, _, pointer = ref.partition("#")
        doc = base if not name else self.docs.get(name)
        if doc is None:
            return None
        node = doc
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node, doc


def json_type(text: str, references: Sequence[Reference] = ()) -> DataType:
    """The Spark type of documents of the JSON Schema ``text`` (with its references)."""
    return shape_type(json_shape(text, references))


def json_shape(text: str, references: Sequence[Reference] = ()) -> Shape:
    """The shape of documents of the JSON Schema ``text`` (with its references)."""
    refs = JsonRefs(text, references)
    return _json(refs.root, refs.root, refs, ())


def shape_type(shape: Shape) -> DataType:
    kind = shape[0]
    if kind == "struct":
        return StructType([_field(k, shape_type(v)) for k, v in shape[1].items()])
    if kind == "array":
        return ArrayType(shape_type(shape[1]), True)
    if kind == "map":
        return MapType(StringType(), shape_type(shape[1]), True)
    if kind == "scalar":
        return shape[1]
    return StringType()


def _json(s: Any, doc: Any, refs: JsonRefs, stack: tuple[int, ...]) -> Shape:
    if not isinstance(s, dict):
        return TEXT  # true, false: anything
    if id(s) in stack:
        return TEXT  # recursive: its JSON text
    stack = (*stack, id(s))
    if isinstance(s.get("$ref"), str):
        found = refs.resolve(s["$ref"], doc)
        return TEXT if found is None else _json(found[0], found[1], refs, stack)
    types = s.get("type")
    if types is None:
        if "properties" in s:
            types = "object"
        elif "items" in s:
            types = "array"
        else:
            return _json_combined(s, doc, refs, stack)
    if isinstance(types, list):
        rest = [t for t in types if t != "null"]
        if len(rest) == 1:
            types = rest[0]
        elif set(rest) == {"integer", "number"}:
            return ("scalar", DoubleType())
        else:
            return TEXT
    if types == "object":
        # (additionalProperties not given: open, yet read as its properties, as most schemas
        # leave it out; true or a schema beside properties: its JSON, so nothing is lost)
        props, extra = s.get("properties"), s.get("additionalProperties")
        if isinstance(props, dict) and props and (extra is None or extra is False):
            return ("struct", {k: _json(v, doc, refs, stack) for k, v in props.items()})
        if not props and isinstance(extra, dict):
            return ("map", _json(extra, doc, refs, stack))
        return TEXT
    if types == "array":
        items = s.get("items")
        return ("array", _json(items, doc, refs, stack) if isinstance(items, dict) else TEXT)
    if isinstance(types, str) and types in JSON_SCALARS:
        return ("scalar", JSON_SCALARS[types])
    return TEXT


def _json_combined(s: dict[str, Any], doc: Any, refs: JsonRefs,
                   stack: tuple[int, ...]) -> Shape:
    """A schema without ``type``: ``anyOf``/``oneOf`` of one schema and null is that schema;
    ``allOf`` of objects is a struct of all their properties; anything else its JSON text."""
    for key in ("anyOf", "oneOf"):
        options = s.get(key)
        if isinstance(options, list):
            rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _json(rest[0], doc, refs, stack) if len(rest) == 1 else TEXT
    parts = s.get("allOf")
    if isinstance(parts, list) and parts:
        fields: dict[str, Shape] = {}
        for p in parts:
            shape = _json(p, doc, refs, stack)
            if shape[0] != "struct":
                return TEXT
            for k, v in shape[1].items():
                fields.setdefault(k, v)
        return ("struct", fields)
    return TEXT
