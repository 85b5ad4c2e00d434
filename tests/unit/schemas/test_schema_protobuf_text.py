"""protobuf_text: a base64 FileDescriptorProto printed as .proto text compiles back to the same
schema; ProtobufSchema.text() and the registry answer that text for a schema registered as
base64, and keep the base64 for what the printer does not cover."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from engine import Engine
from engine.schemas import protobuf, protobuf_files, protobuf_text
from engine.schemas.kinds import Reference

COMMON = """syntax = "proto3";
package common;
message Address { string street = 1; int32 zip = 2; }
enum Country { UNKNOWN = 0; FR = 1; DE = 2; }
"""
COMMON_REF = Reference("common/address.proto", "common", 1, "PROTOBUF", COMMON)

# (name, .proto text, whether it imports COMMON)
FILES = [
    ("proto3 flat", 'syntax = "proto3";\nmessage A { int32 a = 1; string b = 2; bytes c = 3; }', False),
    ("proto3 every scalar and repeated", """syntax = "proto3"; package p.q;
message S { double d = 1; float f = 2; int64 i64 = 3; uint64 u64 = 4; int32 i32 = 5;
  fixed64 f64 = 6; fixed32 f32 = 7; bool b = 8; string s = 9; bytes by = 10; uint32 u32 = 11;
  sfixed32 sf32 = 12; sfixed64 sf64 = 13; sint32 si32 = 14; sint64 si64 = 15;
  repeated int32 r = 16; repeated int32 unpacked = 17 [packed = false]; repeated string rs = 18;
  optional int32 maybe = 19; optional string maybe_s = 20; }""", False),
    ("proto2 labels and defaults", """syntax = "proto2"; package two;
enum Color { RED = 1; GREEN = 2; }
message M { required int32 a = 1; optional string b = 2 [default = "q\\"uo\\\\te\\n"];
  repeated int64 c = 3 [packed = true]; optional Color color = 4 [default = GREEN];
  optional double d = 5 [default = -1.5]; optional float inf = 6 [default = inf];
  optional bytes raw = 7 [default = "\\000\\377ab"]; optional bool flag = 8 [default = true];
  optional int64 big = 9 [default = -9000000000]; optional uint32 u = 10 [default = 7];
  optional double nan = 11 [default = nan]; optional float small = 12 [default = 1e-20];
  extensions 100 to 199; extensions 1000 to max; }""", False),
    ("proto2 without syntax line", "message Old { optional int32 x = 1; required string y = 2; }", False),
    ("nested types and maps in mixed order", """syntax = "proto3"; package shop;
message Order {
  message First { int32 x = 1; }
  map<string, int32> counts = 1;
  message Line { string sku = 1; message Detail { int32 qty = 1; } Detail detail = 2; }
  repeated Line lines = 2;
  map<int64, Line> by_id = 3;
  enum Kind { K0 = 0; K1 = 1; }
  Kind kind = 4;
  map<string, Kind> kinds = 5;
  First first = 6;
  map<bool, bytes> flags_by_bool = 7;
  message Last {}
}
message Other { Order.Line line = 1; map<sint32, Order.Line.Detail> details = 2; }""", False),
    ("oneofs among fields, proto3 optional", """syntax = "proto3";
message O { int32 a = 1;
  oneof choice { string s = 2; int64 n = 3; O nested = 4; }
  optional int32 opt = 5;
  int32 b = 6;
  oneof second { bool yes = 7; }
  optional string opt2 = 8; }""", False),
    ("enums, aliases, reserved", """syntax = "proto3"; package e;
enum Top { option allow_alias = true; T0 = 0; T1 = 1; ALIAS = 1 [deprecated = true];
  reserved 5, 8 to 10, 20 to max; reserved "OLD", "GONE"; }
message R { reserved 2, 15, 9 to 11, 1000 to max; reserved "foo", "bar"; int32 a = 1;
  enum In { I0 = 0; reserved -3 to -1; } In in = 3; }""", False),
    ("options", """syntax = "proto3"; package opts.v1;
option java_package = "com.acme.opts"; option java_multiple_files = true;
option java_outer_classname = "OptsProto"; option go_package = "acme/opts;opts";
option optimize_for = SPEED; option csharp_namespace = "Acme.Opts"; option cc_enable_arenas = true;
message M { option deprecated = true;
  int32 old = 1 [deprecated = true]; string custom_json = 2 [json_name = "cj"];
  int64 as_string = 3 [jstype = JS_STRING]; string weird_name_x = 4;
  oneof o { int32 x = 5; } }
enum E { option deprecated = true; E0 = 0; }""", False),
    ("imports of a reference and of a well-known type", """syntax = "proto3"; package crm;
import "common/address.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Customer { string name = 1; common.Address home = 2; repeated common.Address others = 3;
  common.Country country = 4; google.protobuf.Timestamp since = 5;
  google.protobuf.StringValue nick = 6; map<string, common.Address> by_label = 7; }""", True),
    ("proto2 importing proto3", """syntax = "proto2"; package mix;
