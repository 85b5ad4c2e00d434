"""A Protobuf ``FileDescriptorProto`` printed as .proto text, as Confluent's registry answers
GET for a schema registered as a base64 descriptor (confluent-kafka's ProtobufSerializer
registers that form): ``to_text``.

The layout follows Confluent's printer (ProtobufSchemaUtils.toString): the syntax line, the
package, the imports, the file's options, the messages, the enums, the services; in a message
its reserved ranges and names, its options, then its body; two spaces per level. Where
Confluent's layout would change the descriptor it prints, the descriptor wins: a message's
fields stay in their order (a oneof printed where its first field is), and its nested messages
and map fields interleave so the map entries protoc makes keep their places among the nested
types (message indexes count them). Type names are printed fully qualified, with a leading dot.

Printed: proto2 and proto3; nested messages and enums; fields with their labels (proto2's
``optional``/``required``, proto3's ``optional``, ``repeated``), ``map<K, V>`` fields (from
their map-entry types), oneofs, enums and their values, reserved ranges and names, extension
ranges (no options), proto2 default values, a ``json_name`` that is not protoc's own,
extension fields (``extend`` blocks); options of files, messages, fields, oneofs, enums, enum
values, services and methods: the standard ones of scalar or enum values (``java_package``,
``packed``, ``deprecated``, ...) and custom ones the schema's files define
(``[(confluent.field_meta) = { doc: "..." }]``, a message value in text format); services and
their rpcs (streaming too), ``import public`` and ``import weak``.

Not printed (``Unsupported``; the caller keeps the base64 form): editions, groups, standard
options of message type (``features``), uninterpreted options, options no file of the schema
defines, extension ranges with options, a map-entry type that is not exactly what protoc makes
of a ``map<K, V>`` field, a type name that is not fully qualified, a field without a type.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

FD = descriptor_pb2.FieldDescriptorProto
MAX_FIELD = 536870911  # the highest field number (``max`` in a message's ranges)
MAX_ENUM = 2147483647  # the highest enum value (``max`` in an enum's reserved ranges)
_INDENT = "  "
_SCALARS = {
    FD.TYPE_DOUBLE: "double", FD.TYPE_FLOAT: "float", FD.TYPE_INT64: "int64",
    FD.TYPE_UINT64: "uint64", FD.TYPE_INT32: "int32", FD.TYPE_FIXED64: "fixed64",
    FD.TYPE_FIXED32: "fixed32", FD.TYPE_BOOL: "bool", FD.TYPE_STRING: "string",
    FD.TYPE_BYTES: "bytes", FD.TYPE_UINT32: "uint32", FD.TYPE_SFIXED32: "sfixed32",
    FD.TYPE_SFIXED64: "sfixed64", FD.TYPE_SINT32: "sint32", FD.TYPE_SINT64: "sint64",
}
_LABELS = {FD.LABEL_OPTIONAL: "optional", FD.LABEL_REQUIRED: "required",
           FD.LABEL_REPEATED: "repeated"}


class Unsupported(ValueError):
    """The descriptor holds something this printer does not print faithfully."""


def to_text(proto: descriptor_pb2.FileDescriptorProto,
            pool: descriptor_pool.DescriptorPool | None = None) -> str:
    """``proto`` as .proto text that protoc compiles back to the same descriptor (its file
    name, source positions and protoc's own JSON names aside); Unsupported naming what is not
    printed (see the module's docstring). ``pool`` (holding the file and its imports) lets
    custom options be printed by name."""
    syntax = proto.syntax or "proto2"
    if syntax not in ("proto2", "proto3"):
        raise Unsupported(f"syntax {syntax!r} is not printed")
    out = [f'syntax = "{syntax}";\n']
    if proto.package:
        out.append(f"package {proto.package};\n")
    if proto.dependency:
        out.append("\n")
        public, weak = set(proto.public_dependency), set(proto.weak_dependency)
        for i, dep in enumerate(proto.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            out.append(f"import {kind}{_quote(dep)};\n")
    p = _Printer(syntax, pool)
    options = p._options(proto.options)
    if options:
        out.append("\n")
        out += [f"option {o};\n" for o in options]
    scope = f".{proto.package}" if proto.package else ""
    body: list[str] = []
    for msg in proto.message_type:
        body += p.message(msg, scope)
    for enum in proto.enum_type:
        body += p.enum(enum)
    body += p.extends(proto.extension, proto.package or "<file>")
    for service in proto.service:
        body += p.service(service)
    if body:
        out.append("\n")
        out += body
    return "".join(out)


class _Printer:
    def __init__(self, syntax: str, pool: descriptor_pool.DescriptorPool | None) -> None:
        self.proto3 = syntax == "proto3"
        self.pool = pool

    def _options(self, opts: Message, skip: tuple[str, ...] = ()) -> list[str]:
        """An options message's fields as ``name = value``: standard options of scalar or enum
        values, custom ones (``(pkg.name)``, a message value in text format) when the pool
        knows them; Unsupported for anything else set in it."""
        opts = self._resolved(opts)
        out = []
        for fd, value in opts.ListFields():
            if fd.name in skip and not fd.is_extension:
                continue
            if not fd.is_extension and (fd.message_type is not None or fd.is_repeated):
                raise Unsupported(f"option {fd.name} is not printed")
            name = f"({fd.full_name})" if fd.is_extension else fd.name
            for v in (value if fd.is_repeated else [value]):
                out.append(f"{name} = {_value(fd, v)}")
        if len(unknown_fields.UnknownFieldSet(opts)):
            raise Unsupported(f"{opts.DESCRIPTOR.name}: options the schema's files do not define")
        return out

    def _resolved(self, opts: Message) -> Message:
        """``opts`` parsed again with the schema's pool when it holds custom options (unknown
        fields to the generated descriptor_pb2, or extensions of another pool)."""
        if self.pool is None or not opts.ByteSize():
            return opts
        if not len(unknown_fields.UnknownFieldSet(opts)) and not any(
                fd.is_extension for fd, _ in opts.ListFields()):
            return opts
        try:
            desc = self.pool.FindMessageTypeByName(opts.DESCRIPTOR.full_name)
        except KeyError:
            return opts
        return message_factory.GetMessageClass(desc).FromString(opts.SerializeToString())

    def message(self, msg: descriptor_pb2.DescriptorProto, scope: str) -> list[str]:
        full = f"{scope}.{msg.name}"
        inner: list[str] = []
        inner += self._reserved(msg.reserved_range, msg.reserved_name, MAX_FIELD + 1)
        inner += [f"option {o};\n" for o in self._options(msg.options, skip=("map_entry",))]
        entries = {f"{full}.{n.name}": n for n in msg.nested_type if n.options.map_entry}
        items = self._field_items(msg, full, entries)  # (map entry's full name or "", lines)
        used = {name for name, _ in items if name}
        if used != set(entries):
            raise Unsupported(f"{msg.name}: a map-entry type no map field uses")
        # nested messages and map fields in the order of the descriptor's nested types
        pos = 0
        for nested in msg.nested_type:
            name = f"{full}.{nested.name}"
            if name in entries:
                while True:
                    entry, text = items[pos]
                    pos += 1
                    inner += text
                    if entry == name:
                        break
            else:
                inner += self.message(nested, full)
        for _, text in items[pos:]:
            inner += text
        for r in msg.extension_range:
            if r.HasField("options"):
                raise Unsupported(f"{msg.name}: extension ranges with options are not printed")
            inner.append(f"extensions {_range(r.start, r.end - 1, MAX_FIELD)};\n")
        inner += self.extends(msg.extension, msg.name)
        for enum in msg.enum_type:
            inner += self.enum(enum)
        return _block(f"message {msg.name}", inner)

    def _field_items(self, msg: descriptor_pb2.DescriptorProto, full: str,
                     entries: dict[str, descriptor_pb2.DescriptorProto]) -> list[tuple[str, list[str]]]:
        """The message's fields in order, each oneof as one item where its first field is:
        (the map entry a map field uses, or "", its lines)."""
        items: list[tuple[str, list[str]]] = []
        synthetic = {f.oneof_index for f in msg.field if f.proto3_optional}
        done: set[int] = set()
        order: list[int] = []
        for f in msg.field:
            real = f.HasField("oneof_index") and f.oneof_index not in synthetic
            if not real:
                entry = entries.get(f.type_name) if f.type == FD.TYPE_MESSAGE else None
                if entry is not None:
                    items.append((f.type_name, [self._map_field(f, entry, msg.name)]))
                else:
                    items.append(("", [self._field(f, msg.name, in_oneof=False)]))
                continue
            i = f.oneof_index
            if i in done:
                continue
            if not 0 <= i < len(msg.oneof_decl):
                raise Unsupported(f"{msg.name}.{f.name}: a oneof index out of range")
            done.add(i)
            order.append(i)
            members = [g for g in msg.field if g.HasField("oneof_index") and g.oneof_index == i]
            decl = msg.oneof_decl[i]
            text = [f"oneof {decl.name} {{\n"]
            text += [f"{_INDENT}option {o};\n" for o in self._options(decl.options)]
            text += [_INDENT + self._field(g, msg.name, in_oneof=True) for g in members]
            text.append("}\n")
            items.append(("", text))
        # protoc numbers real oneofs as they appear, then proto3's synthetic ones
        if order != list(range(len(order))) or len(order) + len(synthetic) != len(msg.oneof_decl):
            raise Unsupported(f"{msg.name}: oneofs not in the order of their fields")
        return items

    def _field(self, f: descriptor_pb2.FieldDescriptorProto, where: str, in_oneof: bool) -> str:
        if f.type == FD.TYPE_GROUP:
            raise Unsupported(f"{where}.{f.name}: groups are not printed")
        if f.proto3_optional:
            label = "optional "
        elif in_oneof or (self.proto3 and f.label == FD.LABEL_OPTIONAL):
            label = ""
        else:
            label = _LABELS[f.label] + " "
        opts = []
        if f.HasField("default_value"):
            opts.append(f"default = {_default(f)}")
        if f.HasField("json_name") and f.json_name != json_name(f.name):
            opts.append(f"json_name = {_quote(f.json_name)}")
        opts += self._options(f.options)
        suffix = f" [{', '.join(opts)}]" if opts else ""
        return f"{label}{_type(f, where)} {f.name} = {f.number}{suffix};\n"

    def _map_field(self, f: descriptor_pb2.FieldDescriptorProto,
                   entry: descriptor_pb2.DescriptorProto, where: str) -> str:
        key = [g for g in entry.field if g.name == "key" and g.number == 1]
        value = [g for g in entry.field if g.name == "value" and g.number == 2]
        plain = all(g.label == FD.LABEL_OPTIONAL and not g.HasField("default_value")
                    and not g.options.ByteSize() and g.json_name in ("", g.name)
                    for g in entry.field)
        only_map_entry = descriptor_pb2.MessageOptions(map_entry=True)
        if (f.label != FD.LABEL_REPEATED or entry.name != _map_entry_name(f.name)
                or len(entry.field) != 2 or not key or not value or not plain
                or entry.nested_type or entry.enum_type or entry.oneof_decl or entry.extension
                or entry.extension_range or entry.reserved_range or entry.reserved_name
                or entry.options != only_map_entry or key[0].type not in _SCALARS):
            raise Unsupported(f"{where}.{f.name}: a map entry protoc would not make")
        opts = []
        if f.HasField("json_name") and f.json_name != json_name(f.name):
            opts.append(f"json_name = {_quote(f.json_name)}")
        opts += self._options(f.options)
        suffix = f" [{', '.join(opts)}]" if opts else ""
        kv = f"{_SCALARS[key[0].type]}, {_type(value[0], where)}"
        return f"map<{kv}> {f.name} = {f.number}{suffix};\n"

    def extends(self, fields: Any, where: str) -> list[str]:
        """Extension fields as ``extend`` blocks, one per run of fields of the same extendee
        (so their order stays)."""
        out: list[str] = []
        run: list[descriptor_pb2.FieldDescriptorProto] = []
        for f in [*fields, None]:
            if run and (f is None or f.extendee != run[0].extendee):
                extendee = run[0].extendee
                if not extendee.startswith("."):
                    raise Unsupported(f"{where}: extendee {extendee!r} not fully qualified")
                out += _block(f"extend {extendee}",
                              [self._field(g, where, in_oneof=False) for g in run])
                run = []
            if f is not None:
                if f.HasField("oneof_index"):
                    raise Unsupported(f"{where}.{f.name}: an extension in a oneof")
                run.append(f)
        return out

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> list[str]:
        inner = self._reserved(enum.reserved_range, enum.reserved_name, MAX_ENUM + 1, inclusive=True)
        inner += [f"option {o};\n" for o in self._options(enum.options)]
        for v in enum.value:
            opts = self._options(v.options)
            suffix = f" [{', '.join(opts)}]" if opts else ""
            inner.append(f"{v.name} = {v.number}{suffix};\n")
        return _block(f"enum {enum.name}", inner)

    def service(self, service: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
        inner = [f"option {o};\n" for o in self._options(service.options)]
        for m in service.method:
            for t in (m.input_type, m.output_type):
                if not t.startswith("."):
                    raise Unsupported(f"{service.name}.{m.name}: type {t!r} not fully qualified")
            cs = "stream " if m.client_streaming else ""
            ss = "stream " if m.server_streaming else ""
            head = f"rpc {m.name} ({cs}{m.input_type}) returns ({ss}{m.output_type})"
            opts = self._options(m.options)
            if opts:
                inner.append(head + " {\n")
                inner += [f"{_INDENT}option {o};\n" for o in opts]
                inner.append("}\n")
            else:
                inner.append(head + ";\n")
        return _block(f"service {service.name}", inner)

    @staticmethod
    def _reserved(ranges: Any, names: Any, top: int, inclusive: bool = False) -> list[str]:
        out = []
        for r in ranges:
            last = r.end if inclusive else r.end - 1
            out.append(f"reserved {_range(r.start, last, top - 1)};\n")
        if names:
            out.append("reserved " + ", ".join(_quote(n) for n in names) + ";\n")
        return out


def _block(head: str, inner: list[str]) -> list[str]:
    """``head { ... }`` with ``inner`` indented; ``head {}`` when empty (as Confluent prints)."""
    if not inner:
        return [head + " {}\n"]
    return [head + " {\n", *(_INDENT + ln for ln in inner), "}\n"]


def _range(start: int, last: int, top: int) -> str:
    if start == last:
        return str(start)
    return f"{start} to {'max' if last == top else last}"


def _type(f: descriptor_pb2.FieldDescriptorProto, where: str) -> str:
    if f.type in _SCALARS:
        return _SCALARS[f.type]
    if f.type in (FD.TYPE_MESSAGE, FD.TYPE_ENUM) and f.type_name.startswith("."):
        return f.type_name
    if not f.HasField("type"):
        raise Unsupported(f"{where}.{f.name}: a field without a resolved type")
    raise Unsupported(f"{where}.{f.name}: type name {f.type_name!r} not fully qualified")


def _default(f: descriptor_pb2.FieldDescriptorProto) -> str:
    """A proto2 default as .proto text: strings quoted (bytes come C-escaped already),
    enum values and numbers bare."""
    if f.type == FD.TYPE_STRING:
        return _quote(f.default_value)
    if f.type == FD.TYPE_BYTES:
        return f'"{f.default_value}"'
    return f.default_value


def _value(fd: FieldDescriptor, value: Any) -> str:
    """An option's value as .proto text."""
    if fd.message_type is not None:
        inner = text_format.MessageToString(value, as_one_line=True)
        return f"{{ {inner} }}" if inner else "{}"
    if fd.enum_type is not None:
        return fd.enum_type.values_by_number[value].name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return '"' + "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\{b:03o}"
                             for b in value) + '"'
    return repr(value)


def _quote(s: str) -> str:
    """``s`` as a .proto string literal (C escapes for quotes, backslashes, control chars)."""
    out = ['"']
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def json_name(name: str) -> str:
    """protoc's default JSON name of a field (descriptor.cc ToJsonName)."""
    out, up = [], False
    for c in name:
        if c == "_":
            up = True
        else:
            out.append(c.upper() if up else c)
            up = False
    return "".join(out)


def _map_entry_name(field: str) -> str:
    """The map-entry type protoc makes for a map field (descriptor.cc MapEntryName)."""
    out, cap = [], True
    for c in field:
        if c == "_":
            cap = True
        elif cap:
            out.append(c.upper() if "a" <= c <= "z" else c)
            cap = False
        else:
            out.append(c)
    return "".join(out) + "Entry"
