"""Confluent's Protobuf compatibility rules, a port of its ``protobuf/diff`` package
(``SchemaDiff``, ``MessageSchemaDiff``, ``FieldSchemaDiff``, ``EnumSchemaDiff``, ``Context``)
onto descriptors instead of Wire's parsed files.

``differences(original, update)`` lists every change, ``problems(reader, writer)`` the ones
that are not in ``COMPATIBLE``: Confluent checks BACKWARD as ``compare(original=old,
update=new)`` and FORWARD with the two swapped, so the writer is always the original. Fields
are matched by number across the whole message (oneof members too); a field's type is compared
by kind (scalar, message, map; an enum counts as a scalar), scalars by Confluent's groups,
messages by name within their package, and a message from a reference (or a well-known file)
by its contents unless both sides take it from the same subject and version.

As in Confluent: a label counts only when both sides have one, and a proto3 field without
``optional``/``repeated`` has none (so ``int32 a`` to ``repeated int32 a`` passes there, while
``optional int32 a`` to ``repeated int32 a`` does not); map entry types are compared through
their fields, never as messages; extensions and groups are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from google.protobuf import descriptor_pb2

from .protobuf_files import Files

FieldProto: TypeAlias = descriptor_pb2.FieldDescriptorProto
MessageProto: TypeAlias = descriptor_pb2.DescriptorProto
EnumProto: TypeAlias = descriptor_pb2.EnumDescriptorProto

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
    "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED",
    "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})
# Difference.java's descriptions: the first "%s" is the update's (the reader's) schema
DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {r} schema does not match the package "
                       "in the {w} schema",
    "MESSAGE_REMOVED": "The {r} schema is missing a MESSAGE type at path '{path}' in the {w} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}'{field} in the {r} schema does not "
                          "match the {w} schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}'{field} in the {r} "
                                 "schema does not match its kind in the {w} schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}'{field} in the {r} "
                                "schema does not match its type in the {w} schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}'{field} in the "
                                   "{r} schema does not match its label in the {w} schema",
    "REQUIRED_FIELD_ADDED": "A required field at path '{path}'{field} in the {r} schema is "
                            "missing in the {w} schema",
    "REQUIRED_FIELD_REMOVED": "The {r} schema is missing a required field at path '{path}'{field} "
                              "in the {w} schema",
    "ONEOF_FIELD_REMOVED": "The {r} schema is missing a oneof field at path '{path}'{field} in "
                           "the {w} schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the {r} "
                                      "schema are outside a oneof in the {w} schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the {r} schema is "
                                     "outside an existing oneof in the {w} schema",
}
SCALAR_GROUPS = {  # FieldSchemaDiff.scalarKind: a change within a group is compatible
    **dict.fromkeys(["int32", "int64", "uint32", "uint64", "bool", "enum"], "GENERAL_NUMBER"),
    **dict.fromkeys(["sint32", "sint64"], "SIGNED_NUMBER"),
    **dict.fromkeys(["string", "bytes"], "STRING_OR_BYTES"),
    **dict.fromkeys(["fixed32", "sfixed32"], "FIXED32"),
    **dict.fromkeys(["fixed64", "sfixed64"], "FIXED64"),
    "float": "FLOAT", "double": "DOUBLE",
}
NUMERIC = {"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"}
MAIN_REF = ("", -1)  # Context's dummy reference of the schema's own file
_SCALARS = {v: k[len("TYPE_"):].lower() for k, v in FieldProto.Type.items()
            if k not in ("TYPE_MESSAGE", "TYPE_GROUP", "TYPE_ENUM")}


@dataclass(frozen=True)
class Difference:
    """One change: Confluent's type, its path (``#/Message/3``: message names, oneof names and
    field numbers) and the field's name where there is one."""

    type: str
    path: str
    field: str = ""

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE

    def message(self, reader: str = "reader", writer: str = "writer") -> str:
        """Confluent's line (``{errorType:"...", description:"..."}``), the schemas called
        ``reader`` and ``writer`` (Confluent says "new" and "old": BACKWARD's reader is the new
        schema, FORWARD's the old one)."""
        text = DESCRIPTIONS.get(self.type, "").format(
            path=self.path, r=reader, w=writer, field=f" (field '{self.field}')" if self.field else "")
        return f'{{errorType:"{self.type}", description:"{text}"}}'


