"""PROTOBUF schemas (engine/schemas/protobuf.py, protobuf_files.py, protoc.py): .proto text and
the base64 FileDescriptorProto confluent-kafka registers, references and well-known types, the
canonical and normalized forms, Confluent's message-index framing (byte for byte against
confluent-kafka's ProtobufSerializer), JSON in and out, and every bad schema and payload as
InvalidSchema / SchemaMismatch."""

import base64
import importlib
import os
import random

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.common.protobuf import _create_index_array
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from grpc_tools import protoc as grpc_protoc

from engine.errors import InvalidArgument
from engine.schemas import kinds, protobuf, protobuf_files
from engine.schemas.errors import InvalidSchema, SchemaMismatch
from engine.schemas.kinds import Reference

SHOP = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

enum Status { NEW = 0; PAID = 1; }

message Order {
  int64 id = 1;
  string name = 2;
  google.protobuf.Timestamp at = 3;
  map<string, int32> counts = 4;
  Status status = 5;
  message Line {
    string sku = 1;
    message Detail { int32 qty = 1; }
    Detail detail = 2;
  }
  repeated Line lines = 6;
  bytes blob = 7;
}

message Other {
  bool ok = 1;
  message Inner { sint64 z = 1; }
}
"""


def ref(name: str, schema: str, subject: str = "", version: int = 1) -> Reference:
    return Reference(name, subject or name, version, "PROTOBUF", schema)


def b64(proto: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.b64encode(proto.SerializeToString()).decode()


@pytest.fixture(scope="module")
def shop() -> protobuf.ProtobufSchema:
    return protobuf.parse(SHOP)


# -- parsing -------------------------------------------------------------------------------


def test_text_parses_with_its_messages_and_the_first_is_the_default(shop):
    assert shop.schema_type == "PROTOBUF" and shop.name == "shop.Order" and shop.indexes == [0]
    assert shop.messages() == ["shop.Order", "shop.Order.Line", "shop.Order.Line.Detail",
                               "shop.Other", "shop.Other.Inner"]  # (no CountsEntry)
    assert kinds.parse("PROTOBUF", SHOP).canonical() == shop.canonical()
    assert shop.text() == SHOP and shop.text("json") == SHOP


def test_message_picks_another_by_full_or_package_relative_name(shop):
    assert shop.message("shop.Other.Inner").name == "shop.Other.Inner"
    assert shop.message("Order.Line.Detail").name == "shop.Order.Line.Detail"
    assert shop.message(".shop.Other").indexes == [1]
    # nested indexes count map entries, as the descriptor's nested types do (CountsEntry is 0)
    assert shop.message("Order.Line").indexes == [0, 1]
    assert shop.message("Order.Line.Detail").indexes == [0, 1, 0]
    with pytest.raises(InvalidArgument, match=r"no message type 'Nope'.*shop\.Order, "
                       r"shop\.Order\.Line, .*shop\.Other\.Inner\)"):
        shop.message("Nope")
    with pytest.raises(InvalidArgument, match="no message type"):
        shop.message("Order.CountsEntry")  # (a map entry is not a message to pick)


def test_base64_descriptor_parses_to_the_same_schema(shop):
    serialized = shop.text("serialized")
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in proto.message_type] == ["Order", "Other"]
    assert list(proto.dependency) == ["google/protobuf/timestamp.proto"]  # (deps not inside)
    again = protobuf.parse(serialized)
    assert again.canonical() == shop.canonical() and again.text("serialized") == serialized
    # text() prints it as .proto text (protobuf_text), the same schema again
    assert protobuf.parse(again.text()).canonical() == shop.canonical()
    assert again.messages() == shop.messages()
    # the name a serializer's generated code gave the file does not count
    proto.name = "somewhere/else.proto"
    assert protobuf.parse(b64(proto)).canonical() == shop.canonical()


def test_the_descriptor_of_generated_code_equals_the_text(tmp_path, monkeypatch):
    """What confluent-kafka's ProtobufSerializer registers (the generated module's descriptor:
    no json_name, its own file name) is the same schema as the .proto text."""
    text = ('syntax = "proto2";\npackage gen_eq;\nmessage A { required int32 a_b = 1; '
            'optional string c = 2 [json_name = "cee"]; }\n')
    (tmp_path / "gen_eq.proto").write_text(text)
    assert grpc_protoc.main(["protoc", f"-I{tmp_path}", f"--python_out={tmp_path}",
                             "gen_eq.proto"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("gen_eq_pb2")
    generated = base64.b64encode(module.DESCRIPTOR.serialized_pb).decode()
    assert "jsonName" not in str(descriptor_pb2.FileDescriptorProto.FromString(
        module.DESCRIPTOR.serialized_pb).message_type[0].field[0])
    assert protobuf.parse(generated).canonical() == protobuf.parse(text).canonical()
    # a custom json_name is part of the schema
    other = text.replace('json_name = "cee"', 'json_name = "see"')
    assert protobuf.parse(other).canonical() != protobuf.parse(text).canonical()


def test_canonical_ignores_layout_and_normalized_ignores_order():
    a = 'syntax = "proto3"; message M { int32 a = 1; string b = 2; }'
    spaced = '// a comment\nsyntax = "proto3";\n\nmessage M {\n  int32 a = 1;\n  string b = 2;\n}\n'
    swapped = 'syntax = "proto3"; message M { string b = 2; int32 a = 1; }'
    retyped = 'syntax = "proto3"; message M { int64 a = 1; string b = 2; }'
    p = protobuf.parse
    assert p(a).canonical() == p(spaced).canonical()
    assert p(a).canonical() != p(swapped).canonical()
    assert p(a).normalized() == p(swapped).normalized()
    assert p(a).canonical() != p(retyped).canonical() and p(a).normalized() != p(retyped).normalized()
    # imports sorted; oneofs by their first field; enum values by number
    one = ('syntax = "proto3"; import "google/protobuf/timestamp.proto"; '
           'import "google/protobuf/duration.proto"; enum E { Z = 0; B = 2; A = 1; } '
           'message M { oneof x { int32 c = 3; } oneof y { int32 d = 1; } '
           'google.protobuf.Timestamp t = 4; google.protobuf.Duration u = 5; }')
    two = ('syntax = "proto3"; import "google/protobuf/duration.proto"; '
           'import "google/protobuf/timestamp.proto"; enum E { Z = 0; A = 1; B = 2; } '
           'message M { oneof y { int32 d = 1; } oneof x { int32 c = 3; } '
           'google.protobuf.Timestamp t = 4; google.protobuf.Duration u = 5; }')
    assert p(one).canonical() != p(two).canonical() and p(one).normalized() == p(two).normalized()
    # proto2 said or not: the same file
    assert p('syntax = "proto2"; message M { optional int32 a = 1; }').canonical() == \
        p("message M { optional int32 a = 1; }").canonical()


def test_references_as_text_and_as_base64():
    common = 'syntax = "proto3"; package common; message Address { string city = 1; }'
    main = ('syntax = "proto3"; package people; import "common/address.proto"; '
            'message Person { string name = 1; common.Address home = 2; }')
    as_text = protobuf.parse(main, [ref("common/address.proto", common)])
    value = as_text.from_json({"name": "ann", "home": {"city": "Oslo"}})
    assert as_text.to_json(as_text.decode(as_text.encode(value))) == {
        "name": "ann", "home": {"city": "Oslo"}}
    # the reference as confluent-kafka registers it, the main file as .proto text or base64
    common_b64 = protobuf.parse(common).text("serialized")
    as_b64 = protobuf.parse(main, [ref("common/address.proto", common_b64)])
    assert as_b64.canonical() == as_text.canonical()
    main_b64 = as_text.text("serialized")
    both = protobuf.parse(main_b64, [ref("common/address.proto", common_b64)])
    assert both.canonical() == as_text.canonical() and both.encode(value) == as_text.encode(value)
    # a chain: a reference importing another, given dependencies first
    street = 'syntax = "proto3"; package st; message Street { string name = 1; }'
    addr2 = ('syntax = "proto3"; package common; import "st/street.proto"; '
             'message Address { st.Street street = 1; }')
    chained = protobuf.parse(main, [ref("st/street.proto", street),
                                    ref("common/address.proto", addr2)])
    assert chained.from_json({"home": {"street": {"name": "Main"}}}).home.street.name == "Main"
    # mixed: the middle file in base64 over a .proto text it imports
    addr2_b64 = protobuf.parse(addr2, [ref("st/street.proto", street)]).text("serialized")
    mixed = protobuf.parse(main, [ref("st/street.proto", street),
                                  ref("common/address.proto", addr2_b64)])
    assert mixed.canonical() == chained.canonical()
    # a reference that does not compile is named in the error
    with pytest.raises(InvalidSchema, match=r"^st/street.proto:1:28: Expected message name."):
        protobuf.parse(main, [ref("st/street.proto", 'syntax = "proto3"; message {'),
                              ref("common/address.proto", addr2)])
    # two schemas defining the same names differently live side by side (a pool each)
    assert protobuf.parse(main, [ref("common/address.proto", common)]).from_json(
        {"home": {"city": "x"}}).home.city == "x"


def test_a_missing_or_unsafe_reference_is_an_invalid_schema():
    main = 'syntax = "proto3"; import "common/address.proto"; message P { common.Address a = 1; }'
    with pytest.raises(InvalidSchema, match=r'common/address.proto: File not found.*'
                       r'Import "common/address.proto" was not found'):
        protobuf.parse(main)
    as_b64 = protobuf.parse('syntax = "proto3"; package common; message Address {}').text("serialized")
    proto = descriptor_pb2.FileDescriptorProto(name="x", dependency=["common/address.proto"])
    with pytest.raises(InvalidSchema, match=r'import "common/address.proto" not found: register '
                       r"it and pass it as a reference"):
        protobuf.parse(b64(proto))
    assert protobuf.parse(b64(proto), [ref("common/address.proto", as_b64)]).name == ""
    for bad in ("../etc/passwd", "/abs.proto", "a//b.proto", "a\\b.proto"):
        with pytest.raises(InvalidSchema, match="Invalid reference name"):
            protobuf.parse(main, [ref(bad, 'syntax = "proto3";')])


def test_well_known_types_need_no_reference():
    text = ('syntax = "proto3"; import "google/protobuf/timestamp.proto"; '
            'import "google/protobuf/wrappers.proto"; import "google/protobuf/struct.proto"; '
            'message W { google.protobuf.Timestamp at = 1; google.protobuf.Int64Value n = 2; '
            'google.protobuf.Struct extra = 3; }')
    w = protobuf.parse(text)
    doc = {"at": "2024-05-01T10:00:00Z", "n": "42", "extra": {"k": [1, "two", None]}}
    assert w.to_json(w.decode(w.encode(doc))) == doc
    # confluent-kafka's base64 form of the same file (its imports are never references)
    assert protobuf.parse(w.text("serialized")).to_json(w.from_json(doc)) == doc
    # google/type/*, which Confluent's clients also skip, when googleapis-common-protos is there
    pytest.importorskip("google.type.date_pb2")
    d = protobuf.parse('syntax = "proto3"; import "google/type/date.proto"; '
                       'message D { google.type.Date day = 1; }')
    assert d.to_json(d.from_json({"day": {"year": 2024, "month": 2}})) == {
        "day": {"year": 2024, "month": 2, "day": 0}}
    # and a reference registered for a well-known file is not needed (ours is used)
    assert protobuf.parse(text, [ref("google/protobuf/timestamp.proto", "garbage")]).name == "W"


# -- bad schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("text,message", [
    ('syntax = "proto3"; message A { int32 a = ; }', "schema.proto:1:42: Expected field number."),
    ('syntax = "proto3"; message A { Nope a = 1; }', 'schema.proto:1:32: "Nope" is not defined.'),
    ('syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }',
     'schema.proto:1:55: Field number 1 has already been used in "A" by field "a".'),
    ("QUJDRA==", "schema.proto: neither .proto text nor a base64 FileDescriptorProto"),
    ("message A {}\ud800", "schema.proto: not UTF-8 text (surrogates not allowed at 12)"),
    ('syntax = "proto3"; message A { string \0 = 1; }',
     "schema.proto:1:39: Invalid control characters encountered in text."),
])
def test_a_bad_schema_is_an_invalid_schema_with_protocs_one_line(text, message):
    with pytest.raises(InvalidSchema) as e:
        protobuf.parse(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert "rivven-protoc" not in str(e.value) and e.value.code == 42201


def test_not_a_string_and_an_invalid_descriptor_are_invalid_schemas():
    with pytest.raises(InvalidSchema, match="must be a string"):
        protobuf.parse(b"syntax")  # type: ignore[arg-type]
    proto = descriptor_pb2.FileDescriptorProto(name="x")
    proto.message_type.add(name="A").field.add(name="a", number=1, type=11, label=1,
                                                type_name=".Missing")
    with pytest.raises(InvalidSchema, match="schema.proto: .*Missing"):
        protobuf.parse(b64(proto))


def test_protocs_fd_2_is_given_back():
    before = os.fstat(2)
    with pytest.raises(InvalidSchema):
        protobuf.parse('syntax = "proto3"; message { }')
    after = os.fstat(2)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)


def test_what_another_thread_writes_to_fd_2_meanwhile_is_written_back(monkeypatch, capfd):
    from engine.schemas import protoc

    real = protoc.protoc.main

    def noisy(args):
        os.write(2, b"INFO another thread: still here\n")
        return real(args)

    monkeypatch.setattr(protoc.protoc, "main", noisy)
    with pytest.raises(InvalidSchema) as e:
        protobuf.parse('syntax = "proto3"; message Noisy { int32 a = ; }')
    assert str(e.value) == "schema.proto:1:46: Expected field number."
    protobuf.parse('syntax = "proto3"; message Quiet { int32 a = 1; }')
    assert capfd.readouterr().err == "INFO another thread: still here\n" * 2


def test_loads_are_cached():
    text = 'syntax = "proto3"; message Cached { int32 a = 1; }'
    assert protobuf_files.load(text) is protobuf_files.load(text)
    assert protobuf_files.load(text) is not protobuf_files.load(text, [ref("x.proto", "")])


# -- the framing -------------------------------------------------------------------------------


@pytest.mark.parametrize("indexes,raw", [
    ([0], b"\x00"), ([1], b"\x02\x02"), ([1, 0], b"\x04\x02\x00"), ([0, 1, 0], b"\x06\x00\x02\x00"),
    ([64], b"\x02\x80\x01"), ([0, 0], b"\x04\x00\x00"),
])
def test_message_indexes_both_ways(indexes, raw):
    assert protobuf.write_indexes(indexes) == raw
    assert protobuf.read_indexes(raw + b"rest") == (indexes, len(raw))


def test_a_count_of_zero_reads_as_the_first_message():
    assert protobuf.read_indexes(b"\x00\x08\x01") == ([0], 1)


def test_encode_and_decode_pick_the_message_by_its_indexes(shop):
    line = shop.message("Order.Line")
    detail = shop.message("shop.Order.Line.Detail")
    inner = shop.message("Other.Inner")
    payload = detail.encode({"qty": 7})
    assert payload[:4] == b"\x06\x00\x02\x00"
    for schema in (shop, line, inner):  # (whichever message the schema was made for)
        msg = schema.decode(payload)
        assert msg.DESCRIPTOR.full_name == "shop.Order.Line.Detail" and msg.qty == 7
    assert shop.decode(inner.encode({"z": -3})).z == -3
    assert shop.encode({"id": 1})[:1] == b"\x00"
    assert line.decode(shop.encode({"id": 1})).DESCRIPTOR.full_name == "shop.Order"


def test_the_bytes_are_confluent_kafkas_serializers_and_each_reads_the_other(shop):
    client = SchemaRegistryClient.new_client({"url": "mock://rivven"})
    ctx = SerializationContext("orders", MessageField.VALUE)
    docs = {
        "shop.Order": {"id": "-5", "name": "né", "at": "2024-01-01T00:00:01Z",
                       "counts": {"a": 1}, "status": "PAID", "lines": [{"sku": "x"}],
                       "blob": "AAE="},
        "shop.Order.Line": {"sku": "s", "detail": {"qty": 3}},
        "shop.Order.Line.Detail": {"qty": 2},
        "shop.Other": {"ok": True},
        "shop.Other.Inner": {"z": "-9"},
    }
    for name, doc in docs.items():
        schema = shop.message(name)
        msg = schema.from_json(doc)
        assert _create_index_array(msg.DESCRIPTOR) == schema.indexes
        theirs = ProtobufSerializer(type(msg), client, {"use.deprecated.format": False})(msg, ctx)
        assert theirs[0] == 0 and theirs[5:] == schema.encode(msg) == schema.encode(doc)
        reader = ProtobufDeserializer(type(msg), {"use.deprecated.format": False}, client)
        assert reader(theirs[:5] + schema.encode(doc), ctx) == msg
        assert shop.decode(theirs[5:]) == msg
    # what it registered (base64, the file's name inside) is this schema
    registered = client.get_latest_version("orders-value").schema
    assert registered.schema_type == "PROTOBUF"
    assert protobuf.parse(registered.schema_str).canonical() == shop.canonical()


@pytest.mark.parametrize("payload,problem", [
    (b"", "truncated message indexes"),
    (b"\x02", "truncated message indexes"),
    (b"\x04\x02", "truncated message indexes"),
    (b"\x80", "truncated message indexes"),
    (b"\x01", "a count of -1"),
    (b"\xfe\xff\xff\xff\x0f", "a count of 2147483647"),
    (b"\x02\x06", "message index 3 out of range: 2 top-level"),
    (b"\x04\x02\x04", "message index 2 out of range: 1 nested in shop.Other"),
    (b"\x02\x01", "bad message indexes [-1]"),
    (b"\xff" * 11, "a varint longer than 10 bytes"),
    (b"\x00\xff\xff\xff", "not a shop.Order message"),
    (b"\x00\x0a\x05ab", "not a shop.Order message"),  # (a length past the end)
])
def test_a_bad_payload_is_a_schema_mismatch(shop, payload, problem):
    with pytest.raises(SchemaMismatch, match=problem.replace("[", r"\[")):
        shop.decode(payload)


def test_random_payloads_never_raise_anything_else(shop):
    rnd = random.Random(33)
    for _ in range(3000):
        payload = bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))
        try:
            shop.decode(payload)
        except SchemaMismatch:
            pass


# -- JSON ------------------------------------------------------------------------------------


def test_to_json_as_confluents_console_consumer(shop):
    msg = shop.from_json({"id": 9007199254740993, "lines": [{}], "status": 1})
    assert shop.to_json(msg) == {
        "id": "9007199254740993", "name": "", "counts": {}, "status": "PAID",
        "lines": [{"sku": ""}], "blob": ""}  # (int64 as a string, every field, .proto names)
    assert shop.from_json({"id": "9007199254740993"}).id == 9007199254740993
    # a message field unset is left out (it has presence), as JsonFormat does
    assert "at" not in shop.to_json(msg)


@pytest.mark.parametrize("doc,field,problem", [
    ({"id": "abc"}, "id", "invalid literal for int()"),
    ({"lines": [{"sku": 1}]}, "lines.sku", "expected string"),
    ({"lines": [{"detail": {"qty": "x"}}]}, "lines.detail.qty", "invalid literal"),
    ({"nope": 1}, "nope", "no such field in shop.Order (its fields: id, name, at, counts"),
    ({"lines": [{"nope": 1}]}, "lines[0].nope", "no such field in shop.Order.Line"),
    ({"status": "GONE"}, "status", "Invalid enum value GONE"),
    ({"at": "yesterday"}, "at", ""),
    ({"counts": {"a": "b"}}, "counts", "invalid literal"),
    ([1, 2], "", "expected a JSON object for shop.Order, got list"),
    ("x", "", "expected a JSON object"),
])
def test_json_that_does_not_fit_names_the_field(shop, doc, field, problem):
    with pytest.raises(SchemaMismatch) as e:
        shop.from_json(doc)
    assert e.value.field == field and problem in e.value.problem
    if isinstance(doc, dict):
        with pytest.raises(SchemaMismatch):
            shop.encode(doc)


def test_encode_refuses_another_type_and_a_missing_required_field(shop):
    with pytest.raises(SchemaMismatch, match="expected a shop.Order message or a dict, got "
                       "shop.Other"):
        shop.encode(shop.message("Other").from_json({}))
    with pytest.raises(SchemaMismatch, match="got int"):
        shop.encode(5)
    p2 = protobuf.parse('syntax = "proto2"; message R { required int32 must = 1; '
                        'optional R next = 2; }')
    with pytest.raises(SchemaMismatch) as e:
        p2.encode({"next": {"must": 1}})
    assert e.value.field == "must" and "required" in e.value.problem
    with pytest.raises(SchemaMismatch) as e:
        p2.encode({"must": 1, "next": {}})
    assert e.value.field == "next.must"
    # decoding is lenient about them, as confluent-kafka's deserializer (upb's parser)
    assert p2.to_json(p2.decode(b"\x00")) == {}
    with pytest.raises(SchemaMismatch, match="expected a Protobuf message"):
        shop.to_json({"id": 1})


def test_a_file_without_messages_can_be_referenced_but_not_encoded():
    enums = protobuf.parse('syntax = "proto3"; package e; enum Color { RED = 0; }')
    assert enums.name == "" and enums.messages() == []
    with pytest.raises(SchemaMismatch, match="no message type to encode"):
        enums.encode({})
    with pytest.raises(SchemaMismatch, match="no message type"):
        enums.decode(b"\x00")
    user = protobuf.parse('syntax = "proto3"; import "e.proto"; message U { e.Color c = 1; }',
                          [ref("e.proto", enums.text())])
    assert user.to_json(user.from_json({"c": "RED"})) == {"c": "RED"}



PLAIN = protobuf.parse("""syntax = "proto3";
message P { int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5;
  fixed64 f64 = 6; bool b = 7; string s = 8; double d = 9; float f = 10; bytes raw = 11;
  optional int32 opt = 12; repeated int32 many = 13; oneof o { int32 one = 14; } }""")
VALUES = [0, 1, -1, 2**31, -2**31 - 1, 2**32, 2**63, 2**64, True, False, 1.5, 1e39, -0.0,
          float("nan"), float("inf"), "7", "x", "", "AAE=", None, [1], {"a": 1}, b"x"]


def test_the_constructor_path_gives_parsedicts_message_or_its_error():
    """from_json hands plain documents to the message's constructor: for every field and value
    the result is ParseDict's (the same message, or a SchemaMismatch on the same field)."""
    from google.protobuf import json_format

    from engine.schemas import protobuf_json

    cls = type(PLAIN.from_json({}))
    rnd = random.Random(7)
    names = [f.name for f in PLAIN.descriptor.fields] + ["rawBytes", "nope"]
    for _ in range(4000):
        doc = {rnd.choice(names): rnd.choice(VALUES) for _ in range(rnd.randrange(1, 4))}
        try:
            want = json_format.ParseDict(doc, cls())
        except json_format.ParseError as e:
            with pytest.raises(SchemaMismatch) as got:
                PLAIN.from_json(doc)
            assert got.value.field == protobuf_json.mismatch(str(e)).field, doc
            continue
        got_msg = PLAIN.from_json(doc)
        assert got_msg.SerializeToString(deterministic=True) == want.SerializeToString(
            deterministic=True), doc
