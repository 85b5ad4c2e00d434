"""Avro's leaf converters: JSON input (and Python values) checked and turned into what
fastavro's writer takes, for the primitive types, enums, fixed, arrays and maps (``Bad``
naming the problem, the path collected on the way out), and bytes back to JSON. The compiler
(``avro_values``) puts them together per schema; ``avro_logical`` does the logical types."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ..errors import plural
from .errors import got

Convert = Callable[[Any], Any]

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
INT_RANGE = (-(1 << 31), (1 << 31) - 1)
LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_FLOAT_MAX = 3.4028234663852886e38


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


def _symbols(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 10 else ", ".join(names[:10]) + ", ..."


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


def to_bytes(v: Any) -> Any:
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


PRIMITIVE_TO_AVRO: dict[str, Convert] = {
    "null": _null, "boolean": _boolean, "int": _integer("int", *INT_RANGE),
    "long": _integer("long", *LONG_RANGE), "float": _float, "double": _double, "string": _string,
    "bytes": to_bytes,
}


def bytes_to_json(v: Any) -> Any:
    return v.decode("latin-1")


# ---- complex types ----

def enum_to_avro(schema: dict[str, Any]) -> Convert:
    symbols = list(schema["symbols"])
    known = frozenset(symbols)
    listed = _symbols(symbols)

    def enum(v: Any) -> Any:
        if type(v) is str and v in known:
            return v
        raise Bad(f"expected one of {listed} (enum {schema['name']}), got {got(v)}")
    return enum


def fixed_to_avro(size: int, name: str) -> Convert:
    def fixed(v: Any) -> Any:
        b = to_bytes(v)
        if len(b) != size:
            raise Bad(f"expected {plural(size, 'byte')} (fixed {name}), got {len(b)}")
        return b
    return fixed


def array_to_avro(items: Convert) -> Convert:
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


def map_to_avro(values: Convert) -> Convert:
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
