"""Protobuf messages from and to JSON, as Confluent's tools show them: proto3's JSON mapping
(``json_format``), every field printed (``JsonFormat.printer().includingDefaultValueFields()``
in Confluent's console consumer), field names as in the .proto.

Mapping decisions: int64, uint64 and the other 64-bit integers print as strings (the mapping
says so, and JsonFormat prints them so: a JavaScript reader keeps every digit); input takes
numbers or strings for them. Enums print by name, bytes in base64, Timestamp, Duration and the
other well-known types in their string forms. Input takes .proto names or JSON (lowerCamel)
names; an unknown field is refused, naming it.

``json_format.ParseDict`` costs ~17 µs for a 10-field message, so a document of plain values
for a message's plain fields (numbers, bools, strings: nothing ParseDict would convert) goes to
the message's constructor instead (~2 µs), which takes those values the same way; anything else
(a string for an int64, an enum, bytes, a nested message, a value out of range, a JSON name)
takes ParseDict's path and its errors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from .errors import SchemaMismatch

FLOAT_MAX = 3.4028234663852886e38  # the largest finite float32
_INTS = {FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
         FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64}


def from_json(cls: Any, descriptor: Descriptor, doc: Any) -> Any:
    """``doc`` (a parsed JSON object) as a message of ``cls``; SchemaMismatch naming the field
    that does not fit."""
    if not isinstance(doc, Mapping):
        raise SchemaMismatch("", f"expected a JSON object for {descriptor.full_name}, got "
                             f"{type(doc).__name__}")
    plain = _plain_fields(descriptor)
    if all((check := plain.get(k)) is not None and check(v) for k, v in doc.items()):
        try:
            return cls(**doc)
        except (ValueError, TypeError):
            pass  # (out of range: ParseDict says so, naming the field)
    msg = cls()
    try:
        json_format.ParseDict(doc, msg)
    except json_format.ParseError as e:
        raise mismatch(str(e)) from e
    except (ValueError, TypeError, AttributeError) as e:  # (past ParseDict's own checks)
        raise SchemaMismatch("", str(e)) from e
    return msg


def to_json(msg: Any) -> Any:
    """A message as a JSON object: proto3's mapping, every field, .proto names."""
    try:
        return json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except (ValueError, TypeError) as e:  # (e.g. an Any of a type the pool does not have)
        raise SchemaMismatch("", str(e)) from e


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_double(v: Any) -> bool:
    return (type(v) is float and math.isfinite(v)) or type(v) is int


def _is_float(v: Any) -> bool:
    return _is_double(v) and abs(v) <= FLOAT_MAX


_CHECKS: dict[int, Callable[[Any], bool]] = {
    **dict.fromkeys(_INTS, _is_int), FieldDescriptor.CPPTYPE_BOOL: _is_bool,
    FieldDescriptor.CPPTYPE_DOUBLE: _is_double, FieldDescriptor.CPPTYPE_FLOAT: _is_float,
}


@lru_cache(maxsize=1024)
def _plain_fields(descriptor: Descriptor) -> dict[str, Callable[[Any], bool]]:
    """The message's fields a constructor takes as ParseDict would, each with the check of a
    value it takes so: singular numbers, bools and strings outside any oneof (bytes, enums,
    messages, lists and maps convert in JSON)."""
    out: dict[str, Callable[[Any], bool]] = {}
    for f in descriptor.fields:
        if f.is_repeated or f.containing_oneof is not None:
            continue
        if f.type == FieldDescriptor.TYPE_STRING:
            out[f.name] = _is_str
        elif f.cpp_type in _CHECKS:
            out[f.name] = _CHECKS[f.cpp_type]
    return out


_FAILED = re.compile(r"Failed to parse (\S+) field: ")
_UNKNOWN = re.compile(r'Message type "([^"]+)" has no field named "([^"]+)" at "([^"]*)"')
_AT = re.compile(r' at "?([\w.\[\]]+?)"?\.?$')


def mismatch(report: str) -> SchemaMismatch:
    """json_format's ParseError as SchemaMismatch(the field's path, the problem)."""
    parts = []
    while m := _FAILED.match(report):
        parts.append(m[1])
        report = report[m.end():]
    lines = report.splitlines() or [""]
    first = lines[0].strip()
    unknown = _UNKNOWN.match(first)
    if unknown:
        where = unknown[3].partition(".")[2]
        fields = re.findall(r"'([^']+)'", lines[1]) if len(lines) > 1 else []
        path = f"{where}.{unknown[2]}" if where else unknown[2]
        return SchemaMismatch(path, f"no such field in {unknown[1]} (its fields: "
                              f"{', '.join(fields) or 'none'})")
    at = _AT.search(first)
    if at and "." in at[1]:
        return SchemaMismatch(at[1].partition(".")[2], first[: at.start()].rstrip("."))
    return SchemaMismatch(".".join(parts), first.rstrip(".") or "does not fit")
