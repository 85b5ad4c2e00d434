"""Avro values: JSON input (and Python values) checked and turned into what fastavro's writer
takes, and decoded values turned back into JSON. Compiled once per schema into a tree of small
functions, so a record costs a few function calls and no schema walking.

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
import json
import math
import uuid
from collections.abc import Callable
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from ..errors import plural

Convert = Callable[[Any], Any]

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_INT = (-(1 << 31), (1 << 31) - 1)
_LONG = (-(1 << 63), (1 << 63) - 1)
_FLOAT_MAX = 3.4028234663852886e38
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_MISSING = object()


class Bad(Exception):
    """A value that does not fit; ``where`` collects the path on the way out (innermost
    first), so that the path costs nothing when the value fits."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where: list[str] = []

    def path(self) -> str:
        out = ""
        for part in reversed(self.where):
            out += part if part.startswith("[") or not out else "." + part
        return out


def got(v: Any) -> str:
    """A value as a problem names it: short, JSON-like."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, str):
        return repr(v) if len(v) <= 40 else repr(v[:37] + "...")
    if isinstance(v, (bytes, bytearray)):
        return plural(len(v), "byte")
    return repr(v)


def _symbols(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 10 else ", ".join(names[:10]) + ", ..."


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
                return _PRIMITIVE_TO_AVRO[schema]
            return self._named_to_avro(schema)
        if isinstance(schema, list):
            return self._union_to_avro(schema)
        t = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            conv = _logical_to_avro(schema, logical)
            if conv is not None:
                return conv
        if t == "record" or t == "error":
            return self._record_to_avro(schema)
        if t == "enum":
            return _enum_to_avro(schema)
        if t == "fixed":
            return _fixed_to_avro(schema["size"], schema["name"])
        if t == "array":
            return _array_to_avro(self.to_avro(schema["items"]))
        if t == "map":
            return _map_to_avro(self.to_avro(schema["values"]))
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
                return _bytes_to_json if schema == "bytes" else None
            return self._named_to_json(schema)
        if isinstance(schema, list):
            return self._union_to_json(schema)
        t = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            conv = _LOGICAL_TO_JSON.get((logical, t if isinstance(t, str) else ""), _MISSING)
            if conv is not _MISSING:
                return conv  # type: ignore[return-value]
        if t == "record" or t == "error":
            return self._record_to_json(schema)
        if t == "enum":
            return None
        if t == "fixed":
            return _bytes_to_json
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


# ---- primitives ----

def _null(v: Any) -> Any:
    if v is None:
        return None
    raise Bad(f"expected null, got {got(v)}")


def _boolean(v: Any) -> Any:
    if v is True or v is False:
        return v
    raise Bad(f"expected boolean, got {got(v)}")


def _integer(kind: str, low: int, high: int) -> Convert:
    def integer(v: Any) -> Any:
        if type(v) is int and low <= v <= high:
            return v
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            if low <= v <= high:
                return int(v)
            raise Bad(f"{v} is out of range for {kind}")
        raise Bad(f"expected {kind}, got {got(v)}")
    return integer


def _double(v: Any) -> Any:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise Bad(f"expected double, got {got(v)}")


def _float(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = float(v)
        if abs(v) > _FLOAT_MAX and not math.isinf(v):
            raise Bad(f"{v} is out of range for float")
        return v
    raise Bad(f"expected float, got {got(v)}")


def _string(v: Any) -> Any:
    if type(v) is str:
        return v
    raise Bad(f"expected string, got {got(v)}")


def _bytes(v: Any) -> Any:
    if type(v) is bytes:
        return v
    if isinstance(v, str):
        try:
            return v.encode("latin-1")
        except UnicodeEncodeError:
            raise Bad("expected bytes as a string of code points 0-255 (Avro's JSON encoding "
                      f"of bytes), got {got(v)}") from None
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise Bad(f"expected bytes, got {got(v)}")


_PRIMITIVE_TO_AVRO: dict[str, Convert] = {
    "null": _null, "boolean": _boolean, "int": _integer("int", *_INT),
    "long": _integer("long", *_LONG), "float": _float, "double": _double, "string": _string,
    "bytes": _bytes,
}


def _bytes_to_json(v: Any) -> Any:
    return v.decode("latin-1")


# ---- complex types ----

def _enum_to_avro(schema: dict[str, Any]) -> Convert:
    symbols = list(schema["symbols"])
    known = frozenset(symbols)
    listed = _symbols(symbols)

    def enum(v: Any) -> Any:
        if type(v) is str and v in known:
            return v
        raise Bad(f"expected one of {listed} (enum {schema['name']}), got {got(v)}")
    return enum


def _fixed_to_avro(size: int, name: str) -> Convert:
    def fixed(v: Any) -> Any:
        b = _bytes(v)
        if len(b) != size:
            raise Bad(f"expected {plural(size, 'byte')} (fixed {name}), got {len(b)}")
        return b
    return fixed


def _array_to_avro(items: Convert) -> Convert:
    def array(v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            raise Bad(f"expected an array, got {got(v)}")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(items(x))
            except Bad as e:
                e.where.append(f"[{i}]")
                raise
        return out
    return array


def _map_to_avro(values: Convert) -> Convert:
    def avro_map(v: Any) -> Any:
        if not isinstance(v, dict):
            raise Bad(f"expected an object (map), got {got(v)}")
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise Bad(f"map keys must be strings, got {got(k)}")
            try:
                out[k] = values(x)
            except Bad as e:
                e.where.append(f"[{json.dumps(k)}]")
                raise
        return out
    return avro_map


# ---- logical types ----

def _logical_to_avro(schema: dict[str, Any], logical: str) -> Convert | None:
    """The converter of a logical type, or None for one fastavro does not know (the
    underlying type's is used, as Avro does with unknown logical types)."""
    t = schema["type"]
    if logical == "decimal" and t in ("bytes", "fixed"):
        return _decimal(schema)
    if logical == "uuid" and t == "string":
        return _uuid
    unit = _UNITS.get((logical, t))
    if unit is None:
        return None
    kind, per_second = unit
    if kind == "date":
        return _date
    if kind == "time":
        return _time(per_second, *(_INT if t == "int" else _LONG))
    return _timestamp(per_second, logical.startswith("local-"))


_UNITS = {
    ("date", "int"): ("date", 0), ("time-millis", "int"): ("time", 1000),
    ("time-micros", "long"): ("time", 1_000_000),
    ("timestamp-millis", "long"): ("ts", 1000), ("timestamp-micros", "long"): ("ts", 1_000_000),
    ("local-timestamp-millis", "long"): ("ts", 1000),
    ("local-timestamp-micros", "long"): ("ts", 1_000_000),
}


def _decimal(schema: dict[str, Any]) -> Convert:
    precision = schema.get("precision")
    scale = schema.get("scale", 0) or 0
    size = schema.get("size")
    if not isinstance(precision, int) or precision <= 0 or not isinstance(scale, int):
        return _bytes if size is None else _fixed_to_avro(size, schema["name"])  # ignored, as Avro does
    quantum = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** precision
    context = Context(prec=precision + scale + 30)  # the default 28 digits may be too few

    def decimal(v: Any) -> Any:
        if isinstance(v, Decimal):
            d = v
        elif isinstance(v, (int, str)) and not isinstance(v, bool):
            try:
                d = Decimal(v)
            except InvalidOperation:
                raise Bad(f"expected a decimal number, got {got(v)}") from None
        elif isinstance(v, float):
            d = Decimal(repr(v))
        else:
            raise Bad(f"expected a decimal number, got {got(v)}")
        if not d.is_finite():
            raise Bad(f"expected a decimal number, got {got(v)}")
        if abs(d) >= limit:  # a bound before quantizing, which costs in the digits
            raise Bad(f"{v} has more than {precision} digits (decimal({precision},{scale}))")
        q = d.quantize(quantum, context=context)
        if q != d:
            raise Bad(f"{v} has more than {scale} decimal places (decimal({precision},{scale}))")
        if abs(q.scaleb(scale, context=context)) >= limit:
            raise Bad(f"{v} has more than {precision} digits (decimal({precision},{scale}))")
        return q
    return decimal


def _uuid(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, str):
        try:
            uuid.UUID(v)
        except ValueError:
            raise Bad(f"expected a UUID, got {got(v)}") from None
        return v
    raise Bad(f"expected a UUID string, got {got(v)}")


def _date(v: Any) -> Any:
    if type(v) is int and _INT[0] <= v <= _INT[1]:
        return v
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return v.toordinal() - _EPOCH_DAY
    if isinstance(v, str):
        try:
            return dt.date.fromisoformat(v).toordinal() - _EPOCH_DAY
        except ValueError:
            pass
    raise Bad(f"expected a date (days since 1970-01-01, or YYYY-MM-DD), got {got(v)}")


def _time(per_second: int, low: int, high: int) -> Convert:
    unit = "ms" if per_second == 1000 else "µs"

    def time(v: Any) -> Any:
        if type(v) is int and low <= v <= high:
            return v
        if isinstance(v, str):
            try:
                v = dt.time.fromisoformat(v)
            except ValueError:
                pass
        if isinstance(v, dt.time):
            micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
            return micros // (1_000_000 // per_second)
        raise Bad(f"expected a time of day ({unit} since midnight, or HH:MM:SS), got {got(v)}")
    return time


def _timestamp(per_second: int, local: bool) -> Convert:
    unit = "ms" if per_second == 1000 else "µs"
    step = dt.timedelta(microseconds=1_000_000 // per_second)

    def timestamp(v: Any) -> Any:
        if type(v) is int and _LONG[0] <= v <= _LONG[1]:
            return v
        if isinstance(v, str):
            try:
                v = dt.datetime.fromisoformat(v)
            except ValueError:
                pass
        if isinstance(v, dt.datetime):
            if local:
                return (v.replace(tzinfo=None) - _EPOCH_NAIVE) // step
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.UTC)
            return (v - _EPOCH) // step
        raise Bad(f"expected a timestamp ({unit} since the epoch, or ISO 8601), got {got(v)}")
    return timestamp


def _time_to_json(per_second: int) -> Convert:
    def time(v: Any) -> Any:
        if not isinstance(v, dt.time):
            return v
        micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
        return micros // (1_000_000 // per_second)
    return time


def _timestamp_to_json(per_second: int) -> Convert:
    step = dt.timedelta(microseconds=1_000_000 // per_second)

    def timestamp(v: Any) -> Any:
        if not isinstance(v, dt.datetime):
            return v
        if v.tzinfo is None:
            return (v - _EPOCH_NAIVE) // step
        return (v - _EPOCH) // step
    return timestamp


def _decimal_to_json(v: Any) -> Any:
    return format(v, "f") if isinstance(v, Decimal) else _bytes_to_json(v)


_LOGICAL_TO_JSON: dict[tuple[str, str], Convert | None] = {
    ("decimal", "bytes"): _decimal_to_json, ("decimal", "fixed"): _decimal_to_json,
    ("uuid", "string"): lambda v: str(v),
    ("date", "int"): lambda v: v.toordinal() - _EPOCH_DAY if isinstance(v, dt.date) else v,
    ("time-millis", "int"): _time_to_json(1000), ("time-micros", "long"): _time_to_json(1_000_000),
    ("timestamp-millis", "long"): _timestamp_to_json(1000),
    ("timestamp-micros", "long"): _timestamp_to_json(1_000_000),
    ("local-timestamp-millis", "long"): _timestamp_to_json(1000),
    ("local-timestamp-micros", "long"): _timestamp_to_json(1_000_000),
}
