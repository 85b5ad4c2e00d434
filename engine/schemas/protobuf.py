"""PROTOBUF schemas: ``parse`` and ``ProtobufSchema`` (the ``Parsed`` of kinds.py).

A schema is a .proto file (text, or the base64 ``FileDescriptorProto`` confluent-kafka's
ProtobufSerializer registers), built by ``protobuf_files``; values are messages of one of its
message types: the file's first unless ``message(name)`` chose another.

Confluent's framing after the 5-byte header: the message's indexes (its place in the file:
``[1, 0]`` = the first message nested in the second top-level one) as zigzag varints, the count
first; ``[0]`` is the single byte 0 (a count of 0 reads as ``[0]``); then the message.
Indexes count every nested message type in declaration order, map entries included: the
descriptor's ``nested_types``, as confluent-kafka's serializers count them (Python's
``_create_index_array``; Java's from the message's descriptor, whose map entries stay types).

Values from and to JSON: protobuf_json (proto3's JSON mapping, as Confluent's console tools).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, EncodeError, Message

from . import protobuf_compat, protobuf_files, protobuf_json, protobuf_text, protoc
from .errors import InvalidSchema, SchemaMismatch
from .kinds import Reference

FileProto: TypeAlias = descriptor_pb2.FileDescriptorProto
MAX_DEPTH = 100  # message indexes read at most (a message nested deeper is not addressable)


def parse(text: str, references: Sequence[Reference] = ()) -> ProtobufSchema:
    """``text`` (.proto text or a base64 ``FileDescriptorProto``) with ``references`` as a
    schema of its first message; InvalidSchema with protoc's message when it does not build."""
    files = protobuf_files.load(text, references)
    first = files.file.message_types_by_name
    return ProtobufSchema(files, next(iter(first.values())) if first else None)