def problems(reader: Files, writer: Files) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (one line each)."""
    return list(dict.fromkeys(d.message() for d in differences(writer, reader) if not d.compatible))


def differences(original: Files, update: Files) -> list[Difference]:
    """Every change from ``original`` to ``update`` (SchemaDiff.compare)."""
    ctx = _Context(_types(original), _types(update))
    ctx.packages = (original.main.package, update.main.package)
    ctx.syntax = (original.main.syntax, update.main.syntax)
    if original.main.package != update.main.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, _members(original.main), _members(update.main))
    return ctx.diffs


@dataclass
class _Type:
    """A message or enum type: its file's package and syntax, its descriptor, and the
    (subject, version) it comes from (None: a well-known file)."""

    package: str
    syntax: str
    proto: MessageProto | EnumProto
    ref: tuple[str, int] | None

    @property
    def is_map(self) -> bool:
        return _is_message(self.proto) and self.proto.options.map_entry


def _types(files: Files) -> dict[str, _Type]:
    """Every message and enum type of the schema's files by full name (Context.collectTypeInfo)."""
    out: dict[str, _Type] = {}

    def walk(prefix: str, file: Any, members: Sequence[Any], ref: tuple[str, int] | None) -> None:
        for proto in members:
            name = f"{prefix}.{proto.name}" if prefix else proto.name
            out[name] = _Type(file.package, file.syntax, proto, ref)
            if _is_message(proto):
                walk(name, file, _members(proto), ref)

    for name, file in files.protos.items():
        ref = MAIN_REF if file is files.main else files.refs.get(name)
        walk(file.package, file, _members(file), ref)
    return out


def _members(proto: Any) -> list[Any]:
    """A file's or a message's message types then enum types."""
    file = isinstance(proto, descriptor_pb2.FileDescriptorProto)
    return [*(proto.message_type if file else proto.nested_type), *proto.enum_type]


@dataclass
class _Context:
    """Context.java: both sides' types, the path so far, the message types being compared
    (a recursive type is compared once), the differences found."""

    original: dict[str, _Type]
    update: dict[str, _Type]
    packages: tuple[str, str] = ("", "")
    syntax: tuple[str, str] = ("", "")
    path: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    busy: set[str] = field(default_factory=set)
    diffs: list[Difference] = field(default_factory=list)

    def add(self, kind: str, name: str = "") -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join(self.path), name))

    @contextmanager
    def at(self, *parts: str, named: bool = False) -> Iterator[None]:
        self.path += parts
        if named:
            self.names += parts
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts):]
            if named:
                del self.names[len(self.names) - len(parts):]

    def full_name(self) -> str:
        return ".".join([self.packages[0], *self.names] if self.packages[0] else self.names)

    def sub(self, original: _Type, update: _Type, local: str) -> _Context:
        """A context for comparing two types' contents at their own path (getSubcontext)."""
        parts = local.split(".")
        return _Context(self.original, self.update, (original.package, update.package),
                        (original.syntax, update.syntax), list(parts), list(parts), set(self.busy))


def _compare_types(ctx: _Context, original: list[Any], update: list[Any]) -> None:
    """SchemaDiff.compareTypeElements: message types by name (removed: incompatible; moved:
    its index among the messages changed), then enum types."""
    def index(members: list[Any]) -> tuple[dict[str, tuple[int, MessageProto]], dict[str, EnumProto]]:
        msgs = [m for m in members if _is_message(m) and not m.options.map_entry]
        return ({m.name: (i, m) for i, m in enumerate(msgs)},
                {e.name: e for e in members if _is_enum(e)})

    (omsgs, oenums), (umsgs, uenums) = index(original), index(update)
    for name in dict.fromkeys([*omsgs, *umsgs]):
        with ctx.at(name, named=True):
            if name not in umsgs:
                ctx.add("MESSAGE_REMOVED")
            elif name not in omsgs:
                ctx.add("MESSAGE_ADDED")
            else:
                _compare_message(ctx, omsgs[name][1], umsgs[name][1])
                if omsgs[name][0] != umsgs[name][0]:
                    ctx.add("MESSAGE_MOVED")
    for name in dict.fromkeys([*oenums, *uenums]):
        with ctx.at(name, named=True):
            if name not in uenums:
                ctx.add("ENUM_REMOVED")
            elif name not in oenums:
                ctx.add("ENUM_ADDED")
            else:
                _compare_enum(ctx, oenums[name], uenums[name])


