"""Avro's reader/writer compatibility, as Confluent checks it: Avro Java's
``SchemaCompatibility.checkReaderWriterCompatibility`` (which ``AvroSchema.isBackwardCompatible``
calls), each problem worded as Confluent's ``avro.Difference`` words it.

Avro's Python library ports the same check (``avro.compatibility``), but merges its results
into sets of messages and of locations, losing which message goes with which place; this
walk is that port's, keeping each problem whole (the tests hold the two to the same verdict).

The rules: a reader field missing from the writer needs a default; the writer's type must
promote to the reader's (int -> long -> float -> double, string <-> bytes); named types keep
their (short) name or list the writer's full name in ``aliases``; a reader field matches a
writer field by name or by one of its ``aliases``; the reader's enum holds every writer
symbol, unless it has a default; fixed sizes match; each writer union branch must be readable
by the reader (a union or not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_PRIMITIVE = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
# what a reader of the key reads when the writer wrote one of the values (Avro's promotions)
_PROMOTES = {"long": {"int"}, "float": {"int", "long"}, "double": {"int", "long", "float"},
             "bytes": {"string"}, "string": {"bytes"}}


@dataclass(frozen=True)
class Incompatibility:
    """One problem: its type (Avro's ``SchemaIncompatibilityType``), where it is in the
    reader (a JSON pointer, ``/fields/1/type``) and its detail."""

    kind: str
    location: str
    detail: str

    def message(self, reader: str = "reader", writer: str = "writer") -> str:
        """As Confluent's ``avro.Difference.toString`` gives it (``reader``/``writer``: the
        words for the two schemas; Confluent says "new" and "old")."""
        at = self.location
        text = {
            "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{at}' in the "
                                   f"{reader} schema does not match with the {writer} schema",
            "TYPE_MISMATCH": f"The type (path '{at}') of a field in the {reader} schema does "
                             f"not match with the {writer} schema",
            "NAME_MISMATCH": f"The name of the schema has changed (path '{at}')",
            "MISSING_ENUM_SYMBOLS": f"The {reader} schema is missing enum symbols "
                                    f"'{self.detail}' at path '{at}' in the {writer} schema",
            "MISSING_UNION_BRANCH": f"The {reader} schema is missing a type inside a union "
                                    f"field at path '{at}' in the {writer} schema",
            "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{self.detail}' at path '{at}' in "
                                                  f"the {reader} schema has no default value "
                                                  f"and is missing in the {writer} schema",
        }[self.kind]
        return f"{{errorType:'{self.kind}', description:'{text}', additionalInfo:'{self.detail}'}}"


def problems(reader: Any, writer: Any, names: tuple[str, str] = ("reader", "writer")
             ) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader``, one message each."""
    return [p.message(*names) for p in check(reader, writer)]


def check(reader: Any, writer: Any) -> list[Incompatibility]:
    """The problems of reading ``writer``'s data with ``reader``; empty when it can."""
    return _Checker().compatibility(reader, writer, [])


class _Checker:
    def __init__(self) -> None:
        # a pair met again while being checked (a recursive type) counts as compatible
        self.memo: dict[tuple[int, int], list[Incompatibility] | None] = {}

    def compatibility(self, reader: Any, writer: Any, location: list[str]
                      ) -> list[Incompatibility]:
        key = (id(reader), id(writer))
        if key in self.memo:
            done = self.memo[key]
            return [] if done is None else done
        self.memo[key] = None
        found = self.calculate(reader, writer, location)
        self.memo[key] = found
        return found

    def calculate(self, reader: Any, writer: Any, at: list[str]
                  ) -> list[Incompatibility]:
        rt, wt = reader.type, writer.type
        if rt == wt:
            if rt in _PRIMITIVE:
                return []
            if rt == "array":
                return self.compatibility(reader.items, writer.items,
                                          at + ["items"])
            if rt == "map":
                return self.compatibility(reader.values, writer.values,
                                          at + ["values"])
            if rt == "fixed":
                out = _names(reader, writer, at)
                if reader.size != writer.size:
                    out.append(_problem("FIXED_SIZE_MISMATCH", at + ["size"],
                                        f"expected: {writer.size}, "
                                        f"found: {reader.size}"))
                return out
            if rt == "enum":
                return _names(reader, writer, at) + _symbols(reader, writer, at)
            if rt in ("record", "error"):
                return _names(reader, writer, at) + self.fields(reader, writer, at)
            if rt == "union":
                out = []
                for i, branch in enumerate(writer.schemas):
                    if self.compatibility(reader, branch, []):
                        out.append(_problem("MISSING_UNION_BRANCH", at + [str(i)],
                                            f"reader union lacking writer type: "
                                            f"{branch.type.upper()}"))
                return out
            raise ValueError(f"unknown Avro type {rt!r}")
        if wt == "union":  # every branch the writer may write must read
            out = []
            for branch in writer.schemas:
                out += self.compatibility(reader, branch, at)
            return out
        if rt == "union":
            for branch in reader.schemas:
                if not self.compatibility(branch, writer, at):
                    return []
            return [_problem("MISSING_UNION_BRANCH", at,
                             f"reader union lacking writer type: {wt.upper()}")]
        if wt in _PROMOTES.get(rt, ()):
            return []
        return [_problem("TYPE_MISMATCH", at, f"reader type: {rt.upper()} not compatible with "
                                              f"writer type: {wt.upper()}")]

    def fields(self, reader: Any, writer: Any, at: list[str]) -> list[Incompatibility]:
        out = []
        written = {f.name: f for f in writer.fields}
        for i, field in enumerate(reader.fields):
            where = at + ["fields", str(i)]
            match = written.get(field.name)
            if match is None:
                for alias in field.props.get("aliases") or ():
                    if alias in written:
                        match = written[alias]
                        break
            if match is not None:
                out += self.compatibility(field.type, match.type, where + ["type"])
            elif not field.has_default:
                if field.type.type == "enum" and field.type.props.get("default") is not None:
                    # Java's check, kept as it is: an enum with a default read from the record
                    out += self.compatibility(field.type, writer, where + ["type"])
                else:
                    out.append(_problem("READER_FIELD_MISSING_DEFAULT_VALUE", where, field.name))
        return out


def _problem(kind: str, at: list[str], detail: str) -> Incompatibility:
    return Incompatibility(kind, "/" + "/".join(at), detail)


def _names(reader: Any, writer: Any, at: list[str]) -> list[Incompatibility]:
    """Avro compares the short names, or finds the writer's full name among the reader's
    aliases (which are relative to the reader's namespace)."""
    if reader.name == writer.name:
        return []
    space = reader.namespace
    aliases = {a if "." in a or not space else f"{space}.{a}"
               for a in reader.props.get("aliases") or ()}
    if writer.fullname in aliases:
        return []
    return [_problem("NAME_MISMATCH", at + ["name"], f"expected: {writer.fullname}")]


def _symbols(reader: Any, writer: Any, at: list[str]) -> list[Incompatibility]:
    missing = sorted(set(writer.symbols) - set(reader.symbols))
    if not missing:
        return []
    default = reader.props.get("default")
    if default is not None and default in reader.symbols:
        return []
    return [_problem("MISSING_ENUM_SYMBOLS", at + ["symbols"], f"[{', '.join(missing)}]")]