class ProtobufSchema:
    """A .proto file and one of its message types (``descriptor``; None for a file without
    messages, which can be referenced but not encoded)."""

    schema_type = "PROTOBUF"

    def __init__(self, files: protobuf_files.Files, descriptor: Descriptor | None) -> None:
        self.files = files
        self.descriptor = descriptor
        self.indexes = _indexes_of(descriptor) if descriptor is not None else [0]
        self._header = write_indexes(self.indexes)
        self._class: Any = (message_factory.GetMessageClass(descriptor)
                            if descriptor is not None else None)
        self._others: dict[tuple[int, ...], tuple[Descriptor, Any]] = {}  # other messages

    @property
    def name(self) -> str:
        """The full name of the message type values are (``""`` when the file has none)."""
        return self.descriptor.full_name if self.descriptor is not None else ""

    def messages(self) -> list[str]:
        """The full names of the file's message types, nested ones included (map entries
        left out), in declaration order."""
        out: list[str] = []

        def walk(descs: Sequence[Descriptor]) -> None:
            for d in descs:
                if not d.GetOptions().map_entry:
                    out.append(d.full_name)
                    walk(d.nested_types)

        walk(list(self.files.file.message_types_by_name.values()))
        return out

    def message(self, name: str) -> ProtobufSchema:
        """The same schema for the message type ``name``: its full name (``shop.Order.Line``)
        or its name within the package (``Order.Line``); InvalidArgument listing the file's
        message types when it has none of that name."""
        package = self.files.main.package
        for full in (name.lstrip("."), f"{package}.{name}" if package else name):
            if full in self.messages():
                return ProtobufSchema(self.files, self.files.pool.FindMessageTypeByName(full))
        known = ", ".join(self.messages()) or "none"
        raise SchemaMismatch("", f"no message type {name!r} in the schema (its message types: "
                             f"{known})")

    # -- forms -------------------------------------------------------------------------------

    def canonical(self) -> str:
        """The file as protoc compiles it, in base64 (deterministic serialization), without
        what does not change the schema: its file name, the JSON names protoc derives, source
        positions, ``syntax = "proto2"`` (the default). The same .proto registered as text and
        as a base64 descriptor (confluent-kafka's serializer) compares equal. Confluent prints
        .proto text from its parsed file instead; both identify a schema by its descriptors."""
        return self._forms[0]

    def normalized(self) -> str:
        """``canonical`` with Confluent's normalization (ProtobufSchemaUtils with normalize):
        imports sorted and deduplicated, fields sorted by number, oneofs by their first field's
        number, enum values by number, reserved ranges and names sorted. Message and enum
        declarations keep their order (message indexes depend on it); type names are always
        fully qualified in a descriptor."""
        return self._forms[1]

    @functools.cached_property
    def _forms(self) -> tuple[str, str]:
        proto = _canonical_proto(self.files.main)
        canonical = _b64(proto)
        _normalize(proto)
        return canonical, _b64(proto)

    def text(self, fmt: str | None = None) -> str:
        """The schema as .proto text: the text as registered, or for a schema registered as a
        base64 ``FileDescriptorProto`` that file printed (protobuf_text), as Confluent's
        registry answers; the base64 as registered when the printer does not cover the file
        (editions, extensions, custom options: see protobuf_text) or its text would not
        compile back to the same schema. ``fmt="serialized"``: the file's
        ``FileDescriptorProto`` in base64 (its imports not included: each is its own
        reference)."""
        if fmt == "serialized":
            return _b64(self.files.main)
        return self._printed

    @functools.cached_property
    def _printed(self) -> str:
        text = self.files.text
        if protobuf_files.decoded(text, self.files.main.name) is None:
            return text  # (registered as .proto text)
        try:
            printed = protobuf_text.to_text(self.files.main, self.files.pool)
        except protobuf_text.Unsupported:
            return text
        # compiled again beside the same imports, it must be the same schema: else base64
        main = self.files.main.name
        known = [p for n, p in self.files.protos.items()
                 if n != main and not n.startswith("google/protobuf/")]
        try:
            again = [p for p in protoc.compile_files({main: printed}, [main], known) if p.name == main]
        except InvalidSchema:
            return text
        if not again or _b64(_canonical_proto(again[0])) != self.canonical():
            return text
        return printed

    def problems_reading(self, writer: Any) -> list[str]:
        """Confluent's Protobuf rules (protobuf_compat): why data written with ``writer``'s file
        cannot be read with this one."""
        if not isinstance(writer, ProtobufSchema):
            return ["Incompatible because of different schema type"]
        return protobuf_compat.problems(self.files, writer.files)

    # -- values ------------------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """The message indexes, then the message: ``value`` a message of this type or a dict
        (as ``from_json`` takes it)."""
        msg = self.from_json(value) if isinstance(value, Mapping) else value
        if not isinstance(msg, Message) or msg.DESCRIPTOR.full_name != self._need().full_name:
            got = msg.DESCRIPTOR.full_name if isinstance(msg, Message) else type(msg).__name__
            raise SchemaMismatch("", f"expected a {self.name} message or a dict, got {got}")
        if not msg.IsInitialized():
            missing = msg.FindInitializationErrors()
            raise SchemaMismatch(missing[0] if missing else "", "required field not set")
        try:
            return self._header + msg.SerializeToString()
        except (EncodeError, ValueError) as e:
            raise SchemaMismatch("", f"does not encode: {e}") from e

    def decode(self, payload: bytes) -> Message:
        """The message a payload holds, of the type its message indexes name."""
        data = bytes(payload)
        indexes, pos = read_indexes(data)
        if indexes == self.indexes:
            desc, cls = self._need(), self._class
        else:
            key = tuple(indexes)
            if key not in self._others:  # (only indexes that name a message get here)
                found = self._at(indexes)
                self._others[key] = (found, message_factory.GetMessageClass(found))
            desc, cls = self._others[key]
        try:
            return cls.FromString(data[pos:])
        except (DecodeError, ValueError, RuntimeError) as e:
            raise SchemaMismatch("", f"not a {desc.full_name} message: {e}") from e

    def from_json(self, doc: Any) -> Message:
        """A JSON object (proto3's JSON mapping) as a message of this type."""
        return protobuf_json.from_json(self._class, self._need(), doc)

    def to_json(self, value: Any) -> Any:
        """A message as a JSON object (proto3's JSON mapping, every field, .proto names)."""
        if not isinstance(value, Message):
            raise SchemaMismatch("", f"expected a Protobuf message, got {type(value).__name__}")
        return protobuf_json.to_json(value)

    def _need(self) -> Descriptor:
        if self.descriptor is None:
            raise SchemaMismatch("", "the schema has no message type to encode or decode")
        return self.descriptor

    def _at(self, indexes: list[int]) -> Descriptor:
        """The message type at ``indexes``; SchemaMismatch when the file has none there."""
        descs = list(self.files.file.message_types_by_name.values())
        desc = None
        for depth, i in enumerate(indexes):
            if not 0 <= i < len(descs):
                where = "top-level" if depth == 0 else f"nested in {desc.full_name}" if desc else ""
                raise SchemaMismatch("", f"message index {i} out of range: {len(descs)} {where} "
                                     f"message type(s) (indexes {indexes})")
            desc = descs[i]
            descs = list(desc.nested_types)
        assert desc is not None
        return desc

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.name or '<no message>'})"


def write_indexes(indexes: Sequence[int]) -> bytes:
    """Confluent's message-index array: the count, then each index, as zigzag varints;
    ``[0]`` as the single byte 0."""
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    for n in (len(indexes), *indexes):
        z = (n << 1) ^ (n >> 63)
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