def _compare_enum(ctx: _Context, original: EnumProto, update: EnumProto) -> None:
    """EnumSchemaDiff: constants by number (all of it compatible)."""
    before = {v.number: v.name for v in original.value}
    after = {v.number: v.name for v in update.value}
    for number in sorted(before.keys() | after.keys()):
        with ctx.at(str(number)):
            if number not in after:
                ctx.add("ENUM_CONST_REMOVED")
            elif number not in before:
                ctx.add("ENUM_CONST_ADDED")
            elif before[number] != after[number]:
                ctx.add("ENUM_CONST_CHANGED")


def _fields(msg: MessageProto) -> tuple[dict[int, FieldProto], dict[int, str], dict[str, list[int]]]:
    """A message's fields by number, each oneof member's oneof, each oneof's members (proto3's
    synthetic oneofs of ``optional`` fields are not oneofs: Wire has no such thing)."""
    by_tag = {f.number: f for f in msg.field}
    of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = msg.oneof_decl[f.oneof_index].name
            of[f.number] = name
            oneofs.setdefault(name, []).append(f.number)
    return by_tag, of, oneofs


def _compare_message(ctx: _Context, original: MessageProto, update: MessageProto) -> None:
    """MessageSchemaDiff.compare: fields by number across the message, oneof membership, then
    the nested types."""
    key = ctx.full_name()
    if key not in ctx.busy:
        ctx.busy.add(key)
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.busy.discard(key)
    _compare_types(ctx, _members(original), _members(update))


def _compare_fields(ctx: _Context, original: MessageProto, update: MessageProto) -> None:
    obytag, oof, ooneofs = _fields(original)
    ubytag, uof, uoneofs = _fields(update)
    # a oneof gone with all its members: a deletion, compatible
    deleted = {name for name, tags in ooneofs.items()
               if name not in uoneofs and not any(t in ubytag for t in tags)}
    # mutual exclusivity that was not there: members from more than one original group
    for name, tags in uoneofs.items():
        with ctx.at(name):
            groups: set[str] = set()
            moved_in = 0
            for tag in tags:
                if tag in oof:
                    groups.add("oneof:" + oof[tag])
                elif tag in obytag:
                    groups.add(f"field:{tag}")
                    moved_in += 1
            if len(groups) > 1:
                ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                        else "FIELD_MOVED_TO_EXISTING_ONEOF")
    for name in sorted(ooneofs.keys() | uoneofs.keys()):
        with ctx.at(name):
            if name not in uoneofs:
                ctx.add("ONEOF_REMOVED")
            elif name not in ooneofs:
                ctx.add("ONEOF_ADDED")
    for tag in sorted(obytag.keys() | ubytag.keys()):
        of, uf = obytag.get(tag), ubytag.get(tag)
        if uf is None:
            assert of is not None
            if tag in oof:
                if oof[tag] not in deleted:
                    with ctx.at(oof[tag], str(tag)):
                        ctx.add("ONEOF_FIELD_REMOVED", of.name)
            else:
                with ctx.at(str(tag)):
                    ctx.add("REQUIRED_FIELD_REMOVED" if _label(of, ctx, True) == "required"
                            else "FIELD_REMOVED", of.name)
        elif of is None:
            if tag in uof:
                with ctx.at(uof[tag], str(tag)):
                    ctx.add("ONEOF_FIELD_ADDED", uf.name)
            else:
                with ctx.at(str(tag)):
                    ctx.add("REQUIRED_FIELD_ADDED" if _label(uf, ctx, False) == "required"
                            else "FIELD_ADDED", uf.name)
        else:
            if tag in oof and tag not in uof:
                with ctx.at(str(tag)):
                    ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", uf.name)
            with ctx.at(*((uof[tag], str(tag)) if tag in uof else (str(tag),))):
                _compare_field(ctx, of, uf, _label(of, ctx, True),
                               _label(uf, ctx, False))


def _label(f: FieldProto, ctx: _Context, original: bool) -> str | None:
    """The field's label as Wire has it (ProtobufSchema.label): none for a oneof member or a
    proto3 field without ``optional``/``repeated``."""
    if f.proto3_optional:
        return "optional"
    if f.HasField("oneof_index"):
        return None
    if f.label == FieldProto.LABEL_REPEATED:
        return "repeated"
    if ctx.syntax[0 if original else 1] == "proto3":
        return None
    return "required" if f.label == FieldProto.LABEL_REQUIRED else "optional"