import public "common/address.proto";
message P { optional common.Address a = 1; repeated common.Country c = 2; }""", True),
    ("services", """syntax = "proto3"; package svc;
message Req { int32 a = 1; } message Resp { string b = 1; }
service S { option deprecated = true;
  rpc Unary (Req) returns (Resp);
  rpc Streams (stream Req) returns (stream Resp) { option deprecated = true; }
  rpc Idem (Req) returns (Resp) { option idempotency_level = NO_SIDE_EFFECTS; } }""", False),
    ("extend, in the file and in a message", """syntax = "proto2"; package x;
message A { optional int32 a = 1; extensions 10 to 20, 30 to 40;
  extend A { optional string inner = 11; repeated int64 inner_r = 12; } }
extend A { optional int32 more = 10; optional A self = 13; }
message B { optional int32 b = 1; extensions 100 to max; }
extend B { optional B back = 100; }
extend A { optional bool again = 14; }""", False),
    ("custom options of its own", """syntax = "proto3"; package y;
import "google/protobuf/descriptor.proto";
enum Level { L0 = 0; HIGH = 1; }
message Rule { string expr = 1; repeated int32 codes = 2; Level level = 3; }
extend google.protobuf.FieldOptions { int32 my_opt = 50000; Rule rule = 50001;
  repeated string tags = 50002; bytes raw = 50003; Level lvl = 50004; }
extend google.protobuf.MessageOptions { string table = 50000; }
extend google.protobuf.FileOptions { bool audited = 50000; }
option (audited) = true;
message B { option (table) = "b_t\\"x";
  int32 b = 1 [(my_opt) = 5, deprecated = true];
  string c = 2 [(rule) = { expr: "len > 1" codes: [1, 2] level: HIGH }, (tags) = "a", (tags) = "b"];
  bytes d = 3 [(raw) = "\\001\\377z", (lvl) = HIGH, (rule) = {}]; }""", False),
    ("confluent's meta options", """syntax = "proto3"; package z;
import "confluent/meta.proto";
option (confluent.file_meta) = { doc: "file doc" };
message M { option (confluent.message_meta) = { doc: "a message" tags: ["PII"] };
  string ssn = 1 [(confluent.field_meta) = { doc: "é ssn" tags: "PII" params { key: "k" value: "v" } }];
  enum E { option (confluent.enum_meta) = { doc: "e" };
    E0 = 0 [(confluent.enum_value_meta) = { doc: "zero" }]; }
  E e = 2; }""", False),
    ("no messages", 'syntax = "proto3"; package only.enums; enum Z { Z0 = 0; }', False),
    ("deep nesting and relative names", """syntax = "proto3"; package a.b;
message X { message Y { message Z { enum W { W0 = 0; } W w = 1; } Z z = 1; }
  Y.Z.W w = 1; repeated Y y = 2; map<string, Y.Z> zs = 3; }""", False),
]


def refs(with_common: bool) -> list[Reference]:
    return [COMMON_REF] if with_common else []


def as_base64(text: str, references: list[Reference]) -> str:
    return protobuf.parse(text, references).text("serialized")


@pytest.mark.parametrize("name,text,common", FILES, ids=[f[0] for f in FILES])
def test_printed_text_compiles_back_to_the_same_schema(name, text, common):
    original = protobuf.parse(text, refs(common))
    b64 = as_base64(text, refs(common))
    registered = protobuf.parse(b64, refs(common))
    printed = registered.text()
    assert printed != b64 and printed.startswith("syntax = ")
    assert protobuf_files.decoded(printed, "x") is None  # (.proto text, not base64)
    again = protobuf.parse(printed, refs(common))
    assert again.canonical() == original.canonical() == registered.canonical()
    assert again.messages() == original.messages()
    for m in original.messages():  # (message indexes count map entries: they kept their places)
        assert again.message(m).indexes == original.message(m).indexes
    # the printer itself (not only the check behind text()) gives that text
    assert protobuf_text.to_text(registered.files.main, registered.files.pool) == printed
    # serialized stays the base64; a schema registered as text keeps its own text
    assert registered.text("serialized") == b64
    assert original.text() == text


def test_the_layout_follows_confluents_printer():
    text = FILES[4][1]
    printed = protobuf_text.to_text(protobuf.parse(as_base64(text, [])).files.main)
    assert printed.startswith('syntax = "proto3";\npackage shop;\n\nmessage Order {\n')
    assert "  map<string, int32> counts = 1;\n" in printed
    assert "  repeated .shop.Order.Line lines = 2;\n" in printed
    assert "  map<int64, .shop.Order.Line> by_id = 3;\n" in printed
    assert "Entry" not in printed  # (map entries are map<K, V> fields)
    opts = protobuf_text.to_text(protobuf.parse(as_base64(FILES[7][1], [])).files.main)
    assert '\noption java_package = "com.acme.opts";\n' in opts
    assert "option optimize_for = SPEED;\n" in opts
    assert 'string custom_json = 2 [json_name = "cj"];' in opts
    assert "weird_name_x = 4;\n" in opts  # (protoc's own json_name is not printed)
    two = protobuf_text.to_text(protobuf.parse(as_base64(FILES[2][1], [])).files.main)
    assert 'syntax = "proto2";\npackage two;\n' in two
    assert "  required int32 a = 1;\n" in two and "  optional .two.Color color = 4 [default = GREEN];" in two
    assert "extensions 1000 to max;" in two
    enums = protobuf_text.to_text(protobuf.parse(as_base64(FILES[6][1], [])).files.main)
    assert 'reserved 20 to max;\n' in enums and 'reserved "OLD", "GONE";\n' in enums


def test_generated_code_descriptor_prints(tmp_path):
    """What confluent-kafka's ProtobufSerializer registers: the generated module's descriptor
    (its own file name, no json_name)."""
    text = FILES[8][1]
    proto = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(as_base64(text, [COMMON_REF])))
    proto.name = "crm/customer.proto"
    for f in proto.message_type[0].field:
        f.ClearField("json_name")
    b64 = base64.b64encode(proto.SerializeToString()).decode()
    printed = protobuf.parse(b64, [COMMON_REF]).text()
    assert printed.startswith('syntax = "proto3";\npackage crm;\n\nimport "common/address.proto";\n')
    assert (protobuf.parse(printed, [COMMON_REF]).canonical()
            == protobuf.parse(text, [COMMON_REF]).canonical())


UNSUPPORTED = [
    ("group", """syntax = "proto2";