def read_indexes(data: bytes) -> tuple[list[int], int]:
    """The message indexes at the start of ``data`` and where the message starts;
    SchemaMismatch for a truncated varint, a negative or huge count, a negative index."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data):
                raise SchemaMismatch("", "truncated message indexes")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise SchemaMismatch("", "bad message indexes: a varint longer than 10 bytes")

    count = varint()
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_DEPTH:
        raise SchemaMismatch("", f"bad message indexes: a count of {count}")
    out = [varint() for _ in range(count)]
    if any(i < 0 for i in out):
        raise SchemaMismatch("", f"bad message indexes {out}")
    return out, pos


def _indexes_of(desc: Descriptor) -> list[int]:
    """Where ``desc`` is in its file (confluent-kafka's ``_create_index_array``)."""
    out: list[int] = []
    while desc.containing_type is not None:
        parent = desc.containing_type
        out.append(list(parent.nested_types).index(desc))
        desc = parent
    out.append(list(desc.file.message_types_by_name.values()).index(desc))
    return out[::-1]


def _b64(proto: FileProto) -> str:
    return base64.b64encode(proto.SerializeToString(deterministic=True)).decode("ascii")


def _canonical_proto(main: FileProto) -> FileProto:
    proto = FileProto()
    proto.CopyFrom(main)
    proto.ClearField("name")
    proto.ClearField("source_code_info")
    if proto.syntax == "proto2":
        proto.ClearField("syntax")

    def fields(msg: descriptor_pb2.DescriptorProto) -> None:
        for f in [*msg.field, *msg.extension]:
            if f.json_name == protobuf_text.json_name(f.name):
                f.ClearField("json_name")
        for nested in msg.nested_type:
            fields(nested)

    for msg in proto.message_type:
        fields(msg)
    for ext in proto.extension:
        if ext.json_name == protobuf_text.json_name(ext.name):
            ext.ClearField("json_name")
    return proto


def _normalize(proto: FileProto) -> None:
    deps = list(proto.dependency)
    public = sorted({deps[i] for i in proto.public_dependency})
    weak = sorted({deps[i] for i in proto.weak_dependency})
    ordered = sorted(set(deps))
    proto.ClearField("dependency")
    proto.dependency.extend(ordered)
    proto.ClearField("public_dependency")
    proto.public_dependency.extend(ordered.index(d) for d in public)
    proto.ClearField("weak_dependency")
    proto.weak_dependency.extend(ordered.index(d) for d in weak)
    for msg in proto.message_type:
        _normalize_message(msg)
    for enum in proto.enum_type:
        _normalize_enum(enum)


def _normalize_message(msg: descriptor_pb2.DescriptorProto) -> None:
    # oneofs by their first field's number, proto3's synthetic ones (`optional`) last as a
    # descriptor wants them; empty ones dropped (as Confluent's printer does)
    fields = sorted(msg.field, key=lambda f: f.number)
    used = list(dict.fromkeys(f.oneof_index for f in fields if f.HasField("oneof_index")))
    synthetic = {f.oneof_index for f in fields if f.proto3_optional}
    used.sort(key=lambda i: i in synthetic)
    remap = {old: new for new, old in enumerate(used)}
    decls = [msg.oneof_decl[i] for i in used]
    _replace(msg.field, fields)
    for f in msg.field:
        if f.HasField("oneof_index"):
            f.oneof_index = remap[f.oneof_index]
    _replace(msg.oneof_decl, decls)
    _replace(msg.reserved_range, sorted(msg.reserved_range, key=lambda r: (r.start, r.end)))
    _replace(msg.extension_range, sorted(msg.extension_range, key=lambda r: (r.start, r.end)))
    names = sorted(set(msg.reserved_name))
    msg.ClearField("reserved_name")
    msg.reserved_name.extend(names)
    for nested in msg.nested_type:
        _normalize_message(nested)
    for enum in msg.enum_type:
        _normalize_enum(enum)


def _normalize_enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    _replace(enum.value, sorted(enum.value, key=lambda v: (v.number, v.name)))
    _replace(enum.reserved_range, sorted(enum.reserved_range, key=lambda r: (r.start, r.end)))
    names = sorted(set(enum.reserved_name))
    enum.ClearField("reserved_name")
    enum.reserved_name.extend(names)


def _replace(repeated: Any, items: list[Any]) -> None:
    """A repeated message field's elements replaced by ``items`` (copies: some of them are its
    own elements)."""
    copies = [type(item)() for item in items]
    for copy, item in zip(copies, items):
        copy.CopyFrom(item)
    del repeated[:]
    repeated.extend(copies)

