"""AVRO schemas: parsed by fastavro (encode, decode) and by Apache Avro's Python library (its
checks of names, fields and symbols, which Confluent's Java parser also makes, and the model
the compatibility check walks: ``avro_compat``); values checked and converted by
``avro_values``."""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Sequence
from typing import Any

import avro.errors
import avro.name
import avro.schema
import fastavro
from fastavro.schema import UnknownType

from . import avro_compat
from .avro_values import PRIMITIVES, Bad, Compiler, Convert
from .errors import InvalidSchema, SchemaMismatch
from .kinds import Reference

# Confluent's parser ignores a logical type it cannot use (a decimal without a precision):
# so does Avro's Python library, with a warning per parse that nobody can act on
warnings.filterwarnings("ignore", category=avro.errors.IgnoredLogicalType)

# items an array of zero-width values may hold in one payload (their count is not bounded by
# the payload's length: a few bytes can claim 2^62 nulls)
MAX_EMPTY_ITEMS = 1 << 20
_STREAM = re.compile(r" from <[^<>]* at 0x[0-9a-f]+>")


class AvroSchema:
    """A parsed Avro schema (``kinds.Parsed``)."""

    schema_type = "AVRO"

    def __init__(self, text: str, doc: Any, fast: Any, model: avro.schema.Schema,
                 named: dict[str, Any]) -> None:
        self._text = text
        self._doc = doc
        self._fast = fast  # fastavro's parsed schema: the writer and the reader take it as is
        self.model = model  # Apache Avro's: for avro_compat
        self._named = named
        compiler = Compiler(named)
        self._to_avro: Convert = compiler.to_avro(fast)
        self._to_json: Convert | None = compiler.to_json(fast)
        self._guarded = _holds_empty_arrays(fast, named, set())
        self._fresh: Any = None  # the last value from_json made (encode need not check it)
        self._canonical: str | None = None
        self._normalized: str | None = None

    def __repr__(self) -> str:
        return f"AvroSchema({self.name})"

    @property
    def fast(self) -> Any:
        """fastavro's parsed schema: for readers that resolve a writer's schema against this
        one (engine.spark's decoded columns)."""
        return self._fast

    @property
    def named(self) -> dict[str, Any]:
        """The named types the schema knows, by full name (its references' included)."""
        return self._named

    @property
    def name(self) -> str:
        """The full name of the schema's type (``com.acme.Order``), or the type's name."""
        t = self._fast
        if isinstance(t, dict):
            return str(t.get("name", t.get("type")))
        return t if isinstance(t, str) else "union"

    def canonical(self) -> str:
        """The registered JSON, compact (Avro's ``toString`` keeps declaration order: so do
        we)."""
        if self._canonical is None:
            self._canonical = json.dumps(self._doc, separators=(",", ":"))
        return self._canonical

    def normalized(self) -> str:
        """Confluent's normalized form (``AvroSchemaUtils.toNormalizedString``): full names,
        named types written once, aliases sorted, the properties of each type in a fixed
        order then sorted; docs and defaults kept (they change what a schema means to a
        reader)."""
        if self._normalized is None:
            out = _normal(self._fast, "", set())
            self._normalized = json.dumps(out, separators=(",", ":"), ensure_ascii=False)
        return self._normalized

    def text(self, fmt: str | None = None) -> str:
        return self._text

    def problems_reading(self, writer: Any, names: tuple[str, str] = ("reader", "writer")
                         ) -> list[str]:
        """Why data written with ``writer`` does not read with this schema, one message per
        problem, as Confluent words them (``names``: how the messages call the reader and
        the writer, e.g. ``("new", "old")`` for a BACKWARD check)."""
        if getattr(writer, "schema_type", None) != "AVRO":
            return ["Incompatible because of different schema type"]
        try:
            return avro_compat.problems(self.model, writer.model, names)
        except Exception as e:  # as Confluent: a failed check is an incompatibility, not a 500
            return [f"Unexpected exception during compatibility check: {type(e).__name__}: {e}"]

    def from_json(self, doc: Any) -> Any:
        """JSON input as fastavro's values (see ``avro_values`` for the forms taken);
        SchemaMismatch naming the field when it does not fit."""
        value = self._convert(doc)
        self._fresh = value
        return value

    def _convert(self, value: Any) -> Any:
        try:
            return self._to_avro(value)
        except Bad as e:
            raise SchemaMismatch(e.path(), e.problem) from None
        except RecursionError:
            raise SchemaMismatch("", "nested too deeply") from None

    def encode(self, value: Any) -> bytes:
        """The Avro binary body of ``value`` (fastavro's ``schemaless_writer``: the bytes
        confluent-kafka's AvroSerializer writes after the 5-byte header)."""
        if value is not self._fresh:  # from_json checked and converted what it made
            value = self._convert(value)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._fast, value)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as e:
            # _to_avro took it, so this is a gap in its checks: still one line, no traceback
            raise SchemaMismatch("", f"does not encode as {self.name}: {e}") from None
        return out.getvalue()

    def decode(self, payload: bytes) -> Any:
        """The value of an Avro binary body (fastavro's values: dicts, lists, bytes, and
        Decimal, UUID, date, time, datetime for the logical types)."""
        data = bytes(payload)
        if self._guarded:
            problem = _check_empty_arrays(self._fast, self._named, data)
            if problem:
                raise SchemaMismatch("", f"payload does not decode as {self.name}: {problem}")
        try:
            return fastavro.schemaless_reader(io.BytesIO(data), self._fast, None)
        except Exception as e:  # garbage or truncated bytes: fastavro raises anything
            # (its EOFError names the stream: "cannot read double from <_io.BytesIO ...>")
            what = _STREAM.sub("", str(e)) or type(e).__name__
            if isinstance(e, EOFError):
                what = f"truncated ({what})" if str(e) else "truncated"
            raise SchemaMismatch("", f"payload does not decode as {self.name}: {what}") from None

    def to_json(self, value: Any) -> Any:
        """A decoded value as JSON values: unions plain (untagged); bytes and fixed as
        ISO-8859-1 strings (Avro's JSON encoding); date, time-* and timestamp-* as the
        numbers Avro stores, as Confluent's console consumer shows them; decimals as
        decimal strings; uuid as a string."""
        if self._to_json is None:
            return value
        try:
            return self._to_json(value)
        except RecursionError:
            raise SchemaMismatch("", "nested too deeply") from None


