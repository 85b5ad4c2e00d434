"""Avro's logical types as values: decimal, uuid, date, time-* and timestamp-* (and
local-timestamp-*) from their JSON forms and Python's types to what fastavro's writer takes,
and decoded back to the JSON ``avro_values`` documents."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from .avro_convert import INT_RANGE, LONG_RANGE, Bad, Convert, bytes_to_json, fixed_to_avro, to_bytes
from .errors import got

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()


def logical_to_avro(schema: dict[str, Any], logical: str) -> Convert | None:
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
        return _time(per_second, *(INT_RANGE if t == "int" else LONG_RANGE))
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
        return to_bytes if size is None else fixed_to_avro(size, schema["name"])  # ignored, as Avro does
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
    if type(v) is int and INT_RANGE[0] <= v <= INT_RANGE[1]:
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
        if type(v) is int and LONG_RANGE[0] <= v <= LONG_RANGE[1]:
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
    return format(v, "f") if isinstance(v, Decimal) else bytes_to_json(v)


LOGICAL_TO_JSON: dict[tuple[str, str], Convert | None] = {
    ("decimal", "bytes"): _decimal_to_json, ("decimal", "fixed"): _decimal_to_json,
    ("uuid", "string"): lambda v: str(v),
    ("date", "int"): lambda v: v.toordinal() - _EPOCH_DAY if isinstance(v, dt.date) else v,
    ("time-millis", "int"): _time_to_json(1000), ("time-micros", "long"): _time_to_json(1_000_000),
    ("timestamp-millis", "long"): _timestamp_to_json(1000),
    ("timestamp-micros", "long"): _timestamp_to_json(1_000_000),
    ("local-timestamp-millis", "long"): _timestamp_to_json(1000),
    ("local-timestamp-micros", "long"): _timestamp_to_json(1_000_000),
}