message G { optional group Inner = 1 { optional int32 x = 2; } }"""),
    ("editions", """edition = "2023";
message Ed { int32 x = 1; }"""),
]


@pytest.mark.parametrize("name,text", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_what_is_not_printed_keeps_the_base64(name, text):
    b64 = as_base64(text, [])
    registered = protobuf.parse(b64)
    with pytest.raises(protobuf_text.Unsupported):
        protobuf_text.to_text(registered.files.main)
    assert registered.text() == b64


def test_a_print_that_would_not_compile_back_keeps_the_base64(monkeypatch):
    b64 = as_base64(FILES[0][1], [])
    files = protobuf.parse(b64).files
    # compiles, but to another schema (a field lost)
    monkeypatch.setattr(protobuf_text, "to_text", lambda proto, pool=None: 'syntax = "proto3"; message A {}')
    assert protobuf.ProtobufSchema(files, None).text() == b64
    # does not compile
    monkeypatch.setattr(protobuf_text, "to_text", lambda proto, pool=None: "not proto at all")
    assert protobuf.ProtobufSchema(files, None).text() == b64
    monkeypatch.undo()
    assert protobuf.ProtobufSchema(files, None).text().startswith('syntax = "proto3";')


def test_the_registry_answers_printed_text_and_serialized_base64(tmp_path):
    with Engine(str(tmp_path / "d")) as eng:
        r = eng.schemas
        r.register("common", COMMON, "PROTOBUF")
        text = FILES[8][1]
        b64 = as_base64(text, [COMMON_REF])
        sid = r.register("crm-value", b64, "PROTOBUF",
                         [{"name": "common/address.proto", "subject": "common", "version": 1}])["id"]
        got = r.schema_by_id(sid)["schema"]
        assert got.startswith('syntax = "proto3";\npackage crm;\n') and "message Customer {" in got
        assert r.schema_by_id(sid, fmt="serialized")["schema"] == b64
        # the printed text is the same schema: registering it finds the same id
        assert r.register("crm-value", got, "PROTOBUF",
                          [{"name": "common/address.proto", "subject": "common", "version": 1}])["id"] == sid
        # a schema registered as text answers its own text
        cid = r.register("plain", FILES[0][1], "PROTOBUF")["id"]
        assert r.schema_by_id(cid)["schema"] == FILES[0][1]
        # not covered by the printer: the base64 as registered
        ext = as_base64(UNSUPPORTED[0][1], [])  # (a group)
        eid = r.register("ext", ext, "PROTOBUF")["id"]
        assert r.schema_by_id(eid)["schema"] == ext


def test_options_no_file_defines_keep_the_base64():
    """A descriptor whose options hold a field nothing in the schema defines (a custom option
    of a file that was not registered with it) is not printed."""
    proto = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(as_base64(FILES[0][1], [])))
    opts = proto.message_type[0].field[0].options
    opts.MergeFromString(b"\x80\xb5\x18\x05")  # (field 50000, varint 5: unknown here)
    b64 = base64.b64encode(proto.SerializeToString()).decode()
    registered = protobuf.parse(b64)
    with pytest.raises(protobuf_text.Unsupported, match="options the schema's files do not define"):
        protobuf_text.to_text(registered.files.main, registered.files.pool)
    assert registered.text() == b64