def _compare_field(ctx: _Context, original: FieldProto, update: FieldProto,
                   olabel: str | None, ulabel: str | None) -> None:
    """FieldSchemaDiff.compare: the name, then labels and types."""
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED", update.name)
    _compare_types_of(ctx, update.name, olabel, ulabel, _ptype(ctx, original, True),
                      _ptype(ctx, update, False))


# a field's type: a scalar's name, ("map", key, value), or a message or enum's full name
PType = Any


def _ptype(ctx: _Context, f: FieldProto, original: bool) -> PType:
    if f.type in _SCALARS:
        return _SCALARS[f.type]
    name = f.type_name.lstrip(".")
    info = (ctx.original if original else ctx.update).get(name)
    if info is not None and info.is_map:
        entry = info.proto
        assert _is_message(entry)
        key, value = entry.field[0], entry.field[1]
        return ("map", _ptype(ctx, key, original), _ptype(ctx, value, original))
    return ("named", name)


def _kind(ctx: _Context, t: PType, original: bool) -> str:
    if isinstance(t, str):
        return "SCALAR"
    if t[0] == "map":
        return "MAP"
    info = (ctx.original if original else ctx.update).get(t[1])
    return "SCALAR" if info is not None and _is_enum(info.proto) else "MESSAGE"


def _scalar_group(t: PType) -> str:
    return SCALAR_GROUPS[t] if isinstance(t, str) else "GENERAL_NUMBER"  # (an enum)


def _compare_types_of(ctx: _Context, name: str, olabel: str | None, ulabel: str | None,
                      otype: PType, utype: PType) -> None:
    """FieldSchemaDiff.compareLabelsAndTypes."""
    okind, ukind = _kind(ctx, otype, True), _kind(ctx, utype, False)
    if okind != ukind:
        ctx.add("FIELD_KIND_CHANGED", name)
    elif okind == "SCALAR":
        ogroup, ugroup = _scalar_group(otype), _scalar_group(utype)
        if ogroup != ugroup:
            ctx.add("FIELD_SCALAR_KIND_CHANGED", name)
        elif olabel is not None and ulabel is not None and olabel != ulabel:
            ctx.add("FIELD_NUMERIC_LABEL_CHANGED" if ogroup in NUMERIC
                    else "FIELD_STRING_OR_BYTES_LABEL_CHANGED", name)
    elif okind == "MESSAGE":
        _compare_message_types(ctx, name, otype[1], utype[1])
    else:  # maps: keys, then values, without labels
        _compare_types_of(ctx, name, None, None, otype[1], utype[1])
        _compare_types_of(ctx, name, None, None, otype[2], utype[2])


def _compare_message_types(ctx: _Context, name: str, ofull: str, ufull: str) -> None:
    """FieldSchemaDiff.compareMessageTypes: the same name within its package; a type from
    a reference or a well-known file also by its contents (unless both sides take it from the
    same subject and version)."""
    otype, utype = ctx.original.get(ofull), ctx.update.get(ufull)
    if otype is None or utype is None:
        if ofull != ufull:
            ctx.add("FIELD_NAMED_TYPE_CHANGED", name)
        return
    olocal, ulocal = _local(ofull, otype.package), _local(ufull, utype.package)
    if olocal != ulocal:
        ctx.add("FIELD_NAMED_TYPE_CHANGED", name)
        return
    if otype.ref is not None and utype.ref is not None and otype.ref == utype.ref:
        return
    assert _is_message(otype.proto) and _is_message(utype.proto)
    sub = ctx.sub(otype, utype, olocal)
    _compare_message(sub, otype.proto, utype.proto)
    ctx.diffs += sub.diffs
    if not all(d.compatible for d in sub.diffs):
        ctx.add("FIELD_NAMED_TYPE_CHANGED", name)


def _local(full: str, package: str) -> str:
    """A type's name within its package."""
    return full[len(package) + 1:] if package and full.startswith(package + ".") else full


def _is_message(proto: Any) -> bool:
    return isinstance(proto, descriptor_pb2.DescriptorProto)


def _is_enum(proto: Any) -> bool:
    return isinstance(proto, descriptor_pb2.EnumDescriptorProto)
