"""Confluent's Protobuf compatibility rules (engine/schemas/protobuf_compat.py): a table of
schema changes, each checked for BACKWARD (``new.problems_reading(old)``: Confluent's
``new.isBackwardCompatible(old)`` = ``SchemaDiff.compare(old, new)``) and FORWARD
(``old.problems_reading(new)`` = ``SchemaDiff.compare(new, old)``), with the Difference type
Confluent reports and whether its ``SchemaDiff.COMPATIBLE_CHANGES`` holds it. Then Confluent's
own test corpus when its source is at hand."""

import json
import subprocess
from pathlib import Path

import pytest

from engine.schemas import protobuf, protobuf_compat
from engine.schemas.kinds import Reference

P3 = 'syntax = "proto3";\npackage shop;\n'
P2 = 'syntax = "proto2";\npackage shop;\n'
BASE = P3 + "message Order { int64 id = 1; string name = 2; }\n"

# (change, old, new, BACKWARD ok, FORWARD ok, the Difference Confluent gives for the change
# (old -> new), where it lives in Confluent's rules)
TABLE = [
    ("add a field", BASE, P3 + "message Order { int64 id = 1; string name = 2; int32 qty = 3; }",
     True, True, "FIELD_ADDED", "MessageSchemaDiff: a new number; FIELD_ADDED/REMOVED compatible"),
    ("remove a field", BASE, P3 + "message Order { int64 id = 1; }",
     True, True, "FIELD_REMOVED", "MessageSchemaDiff: FIELD_REMOVED is in COMPATIBLE_CHANGES"),
    ("rename a field (same number)", BASE, P3 + "message Order { int64 id = 1; string title = 2; }",
     True, True, "FIELD_NAME_CHANGED", "FieldSchemaDiff: fields match by number; a name is free"),
    ("move a field to another number", BASE, P3 + "message Order { int64 id = 1; string name = 3; }",
     True, True, "FIELD_ADDED", "by number: number 2 removed, number 3 added"),
    ("int64 -> int32 (same group)", BASE, P3 + "message Order { int32 id = 1; string name = 2; }",
     True, True, None, "scalarKind: int32/int64/uint32/uint64/bool are GENERAL_NUMBER"),
    ("int64 -> bool (same group)", BASE, P3 + "message Order { bool id = 1; string name = 2; }",
     True, True, None, "scalarKind: bool is GENERAL_NUMBER"),
    ("int64 -> an enum (same group)", BASE,
     P3 + "enum Id { ZERO = 0; } message Order { Id id = 1; string name = 2; }",
     True, True, "ENUM_ADDED", "scalarKind: an enum is GENERAL_NUMBER"),
    ("string -> bytes (same group)", BASE, P3 + "message Order { int64 id = 1; bytes name = 2; }",
     True, True, None, "scalarKind: string/bytes are STRING_OR_BYTES"),
    ("fixed32 -> sfixed32 (same group)", P3 + "message Order { fixed32 n = 1; }",
     P3 + "message Order { sfixed32 n = 1; }", True, True, None, "scalarKind: FIXED32"),
    ("int64 -> sint64 (across groups)", BASE, P3 + "message Order { sint64 id = 1; string name = 2; }",
     False, False, "FIELD_SCALAR_KIND_CHANGED", "scalarKind: sint32/sint64 are SIGNED_NUMBER"),
    ("int64 -> string (across groups)", BASE, P3 + "message Order { string id = 1; string name = 2; }",
     False, False, "FIELD_SCALAR_KIND_CHANGED", "GENERAL_NUMBER vs STRING_OR_BYTES"),
    ("float -> double (across groups)", P3 + "message Order { float n = 1; }",
     P3 + "message Order { double n = 1; }", False, False, "FIELD_SCALAR_KIND_CHANGED",
     "scalarKind: FLOAT and DOUBLE are groups of their own"),
    ("fixed32 -> int32 (across groups)", P3 + "message Order { fixed32 n = 1; }",
     P3 + "message Order { int32 n = 1; }", False, False, "FIELD_SCALAR_KIND_CHANGED", "FIXED32"),
    ("scalar -> message", BASE,
     P3 + "message Name { string v = 1; } message Order { int64 id = 1; Name name = 2; }",
     False, False, "FIELD_KIND_CHANGED", "FieldSchemaDiff.kind: SCALAR vs MESSAGE"),
    ("scalar -> map", BASE, P3 + "message Order { int64 id = 1; map<string, string> name = 2; }",
     False, False, "FIELD_KIND_CHANGED", "FieldSchemaDiff.kind: SCALAR vs MAP"),
    ("map value int32 -> int64", P3 + "message Order { map<string, int32> m = 1; }",
     P3 + "message Order { map<string, int64> m = 1; }", True, True, None,
     "compareMapTypes: key and value as scalars"),
    ("map value int32 -> string", P3 + "message Order { map<string, int32> m = 1; }",
     P3 + "message Order { map<string, string> m = 1; }", False, False,
     "FIELD_SCALAR_KIND_CHANGED", "compareMapTypes: the value's group changed"),
    ("optional int32 -> repeated int32", P3 + "message Order { optional int32 n = 1; }",
     P3 + "message Order { repeated int32 n = 1; }", False, False, "FIELD_NUMERIC_LABEL_CHANGED",
     "compareScalarTypes: a numeric field's label"),
    ("optional string -> repeated string", P3 + "message Order { optional string s = 1; }",
     P3 + "message Order { repeated string s = 1; }", True, True,
     "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "compareScalarTypes: string/bytes labels are free"),
    ("int32 (no label, proto3) -> repeated int32", P3 + "message Order { int32 n = 1; }",
     P3 + "message Order { repeated int32 n = 1; }", True, True, None,
     "compareScalarTypes compares labels only when both sides have one (Wire: none here)"),
    ("proto2 required int32 -> optional int32", P2 + "message Order { required int32 n = 1; }",
     P2 + "message Order { optional int32 n = 1; }", False, False, "FIELD_NUMERIC_LABEL_CHANGED",
     "compareScalarTypes: REQUIRED vs OPTIONAL on a number"),
    ("optional Line -> repeated Line",
     P3 + "message Line { string s = 1; } message Order { optional Line l = 1; }",
     P3 + "message Line { string s = 1; } message Order { repeated Line l = 1; }", True, True, None,
     "compareMessageTypes: a message field's label is not compared"),
    ("a field's message type changed",
     P3 + "message A { string s = 1; } message B { string s = 1; } message Order { A x = 1; }",
     P3 + "message A { string s = 1; } message B { string s = 1; } message Order { B x = 1; }",
     False, False, "FIELD_NAMED_TYPE_CHANGED", "compareMessageTypes: another name in the package"),
    ("add a message", BASE, BASE + "message Refund { int64 id = 1; }",
     True, False, "MESSAGE_ADDED", "MESSAGE_ADDED compatible; FORWARD sees it removed"),
    ("remove a message", BASE + "message Refund { int64 id = 1; }", BASE,
     False, True, "MESSAGE_REMOVED", "compareTypeElements: MESSAGE_REMOVED is not compatible"),
    ("reorder messages", BASE + "message Refund { int64 id = 1; }",
     P3 + "message Refund { int64 id = 1; }\nmessage Order { int64 id = 1; string name = 2; }",
     True, True, "MESSAGE_MOVED", "MESSAGE_MOVED: indexes are those of the writer's id"),
    ("package changed", BASE, BASE.replace("package shop;", "package store;"),
     False, False, "PACKAGE_CHANGED", "SchemaDiff.compare: PACKAGE_CHANGED"),
    ("add an enum and an enum constant", P3 + "enum S { A = 0; } message Order { S s = 1; }",
     P3 + "enum S { A = 0; B = 1; } enum T { X = 0; } message Order { S s = 1; }",
     True, True, "ENUM_CONST_ADDED", "EnumSchemaDiff: every enum change is compatible"),
    ("add a oneof with new fields", BASE,
     P3 + "message Order { int64 id = 1; string name = 2; oneof pay { string card = 3; "
     "string iban = 4; } }", True, True, "ONEOF_FIELD_ADDED",
     "ONEOF_ADDED, ONEOF_FIELD_ADDED; FORWARD: a whole oneof gone is a deletion"),
    ("move one field into a new oneof", BASE,
     P3 + "message Order { int64 id = 1; oneof n { string name = 2; } }", True, True,
     "ONEOF_ADDED", "one original group per oneof; FORWARD: ONEOF_FIELD_MOVED_TO_TOP_LEVEL"),
    ("move two fields into one oneof", BASE,
     P3 + "message Order { oneof x { int64 id = 1; string name = 2; } }", False, True,
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF", "two top-level fields made mutually exclusive"),
    ("move a field into an existing oneof",
     P3 + "message Order { int64 id = 1; oneof x { string name = 2; } }",
     P3 + "message Order { oneof x { int64 id = 1; string name = 2; } }", False, True,
     "FIELD_MOVED_TO_EXISTING_ONEOF", "a top-level field and a oneof's member made exclusive"),
    ("add a field to an existing oneof",
     P3 + "message Order { oneof x { string a = 1; } }",
     P3 + "message Order { oneof x { string a = 1; string b = 2; } }", True, False,
     "ONEOF_FIELD_ADDED", "ONEOF_FIELD_ADDED compatible; FORWARD: ONEOF_FIELD_REMOVED"),
    ("remove a field from a oneof",
     P3 + "message Order { oneof x { string a = 1; string b = 2; } }",
     P3 + "message Order { oneof x { string a = 1; } }", False, True,
     "ONEOF_FIELD_REMOVED", "a oneof member removed while the oneof stays"),
    ("move a oneof field to the top level",
     P3 + "message Order { oneof x { string a = 1; string b = 2; } }",
     P3 + "message Order { string b = 2; oneof x { string a = 1; } }", True, False,
     "ONEOF_FIELD_MOVED_TO_TOP_LEVEL", "compatible; FORWARD moves it into an existing oneof"),
    ("add a required field (proto2)", P2 + "message Order { optional int32 a = 1; }",
     P2 + "message Order { optional int32 a = 1; required int32 b = 2; }", False, False,
     "REQUIRED_FIELD_ADDED", "REQUIRED_FIELD_ADDED/REMOVED are not compatible"),
    ("remove a required field (proto2)",
     P2 + "message Order { optional int32 a = 1; required int32 b = 2; }",
     P2 + "message Order { optional int32 a = 1; }", False, False,
     "REQUIRED_FIELD_REMOVED", "REQUIRED_FIELD_ADDED/REMOVED are not compatible"),
    ("a nested message's field changed",
     P3 + "message Order { message Line { int32 q = 1; } Line l = 1; }",
     P3 + "message Order { message Line { string q = 1; } Line l = 1; }", False, False,
     "FIELD_SCALAR_KIND_CHANGED", "compareTypeElements walks nested types (#/Order/Line/1)"),
]


def check(old: str, new: str) -> tuple[list[str], list[str]]:
    o, n = protobuf.parse(old), protobuf.parse(new)
    return n.problems_reading(o), o.problems_reading(n)


@pytest.mark.parametrize("change,old,new,backward,forward,kind,rule", TABLE,
                         ids=[row[0] for row in TABLE])
def test_the_table_of_changes(change, old, new, backward, forward, kind, rule):
    back, fwd = check(old, new)
    assert (not back, not fwd) == (backward, forward), (rule, back, fwd)
    types = {d.type for d in protobuf_compat.differences(protobuf.parse(old).files,
                                                           protobuf.parse(new).files)}
    if kind is None:
        assert types == set(), rule
    else:
        # (the change's own Difference decides BACKWARD: compatible exactly when it passes)
        assert kind in types and (kind in protobuf_compat.COMPATIBLE) == backward, rule
    for problem in back + fwd:
        assert "\n" not in problem and problem.startswith('{errorType:"')


def test_full_is_both_and_none_is_free():
    """FULL (and the transitive modes, version by version) are the two directions together:
    an added message passes BACKWARD, not FULL."""
    back, fwd = check(BASE, BASE + "message Refund { int64 id = 1; }")
    assert back == [] and fwd != []


def test_a_problem_names_the_message_and_the_field():
    old = P3 + "message Order { int64 id = 1; string name = 2; }"
    new = P3 + "message Order { int64 id = 1; int32 name = 2; }"
    (line,) = protobuf.parse(new).problems_reading(protobuf.parse(old))
    assert line == ('{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR '
                    "field at path '#/Order/2' (field 'name') in the reader schema does not "
                    'match its kind in the writer schema"}')
    diff = protobuf_compat.Difference("MESSAGE_REMOVED", "#/Refund")
    assert diff.message("new", "old") == ('{errorType:"MESSAGE_REMOVED", description:"The new '
                                          "schema is missing a MESSAGE type at path '#/Refund' "
                                          'in the old schema"}')


def test_another_schema_type_is_incompatible():
    class Avro:
        schema_type = "AVRO"
    assert protobuf.parse(BASE).problems_reading(Avro()) == [
        "Incompatible because of different schema type"]


def ref(name: str, text: str, version: int = 1) -> Reference:
    return Reference(name, name.replace("/", "-"), version, "PROTOBUF", text)


def test_a_referenced_type_is_compared_by_its_contents_unless_the_same_version():
    main = P3 + 'import "addr.proto"; message Person { common.Address home = 1; }'
    v1 = 'syntax = "proto3"; package common; message Address { string city = 1; }'
    v2 = 'syntax = "proto3"; package common; message Address { int32 city = 1; }'
    old = protobuf.parse(main, [ref("addr.proto", v1, 1)])
    new = protobuf.parse(main, [ref("addr.proto", v2, 2)])
    problems = new.problems_reading(old)
    assert any("FIELD_SCALAR_KIND_CHANGED" in p and "#/Address/1" in p for p in problems)
    assert any("FIELD_NAMED_TYPE_CHANGED" in p and "#/Person/1" in p for p in problems)
    # the same subject and version on both sides: not compared again (Confluent trusts it)
    same = protobuf.parse(main, [ref("addr.proto", v2, 1)])
    assert same.problems_reading(old) == []
    # a compatible change of the referenced file (another version) passes
    v3 = 'syntax = "proto3"; package common; message Address { string city = 1; string zip = 2; }'
    assert protobuf.parse(main, [ref("addr.proto", v3, 3)]).problems_reading(old) == []


def test_a_recursive_type_is_compared_once():
    node = 'syntax = "proto3"; package t; message Node { Node next = 1; int32 v = 2; }'
    main = P3 + 'import "node.proto"; message Holder { t.Node n = 1; }'
    old = protobuf.parse(main, [ref("node.proto", node, 1)])
    new = protobuf.parse(main, [ref("node.proto", node.replace("int32 v", "string v"), 2)])
    assert any("#/Node/2" in p for p in new.problems_reading(old))


def test_text_and_base64_of_the_same_file_have_no_differences():
    old = protobuf.parse(BASE)
    assert protobuf_compat.differences(old.files, protobuf.parse(old.text("serialized")).files) == []


CORPUS = Path("/work/.mirror/confluentinc+schema-registry/repo")
CORPUS_FILE = "protobuf-provider/src/test/resources/diff-schema-examples.json"


def confluent_examples() -> list[dict]:
    """Confluent's own diff examples (its SchemaDiffTest's corpus), read from a mirror of its
    source when this machine has one."""
    if not CORPUS.exists():
        return []
    out = subprocess.run(["git", "-C", str(CORPUS), "show", f"HEAD:{CORPUS_FILE}"],
                         capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else []


def example_refs(x: dict, side: str) -> list[Reference]:
    deps = {d["name"]: d["dependency"] for d in x.get(f"{side}_dependencies", [])}
    return [Reference(r["name"], r["subject"], r["version"], "PROTOBUF", deps[r["name"]])
            for r in x.get(f"{side}_references", [])]


@pytest.mark.skipif(not confluent_examples(), reason="Confluent's source is not mirrored here")
def test_confluents_own_diff_examples():
    """Every example: the same differences (type and path) and the same verdict."""
    wrong = []
    for x in confluent_examples():
        o = protobuf.parse(x["original_schema"], example_refs(x, "original"))
        u = protobuf.parse(x["update_schema"], example_refs(x, "update"))
        diffs = protobuf_compat.differences(o.files, u.files)
        got = sorted({f"{d.type} {d.path}" for d in diffs})
        if got != sorted(set(x["changes"])) or all(d.compatible for d in diffs) != x["compatible"]:
            wrong.append(x["description"])
    assert len(confluent_examples()) >= 50 and wrong == []