def parse(text: str, references: Sequence[Reference] = ()) -> AvroSchema:
    """``text`` as an Avro schema, the named types of ``references`` (Avro schemas, read in
    order) known to it; InvalidSchema with the parser's message when it does not parse."""
    try:
        return _parse(text, references)
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None


def _parse(text: str, references: Sequence[Reference]) -> AvroSchema:
    named: dict[str, Any] = {}
    names = avro.name.Names(validate_names=True)
    seen = set()
    for ref in references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        if (ref.schema_type or "AVRO").upper() != "AVRO":
            raise InvalidSchema(f"Invalid schema: reference {ref.name!r} ({ref.subject} version "
                                f"{ref.version}) is a {ref.schema_type} schema, not AVRO")
        try:
            _parse_one(ref.schema, named, names)
        except InvalidSchema as e:
            raise InvalidSchema(f"Invalid schema: reference {ref.name!r} ({ref.subject} version "
                                f"{ref.version}): {e}") from None
    doc, fast, model = _parse_one(text, named, names)
    return AvroSchema(text, doc, fast, model, named)


def _parse_one(text: str, named: dict[str, Any], names: avro.name.Names
               ) -> tuple[Any, Any, avro.schema.Schema]:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
    if not isinstance(doc, (str, list, dict)):
        raise InvalidSchema(f"Invalid schema: expected a JSON object, array or string, got {text!r}")
    # fastavro names an unknown type plainly; Apache Avro words the structural problems
    # (duplicate fields, bad names, missing sizes) as Java's parser does; fastavro checks the
    # defaults, which Confluent's parser also validates for a new schema
    fast_error = None
    before = dict(named)
    try:
        fast = fastavro.parse_schema(doc, named_schemas=named)
    except UnknownType as e:
        raise InvalidSchema(f"Invalid schema: unknown type {e.name!r}: not a primitive type, "
                            "nor a named type defined before it in the schema or in a reference"
                            ) from None
    except Exception as e:  # fastavro raises KeyError, TypeError... on malformed schemas
        fast_error = str(e) if not isinstance(e, KeyError) else f"missing {e}"
        named.clear()
        named.update(before)
    try:
        model = avro.schema.make_avsc_object(doc, names)
    except Exception as e:  # avro raises its SchemaParseException and more on bad input
        raise InvalidSchema(f"Invalid schema: {_one_line(str(e))}") from None
    if fast_error is not None:
        raise InvalidSchema(f"Invalid schema: {_one_line(fast_error)}")
    if not isinstance(doc, dict) and _names_a_type(fast):
        # a union (or a name) at the top that names types, as Confluent's "all types in one
        # topic" layout: fastavro keeps named types in a record's own schema, so only the
        # expanded form encodes (the same bytes)
        try:
            fast = fastavro.parse_schema(doc, named_schemas=dict(before), expand=True)
        except RecursionError:
            raise InvalidSchema("Invalid schema: a recursive type named at the top of a "
                                "union: wrap the union in a record") from None
    return doc, fast, model


def _names_a_type(fast: Any) -> bool:
    items = fast if isinstance(fast, list) else [fast]
    return any(isinstance(x, str) and x not in PRIMITIVES for x in items)


def _one_line(message: str) -> str:
    return " ".join(message.split())


# ---- Confluent's normalized form ----

_OWN = {
    "record": ("name", "namespace", "type", "fields", "doc", "aliases"),
    "error": ("name", "namespace", "type", "fields", "doc", "aliases"),
    "enum": ("name", "namespace", "type", "symbols", "doc", "aliases", "default"),
    "fixed": ("name", "namespace", "type", "size", "doc", "aliases"),
    "array": ("type", "items"),
    "map": ("type", "values"),
}
_FIELD_OWN = ("name", "type", "order", "doc", "aliases", "default")
_LOGICAL_OWN = ("logicalType", "precision", "scale")


def _normal(schema: Any, space: str, seen: set[str]) -> Any:
    """``AvroSchemaUtils.build``, on fastavro's parsed form (full names everywhere)."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return [_normal(b, space, seen) for b in schema]
    t = schema["type"]
    if not isinstance(t, str):
        return _normal(t, space, seen)
    out: dict[str, Any] = {}
    if t in ("record", "error", "enum", "fixed"):
        name = schema["name"]
        if name in seen:
            return name
        seen.add(name)
        out["name"] = name
        own_space = name.rpartition(".")[0]
        if not own_space and space:
            out["namespace"] = ""  # else the enclosing namespace would claim it
        out["type"] = t
        if t == "enum":
            out["symbols"] = list(schema["symbols"])
        elif t == "fixed":
            out["size"] = schema["size"]
        else:
            out["fields"] = [_normal_field(f, own_space, seen) for f in schema["fields"]]
        _logical(schema, out)
        if schema.get("doc"):
            out["doc"] = schema["doc"]
        if schema.get("aliases"):
            out["aliases"] = sorted(a if "." in a or not own_space else f"{own_space}.{a}"
                                    for a in schema["aliases"])
        if t == "enum" and "default" in schema:
            out["default"] = schema["default"]
    elif t in ("array", "map"):
        out["type"] = t
        key = "items" if t == "array" else "values"
        out[key] = _normal(schema[key], space, seen)
        _logical(schema, out)
    else:
        rest = {k: v for k, v in schema.items() if k != "type" and not k.startswith("__")}
        if not rest:
            return t
        out["type"] = t
        _logical(schema, out)
    own = _OWN.get(t, ("type",)) + _LOGICAL_OWN
    for k in sorted(schema):
        if k not in own and not k.startswith("__"):
            out[k] = schema[k]
    return out


def _normal_field(field: dict[str, Any], space: str, seen: set[str]) -> dict[str, Any]:
    out = {"name": field["name"], "type": _normal(field["type"], space, seen)}
    if field.get("order", "ascending") != "ascending":
        out["order"] = field["order"]
    if field.get("doc") is not None:
        out["doc"] = field["doc"]
    if field.get("aliases"):
        out["aliases"] = sorted(field["aliases"])
    if "default" in field:
        out["default"] = field["default"]
    for k in sorted(field):
        if k not in _FIELD_OWN and not k.startswith("__"):
            out[k] = field[k]
    return out


def _logical(schema: dict[str, Any], out: dict[str, Any]) -> None:
    logical = schema.get("logicalType")
    if logical is None:
        return
    out["logicalType"] = logical
    if logical == "decimal":
        if "precision" in schema:
            out["precision"] = schema["precision"]
        if schema.get("scale"):
            out["scale"] = schema["scale"]


# ---- arrays of zero-width items: their counts are checked before fastavro reads them ----

def _width_zero(schema: Any, named: dict[str, Any], seen: set[str]) -> bool:
    """Whether every value of the type encodes to no bytes (null, fixed(0), records of
    those)."""
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema == "null"
        if schema in seen:
            return False
        return _width_zero(named[schema], named, seen | {schema})
    if isinstance(schema, list):
        return False
    t = schema["type"]
    if t == "fixed":
        return schema["size"] == 0
    if t in ("record", "error"):
        inner = seen | {schema["name"]}
        return all(_width_zero(f["type"], named, inner) for f in schema["fields"])
    return t == "null" or (not isinstance(t, str) and _width_zero(t, named, seen))


def _holds_empty_arrays(schema: Any, named: dict[str, Any], seen: set[str]) -> bool:
    if isinstance(schema, str):
        if schema in PRIMITIVES or schema in seen:
            return False
        return _holds_empty_arrays(named[schema], named, seen | {schema})
    if isinstance(schema, list):
        return any(_holds_empty_arrays(b, named, seen) for b in schema)
    t = schema["type"]
    if t == "array":
        return _width_zero(schema["items"], named, set()) or \
            _holds_empty_arrays(schema["items"], named, seen)
    if t == "map":
        return _holds_empty_arrays(schema["values"], named, seen)
    if t in ("record", "error"):
        inner = seen | {schema["name"]}
        return any(_holds_empty_arrays(f["type"], named, inner) for f in schema["fields"])
    return not isinstance(t, str) and _holds_empty_arrays(t, named, seen)


class _Short(Exception):
    pass


def _check_empty_arrays(schema: Any, named: dict[str, Any], data: bytes) -> str | None:
    """Walks the payload as the schema lays it out (skipping, building nothing) and counts
    the items of zero-width arrays: a problem when they pass ``MAX_EMPTY_ITEMS``; None when
    within (or when the walk meets bad bytes: fastavro then says what is wrong)."""
    state = [0, 0]  # position, zero-width items seen

    def varint() -> int:
        pos, shift, n = state[0], 0, 0
        while True:
            if pos >= len(data) or shift > 63:
                raise _Short
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        state[0] = pos
        return (n >> 1) ^ -(n & 1)

    def skip(n: int) -> None:
        if n < 0 or state[0] + n > len(data):
            raise _Short
        state[0] += n

    def walk(s: Any) -> None:
        if isinstance(s, str):
            if s in PRIMITIVES:
                return prim(s)
            return walk(named[s])
        if isinstance(s, list):
            i = varint()
            if not 0 <= i < len(s):
                raise _Short
            return walk(s[i])
        t = s["type"]
        if not isinstance(t, str) or t in PRIMITIVES:
            return walk(t) if not isinstance(t, str) else prim(t)
        if t in ("record", "error"):
            for f in s["fields"]:
                walk(f["type"])
        elif t == "enum":
            varint()
        elif t == "fixed":
            skip(s["size"])
        else:
            inner = s["items"] if t == "array" else s["values"]
            empty = t == "array" and _width_zero(inner, named, set())
            while True:
                count = varint()
                if count == 0:
                    return
                if count < 0:
                    count = -count
                    varint()  # the block's size in bytes
                if empty:
                    state[1] += count
                    if state[1] > MAX_EMPTY_ITEMS:
                        raise OverflowError
                    continue
                for _ in range(count):
                    if t == "map":
                        skip(varint())
                    walk(inner)

    def prim(t: str) -> None:
        if t in ("int", "long"):
            varint()
        elif t == "boolean":
            skip(1)
        elif t == "float":
            skip(4)
        elif t == "double":
            skip(8)
        elif t in ("bytes", "string"):
            skip(varint())

    try:
        walk(schema)
    except OverflowError:
        return (f"it claims more than {MAX_EMPTY_ITEMS} items of zero width in arrays "
                "(rivven's bound on those)")
    except (_Short, RecursionError):
        return None
    return None
