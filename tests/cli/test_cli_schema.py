"""``rivven schema register|list|get|check|delete|config|serve``, ``rivven produce
--value-schema/--key-schema`` and ``rivven consume --decode/--decode-keys`` as real processes:
each command's happy path for AVRO, PROTOBUF (a .proto file) and JSON, references, the
``--json`` outputs, and bad input for every command: one line on stderr, exit 1 (2 for a usage
error), no traceback, nothing changed."""

import base64
import http.client
import json
import os
import time

import pytest
from helpers import run_rivven
from helpers.registry_proc import request, start_registry
from helpers.terminal import on_a_terminal

from engine import Engine

ORDER = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "int"}, {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
# a field without a default: BACKWARD refuses it (a reader field missing from the writer)
ORDER_QTY = {**ORDER, "fields": [*ORDER["fields"], {"name": "qty", "type": "int"}]}
ORDER_QTY_DEFAULT = {**ORDER, "fields": [*ORDER["fields"],
                                         {"name": "qty", "type": "int", "default": 1}]}
ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
    {"name": "street", "type": "string"}, {"name": "zip", "type": "int"}]}
PERSON = {"type": "record", "name": "Person", "namespace": "com.acme", "fields": [
    {"name": "name", "type": "string"}, {"name": "address", "type": "com.acme.Address"}]}
KEY = {"type": "record", "name": "Key", "fields": [{"name": "k", "type": "string"}]}
ADDRESS_PROTO = """syntax = "proto3";
package acme;
message Address {
  string street = 1;
  int32 zip = 2;
}
"""
PERSON_PROTO = """syntax = "proto3";
package acme;
import "address.proto";
message Person {
  string name = 1;
  acme.Address address = 2;
  repeated string tags = 3;
}
"""
ADDR_JSON = {"$id": "addr.json", "type": "object",
             "properties": {"zip": {"type": "integer"}}, "required": ["zip"]}
CUSTOMER_JSON = {"type": "object", "properties": {"name": {"type": "string"},
                                                  "address": {"$ref": "addr.json"}},
                 "required": ["name"]}


@pytest.fixture
def files(tmp_path):
    """The schemas above as files (their names: a .proto is PROTOBUF by its extension)."""
    out = {}
    for name, doc in (("order.avsc", ORDER), ("order-qty.avsc", ORDER_QTY),
                      ("order-qty-default.avsc", ORDER_QTY_DEFAULT),
                      ("address.avsc", ADDRESS), ("person.avsc", PERSON), ("key.avsc", KEY),
                      ("addr.json", ADDR_JSON), ("customer.json", CUSTOMER_JSON),
                      ("address.proto", ADDRESS_PROTO), ("person.proto", PERSON_PROTO),
                      ("bad.avsc", '{"type": "record", "name": "Bad", "fields": [{"name": '),
                      ("bad.proto", 'syntax = "proto3";\nmessage Bad { string a = ; }\n')):
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        out[name] = str(path)
    return out


def ok(data_dir, *args, input=b""):
    r = run_rivven(data_dir, *args, input=input)
    assert r.returncode == 0, (args, r.stderr.decode())
    return r


def ok_json(data_dir, *args, input=b""):
    return json.loads(ok(data_dir, *args, "--json", input=input).stdout)


def fails(data_dir, *args, input=b"", code=1):
    """The one line of stderr of a command that must fail with ``code``."""
    r = run_rivven(data_dir, *args, input=input)
    err = r.stderr.decode()
    assert r.returncode == code, (args, r.returncode, err)
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return err


def subjects(data_dir, *flags):
    return [row["subject"] for row in ok_json(data_dir, "schema", "list", *flags)]


def values(data_dir, topic, *flags):
    """The records of ``topic`` as ``consume --json`` prints them (parsed)."""
    out = ok(data_dir, "consume", topic, "--json", *flags).stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def lines(*docs):
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


# ---------------------------------------------------------------------------- register, get
def test_avro_register_list_get_with_a_reference(data_dir, files):
    r = ok(data_dir, "schema", "register", "address-value", "--file", files["address.avsc"])
    assert r.stdout == b"address-value version 1: schema id 1 (AVRO)\n"
    # Person names com.acme.Address, registered in another subject
    assert ok_json(data_dir, "schema", "register", "person-value", "-f", files["person.avsc"],
                   "--reference", "com.acme.Address=address-value:1") == {
        "subject": "person-value", "version": 1, "id": 2, "schemaType": "AVRO"}
    # again: the same version and id; the same schema in another subject: the same id
    assert ok_json(data_dir, "schema", "register", "person-value", "-f", files["person.avsc"],
                   "-r", "com.acme.Address=address-value:1")["version"] == 1
    assert ok_json(data_dir, "schema", "register", "home-value", "-f",
                   files["address.avsc"]) == {"subject": "home-value", "version": 1, "id": 1,
                                              "schemaType": "AVRO"}
    assert ok_json(data_dir, "schema", "list") == [
        {"subject": s, "versions": [1], "latest": 1, "id": i, "schemaType": "AVRO"}
        for s, i in (("address-value", 1), ("home-value", 1), ("person-value", 2))]
    table = ok(data_dir, "schema", "list").stdout.decode().splitlines()
    assert table[0].split() == ["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"]
    assert table[3].split() == ["person-value", "1", "1", "2", "AVRO"]

    ref = [{"name": "com.acme.Address", "subject": "address-value", "version": 1}]
    got = ok_json(data_dir, "schema", "get", "person-value")
    assert got == {"subject": "person-value", "version": 1, "id": 2, "schemaType": "AVRO",
                   "references": ref, "schema": json.dumps(PERSON)}
    assert ok(data_dir, "schema", "get", "person-value", "--version", "1").stdout.decode() == (
        "person-value version 1: id 2 (AVRO)\n"
        "reference com.acme.Address = address-value:1\n" + json.dumps(PERSON) + "\n")
    by_id = ok_json(data_dir, "schema", "get", "--id", "1")
    assert by_id == {"schemaType": "AVRO", "schema": json.dumps(ADDRESS), "id": 1,
                     "subjects": [{"subject": "address-value", "version": 1, "deleted": False},
                                  {"subject": "home-value", "version": 1, "deleted": False}]}
    assert ok(data_dir, "schema", "get", "--id", "2").stdout.decode().startswith(
        "id 2 (AVRO): person-value v1\nreference com.acme.Address = address-value:1\n")

    # a reference that does not resolve, or none for a type the schema names: 42201's
    # message, exit 1, nothing registered
    err = fails(data_dir, "schema", "register", "p2-value", "-f", files["person.avsc"],
                "-r", "com.acme.Address=nosuch-value:1")
    assert "the reference 'com.acme.Address' names subject 'nosuch-value' version 1, " \
           "which does not exist" in err
    err = fails(data_dir, "schema", "register", "p2-value", "-f", files["person.avsc"])
    assert err.startswith("error: Invalid schema: unknown type 'com.acme.Address'"), err
    assert subjects(data_dir) == ["address-value", "home-value", "person-value"]


def test_protobuf_from_a_proto_file_with_an_import(data_dir, files):
    # the type from the extension; the import resolves to the subject named by --reference
    assert ok_json(data_dir, "schema", "register", "address.proto", "-f",
                   files["address.proto"]) == {"subject": "address.proto", "version": 1,
                                               "id": 1, "schemaType": "PROTOBUF"}
    assert ok(data_dir, "schema", "register", "people-value", "-f", files["person.proto"],
              "-r", "address.proto=address.proto:1").stdout == \
        b"people-value version 1: schema id 2 (PROTOBUF)\n"
    got = ok_json(data_dir, "schema", "get", "people-value")
    assert got["schemaType"] == "PROTOBUF" and got["schema"] == PERSON_PROTO
    assert got["references"] == [{"name": "address.proto", "subject": "address.proto",
                                  "version": 1}]
    assert ok_json(data_dir, "schema", "get", "--id", "2")["subjects"] == [
        {"subject": "people-value", "version": 1, "deleted": False}]
    # an import not given: protoc's report, one line (not its absl warnings), nothing kept
    err = fails(data_dir, "schema", "register", "p2-value", "-f", files["person.proto"])
    assert err.startswith("error: Invalid schema of type PROTOBUF, details: ") and \
        'Import "address.proto" was not found' in err
    # --type wins over the extension
    err = fails(data_dir, "schema", "register", "p2-value", "-f", files["address.proto"],
                "--type", "avro")
    assert err.startswith("error: Invalid schema: not JSON"), err
    # a .proto without syntax: protoc logs a warning through absl on fd 2: not on our stderr
    no_syntax = files["address.proto"] + ".txt"
    with open(no_syntax, "w") as f:
        f.write('{"type": "string"}')
    err = fails(data_dir, "schema", "register", "p2-value", "-f", no_syntax, "-t", "protobuf")
    assert "Expected top-level statement" in err
    assert subjects(data_dir) == ["address.proto", "people-value"]

    ok(data_dir, "topic", "create", "people")
    err = fails(data_dir, "produce", "people", "--value-schema", "people-value", input=lines(
        {"name": "ann", "address": {"street": "Main", "zip": 1}, "tags": ["a"]},
        {"name": "bob", "adress": {"street": "Main", "zip": 2}}))
    assert err.startswith("error: line 2: value: field adress: no such field in acme.Person "
                          "(its fields: name, address, tags)"), err
    err = fails(data_dir, "produce", "people", "--value-schema", "id:2",
                input=lines({"name": "cy", "address": {"street": "S", "zip": "x"}}))
    assert err.startswith("error: line 1: value: field address.zip: "), err
    assert [r["value"] for r in values(data_dir, "people", "--decode")] == [
        {"name": "ann", "address": {"street": "Main", "zip": 1}, "tags": ["a"]}]


def test_json_schema_with_a_ref(data_dir, files):
    assert ok_json(data_dir, "schema", "register", "addr-json", "-f", files["addr.json"],
                   "--type", "json")["schemaType"] == "JSON"
    assert ok_json(data_dir, "schema", "register", "customers-value", "-f",
                   files["customer.json"], "-t", "JSON", "-r", "addr.json=addr-json:1") == {
        "subject": "customers-value", "version": 1, "id": 2, "schemaType": "JSON"}
    got = ok_json(data_dir, "schema", "get", "customers-value", "-v", "latest")
    assert got["schemaType"] == "JSON" and json.loads(got["schema"]) == CUSTOMER_JSON
    assert got["references"] == [{"name": "addr.json", "subject": "addr-json", "version": 1}]
    # a JSON Schema is AVRO without --type (only .proto infers a type): Avro's refusal
    assert "Invalid schema: unknown type" in fails(data_dir, "schema", "register", "x-value",
                                                   "-f", files["addr.json"])
    bad = files["addr.json"] + ".bad"
    with open(bad, "w") as f:
        f.write('{"type": 5}')
    assert fails(data_dir, "schema", "register", "x-value", "-f", bad, "-t", "json").startswith(
        "error: Invalid schema: 5 is not valid under any of the given schemas")
    assert subjects(data_dir) == ["addr-json", "customers-value"]

    ok(data_dir, "topic", "create", "customers")
    err = fails(data_dir, "produce", "customers", "--value-schema", "customers-value",
                input=lines({"name": "a", "address": {"zip": 1}}, {"name": "b"},
                            {"name": "c", "address": {"zip": "x"}}, {"name": "d"}))
    assert err == ("error: line 3: value: field address.zip: expected integer, got 'x'; the 2 "
                   "records before it are stored, none after\n")
    assert [r["value"] for r in values(data_dir, "customers", "--decode")] == [
        {"name": "a", "address": {"zip": 1}}, {"name": "b"}]


# ---------------------------------------------------------------------------- check, config
def test_check_compatible_exit_0_incompatible_exit_1_with_the_reasons(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    r = ok(data_dir, "schema", "check", "orders-value", "-f", files["order-qty-default.avsc"])
    assert r.stdout == b"compatible with orders-value (BACKWARD)\n"
    assert ok_json(data_dir, "schema", "check", "orders-value", "-f",
                   files["order-qty-default.avsc"]) == {
        "is_compatible": True, "messages": [], "subject": "orders-value",
        "compatibility": "BACKWARD"}

    r = run_rivven(data_dir, "schema", "check", "orders-value", "-f", files["order-qty.avsc"])
    assert r.returncode == 1 and r.stderr == b""
    out = r.stdout.decode().splitlines()
    assert out[0] == "not compatible with orders-value (BACKWARD):"
    assert len(out) == 2 and "READER_FIELD_MISSING_DEFAULT_VALUE" in out[1] and \
        "'qty'" in out[1], out
    r = run_rivven(data_dir, "schema", "check", "orders-value", "-f", files["order-qty.avsc"],
                   "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["is_compatible"] is False
    assert set(doc) == {"is_compatible", "messages", "subject", "compatibility"}
    assert doc["messages"][-2:] == ["{oldSchemaVersion: 1}", "{compatibility: 'BACKWARD'}"]
    # against one version (--version), and under NONE
    assert run_rivven(data_dir, "schema", "check", "orders-value", "-f", files["order-qty.avsc"],
                      "--version", "1").returncode == 1
    ok(data_dir, "schema", "config", "orders-value", "--compatibility", "none")
    assert ok(data_dir, "schema", "check", "orders-value", "-f",
              files["order-qty.avsc"]).stdout == b"compatible with orders-value (NONE)\n"
    # a subject without versions: anything that parses is compatible, and it says why
    assert ok(data_dir, "schema", "check", "new-value", "-f", files["order-qty.avsc"]).stdout \
        == b"compatible with new-value (BACKWARD): it has no live version to compare with\n"
    # a schema that does not parse is never "compatible"
    assert "Invalid schema: not JSON" in fails(data_dir, "schema", "check", "orders-value",
                                               "-f", files["bad.avsc"])
    assert "Version 7 not found." in fails(data_dir, "schema", "check", "orders-value", "-f",
                                           files["order.avsc"], "--version", "7")


def test_check_without_a_data_dir_still_parses_and_creates_nothing(data_dir, files):
    assert ok(data_dir, "schema", "check", "x-value", "-f", files["order.avsc"]).stdout == \
        b"compatible with x-value (BACKWARD): it has no live version to compare with\n"
    assert "Invalid schema: not JSON" in fails(data_dir, "schema", "check", "x-value", "-f",
                                               files["bad.avsc"])
    assert "names subject 'address-value' version 1, which does not exist" in fails(
        data_dir, "schema", "check", "x-value", "-f", files["person.avsc"],
        "-r", "com.acme.Address=address-value:1")
    # the reading commands answer as an empty registry, and nothing is created
    assert "Subject 'x-value' not found." in fails(data_dir, "schema", "get", "x-value")
    assert "Schema 1 not found" in fails(data_dir, "schema", "get", "--id", "1")
    assert "Subject 'x-value' not found." in fails(data_dir, "schema", "delete", "x-value")
    assert "Subject 'x-value' not found." in fails(data_dir, "schema", "config", "x-value",
                                                   "--delete")
    assert ok_json(data_dir, "schema", "list") == []
    assert ok_json(data_dir, "schema", "config") == {
        "subject": None, "compatibilityLevel": "BACKWARD", "source": "global"}
    assert not os.path.exists(data_dir)


def test_config_global_a_subject_and_back_to_global(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "schema", "register", "other-value", "-f", files["key.avsc"])
    assert ok(data_dir, "schema", "config").stdout == b"global: compatibility is BACKWARD\n"
    assert ok_json(data_dir, "schema", "config", "orders-value") == {
        "subject": "orders-value", "compatibilityLevel": "BACKWARD", "source": "global"}
    assert ok_json(data_dir, "schema", "config", "orders-value", "-c", "full") == {
        "subject": "orders-value", "compatibilityLevel": "FULL", "source": "subject"}
    assert ok(data_dir, "schema", "config", "orders-value").stdout == \
        b"orders-value: compatibility is FULL\n"
    assert ok(data_dir, "schema", "config", "--compatibility", "FORWARD_TRANSITIVE").stdout == \
        b"global: compatibility set FORWARD_TRANSITIVE\n"
    assert ok(data_dir, "schema", "config", "other-value").stdout == \
        b"other-value: compatibility is FORWARD_TRANSITIVE (the global level)\n"
    # the level decides: FULL refuses a field without a default
    err = fails(data_dir, "schema", "register", "orders-value", "-f", files["order-qty.avsc"])
    assert err.startswith('error: Schema being registered is incompatible with an earlier '
                          'schema for subject "orders-value"') and "{compatibility: 'FULL'}" in err
    # --delete: the subject's own level gone, the global one applies
    assert ok_json(data_dir, "schema", "config", "orders-value", "--delete") == {
        "subject": "orders-value", "compatibilityLevel": "FORWARD_TRANSITIVE",
        "source": "global"}
    assert fails(data_dir, "schema", "config", "orders-value", "--delete") == (
        "error: Subject 'orders-value' does not have subject-level compatibility configured\n")
    # without a subject: the global level back to BACKWARD
    assert ok(data_dir, "schema", "config", "--delete").stdout == \
        b"global: compatibility now BACKWARD\n"
    assert ok_json(data_dir, "schema", "config")["compatibilityLevel"] == "BACKWARD"
    assert "'FULLY' is not one of 'none', 'backward'" in fails(
        data_dir, "schema", "config", "orders-value", "-c", "FULLY", code=2)
    assert "use either --delete or --compatibility" in fails(
        data_dir, "schema", "config", "orders-value", "-c", "FULL", "--delete", code=2)
    assert ok_json(data_dir, "schema", "config", "orders-value")["source"] == "global"


# ---------------------------------------------------------------------------- delete
def test_delete_soft_then_permanent(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order-qty-default.avsc"])
    ok(data_dir, "schema", "register", "keys-key", "-f", files["key.avsc"])
    assert ok(data_dir, "schema", "delete", "orders-value", "--version", "1").stdout == \
        b"orders-value: soft-deleted version 1\n"
    # soft: hidden, still there with --deleted, and its id keeps its schema
    assert ok_json(data_dir, "schema", "list", "--prefix", "orders")[0]["versions"] == [2]
    assert ok_json(data_dir, "schema", "list", "--deleted", "--prefix", "orders") == [
        {"subject": "orders-value", "versions": [1, 2], "latest": 2, "id": 2,
         "schemaType": "AVRO"}]
    assert "Version 1 not found." in fails(data_dir, "schema", "get", "orders-value",
                                           "--version", "1")
    assert ok_json(data_dir, "schema", "get", "orders-value", "--version", "1",
                   "--deleted")["id"] == 1
    assert ok(data_dir, "schema", "get", "--id", "1").stdout.startswith(
        b"id 1 (AVRO): orders-value v1 (soft-deleted)\n")
    # again: Confluent's message
    assert fails(data_dir, "schema", "delete", "orders-value", "--version", "1") == (
        "error: Subject 'orders-value' Version 1 was soft deleted.Set permanent=true to delete "
        "permanently\n")
    # permanent needs the soft delete first, and --yes off a terminal
    assert "was not deleted first before being permanently deleted" in fails(
        data_dir, "schema", "delete", "orders-value", "--version", "2", "--permanent", "--yes")
    err = fails(data_dir, "schema", "delete", "orders-value", "--version", "1", "--permanent")
    assert "needs confirmation: pass --yes when not at a terminal" in err
    assert ok_json(data_dir, "schema", "get", "--id", "1")["id"] == 1
    assert ok_json(data_dir, "schema", "delete", "orders-value", "--version", "1",
                   "--permanent", "--yes") == {"subject": "orders-value", "versions": [1],
                                               "permanent": True}
    assert "Schema 1 not found" in fails(data_dir, "schema", "get", "--id", "1")
    # a whole subject, soft then again
    assert ok_json(data_dir, "schema", "delete", "keys-key") == {
        "subject": "keys-key", "versions": [1], "permanent": False}
    assert subjects(data_dir) == ["orders-value"]
    assert subjects(data_dir, "--deleted") == ["keys-key", "orders-value"]
    assert fails(data_dir, "schema", "delete", "keys-key") == (
        "error: Subject 'keys-key' was soft deleted.Set permanent=true to delete permanently\n")
    ok(data_dir, "schema", "delete", "keys-key", "--permanent", "-y")
    assert subjects(data_dir, "--deleted") == ["orders-value"]
    # ids are never given again: the next new schema gets 4, not 1 or 3
    assert ok_json(data_dir, "schema", "register", "new-value", "-f",
                   files["order-qty.avsc"])["id"] == 4


def test_delete_refused_while_a_schema_refers_to_it(data_dir, files):
    ok(data_dir, "schema", "register", "address-value", "-f", files["address.avsc"])
    ok(data_dir, "schema", "register", "person-value", "-f", files["person.avsc"],
       "-r", "com.acme.Address=address-value:1")
    assert fails(data_dir, "schema", "delete", "address-value") == (
        "error: One or more references exist to the schema "
        "{subject=address-value,version=1}.\n")
    assert subjects(data_dir) == ["address-value", "person-value"]


def test_permanent_delete_asks_at_a_terminal(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "schema", "delete", "orders-value")
    code, out, err, _ = on_a_terminal(data_dir, "schema", "delete", "orders-value",
                                      "--permanent", answers=[b"n"])
    assert code == 1 and b"delete subject orders-value permanently? [y/N]" in err, err
    # (click's confirm reads the answer with input(" "): that space goes to stdout)
    assert b"error: aborted, nothing was changed" in err and out.strip() == b""
    assert subjects(data_dir, "--deleted") == ["orders-value"]
    code, out, err, _ = on_a_terminal(data_dir, "schema", "delete", "orders-value",
                                      "--permanent", answers=[b"y"])
    assert code == 0, err
    assert out.lstrip(b" ") == b"orders-value: permanently deleted version 1\n"
    assert subjects(data_dir, "--deleted") == []


# ---------------------------------------------------------------------------- produce, consume
def test_produce_with_schemas_and_consume_decoded(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "schema", "register", "orders-key", "-f", files["key.avsc"])
    ok(data_dir, "topic", "create", "orders")
    # lines: each line a value (a plain union value, or Avro's tagged form)
    ok(data_dir, "produce", "orders", "--value-schema", "orders-value", "-H", "src=cli",
       input=lines({"id": 1, "amount": 9.5}, {"id": 2, "amount": 3, "note": {"string": "hi"}}))
    # id:N, keys by -K with --key-schema, an empty value a tombstone with --tombstone-empty
    ok(data_dir, "produce", "orders", "--value-schema", "id:1", "--key-schema", "orders-key",
       "-K", "\t", "--tombstone-empty",
       input=b'{"k": "a"}\t{"id": 3, "amount": 1}\n{"k": "b"}\t\n')
    # --input json: the value (and key) fields are encoded, null stays a tombstone
    ok(data_dir, "produce", "orders", "--input", "json", "--value-schema", "orders-value",
       "--key-schema", "id:2", input=lines({"key": {"k": "c"}, "value": {"id": 4, "amount": 2}},
                                           {"key": {"k": "d"}, "value": None}))
    raw = values(data_dir, "orders", "--value-encoding", "base64")
    first = base64.b64decode(raw[0]["value"])
    assert first[:5] == b"\x00\x00\x00\x00\x01"  # Confluent's wire format, schema id 1
    assert raw[3]["value"] is None and raw[5]["value"] is None

    decoded = values(data_dir, "orders", "--decode", "--decode-keys")
    assert [(r["key"], r["value"]) for r in decoded] == [
        (None, {"id": 1, "amount": 9.5, "note": None}),
        (None, {"id": 2, "amount": 3.0, "note": "hi"}),
        ({"k": "a"}, {"id": 3, "amount": 1.0, "note": None}),
        ({"k": "b"}, None),
        ({"k": "c"}, {"id": 4, "amount": 2.0, "note": None}),
        ({"k": "d"}, None)]
    assert decoded[0]["headers"] == [["src", "cli"]]  # (header values are not decoded)
    assert ok(data_dir, "consume", "orders", "--decode", "-o", "0:2").stdout == (
        b'{"id":1,"amount":9.5,"note":null}\n{"id":2,"amount":3.0,"note":"hi"}\n')
    keys = ok(data_dir, "consume", "orders", "--decode-keys", "-f", "%k\n", "-o", "2:6").stdout
    assert keys == b'{"k":"a"}\n{"k":"b"}\n{"k":"c"}\n{"k":"d"}\n'

    # what consume --decode --json prints, produce --input json --value-schema reads back
    ok(data_dir, "topic", "create", "copy")
    dump = ok(data_dir, "consume", "orders", "--decode", "--decode-keys", "--json").stdout
    ok(data_dir, "produce", "copy", "--input", "json", "--value-schema", "orders-value",
       "--key-schema", "orders-key", input=dump)
    assert [(r["key"], r["value"], r["headers"]) for r in values(
        data_dir, "copy", "--decode", "--decode-keys")] == \
        [(r["key"], r["value"], r["headers"]) for r in decoded]


def test_produce_stops_at_a_line_that_does_not_fit(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "topic", "create", "orders")
    err = fails(data_dir, "produce", "orders", "--value-schema", "orders-value", input=lines(
        {"id": 1, "amount": 1}, {"id": 2, "amount": 2}, {"id": "x", "amount": 3},
        {"id": 4, "amount": 4}))
    assert err == ("error: line 3: value: field id: expected int, got 'x'; the 2 records "
                   "before it are stored, none after\n")
    err = fails(data_dir, "produce", "orders", "--value-schema", "orders-value",
                input=b'{"id": 5, "amount": 5}\n{"id": 6,\n')
    assert err.startswith("error: line 2: malformed JSON (Expecting property name enclosed in "
                          "double quotes at column 10); the 1 record before it is stored"), err
    # without --tombstone-empty an empty line is not JSON
    assert "line 1: malformed JSON" in fails(data_dir, "produce", "orders", "--value-schema",
                                             "orders-value", input=b"\n")
    err = fails(data_dir, "produce", "orders", "--input", "json", "--value-schema",
                "orders-value", input=lines({"value": {"id": 7, "amount": "x"}}))
    assert err.startswith("error: line 1: value: field amount: "), err
    assert [r["value"]["id"] for r in values(data_dir, "orders", "--decode")] == [1, 2, 5]


def test_produce_refuses_unknown_or_unusable_schemas_and_stores_nothing(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "topic", "create", "orders")
    one = lines({"id": 1, "amount": 1})
    assert fails(data_dir, "produce", "orders", "--value-schema", "nope-value", input=one) == (
        "error: --value-schema nope-value: Subject 'nope-value' not found; 'rivven schema "
        "list' lists the subjects and their ids\n")
    assert "--key-schema id:99: Schema 99 not found;" in fails(
        data_dir, "produce", "orders", "--key-schema", "id:99", "-K", ",",
        input=b'{"k": 1},{"id": 1, "amount": 1}\n')
    # usage errors (exit 2), before anything is read
    for args, said in (
            (("--value-schema", "id:x"), "'id:x': use id:N with N a schema id"),
            (("--value-schema", ""), "an empty schema name: use SUBJECT or id:N"),
            (("--value-schema", "orders-value", "--value-encoding", "base64"),
             "Invalid value for --value-encoding: with --value-schema/--key-schema the input "
             "is JSON text"),
            (("--key-schema", "orders-value", "-K", ",", "--key-encoding", "hex"),
             "Invalid value for --key-encoding"),
            (("--value-schema", "orders-value", "--input", "parquet"),
             "--input parquet takes its records from the file's columns; schemas apply to "
             "JSON lines"),
            (("--key-schema", "orders-value"), "the input has no keys to encode")):
        assert said in fails(data_dir, "produce", "orders", *args, input=one, code=2), args
    assert values(data_dir, "orders") == []


def test_decode_names_a_record_not_in_the_wire_format(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    ok(data_dir, "topic", "create", "mixed")
    # one produce call, one batch: a record, "hello" (not the wire format), a record
    wire = "0000000001" + "02" + "0000000000000040" + "00"  # {"id": 1, "amount": 2.0}
    ok(data_dir, "produce", "mixed", "--value-encoding", "hex", "-H", "h=1",
       input=f"{wire}\n68656c6c6f\n{wire}\n".encode())
    want = ("error: --decode: the value of mixed partition 0 offset 1: not in Confluent's wire "
            "format (magic byte 104, not 0): was it written with a schema?\n")
    for flags in ((), ("--json",)):
        r = run_rivven(data_dir, "consume", "mixed", "--decode", *flags)
        assert r.returncode == 1 and r.stderr.decode() == want, r.stderr
        printed = r.stdout.decode().splitlines()
        assert len(printed) == 1  # the record ahead of it, then the error
        assert (json.loads(printed[0])["value"] if flags else json.loads(printed[0])) == \
            {"id": 1, "amount": 2.0, "note": None}
    # a group commits what it printed: a rerun stops at the same record at once
    r = run_rivven(data_dir, "consume", "mixed", "--decode", "-g", "g1")
    assert r.returncode == 1 and r.stderr.decode() == want and len(r.stdout.splitlines()) == 1
    r = run_rivven(data_dir, "consume", "mixed", "--decode", "-g", "g1")
    assert r.returncode == 1 and r.stderr.decode() == want and r.stdout == b""
    # an id the registry does not have; a payload cut short
    ok(data_dir, "topic", "create", "other")
    ok(data_dir, "produce", "other", "--value-encoding", "hex",
       input=b"0000000063abcd\n00000000010200\n")
    assert fails(data_dir, "consume", "other", "--decode") == (
        "error: --decode: the value of other partition 0 offset 0: schema id 99: Schema 99 "
        "not found\n")
    assert fails(data_dir, "consume", "other", "--decode", "-o", "1") == (
        "error: --decode: the value of other partition 0 offset 1: payload does not decode as "
        "com.acme.Order: truncated (cannot read double)\n")
    # keys: the same, naming the key (a null key stays null)
    ok(data_dir, "produce", "other", "-k", "plain", "--value-encoding", "hex",
       input=f"{wire}\n".encode())
    assert fails(data_dir, "consume", "other", "--decode-keys", "-f", "%k\n") == (
        "error: --decode: the key of other partition 0 offset 2: not in Confluent's wire format "
        "(magic byte 112, not 0): was it written with a schema?\n")


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("args,code,said", [
    (("register", "x-value", "-f", "/nonexistent/o.avsc"), 1,
     "cannot read --file /nonexistent/o.avsc: No such file or directory"),
    (("register", "x-value", "-f", "{dir}"), 1, "Is a directory"),
    (("register", "x-value", "-f", "{binary}"), 1,
     "is not UTF-8 text: give the schema's text"),
    (("register", "x-value"), 2, "Missing option '--file'"),
    (("register", "x-value", "-f", "{bad.avsc}"), 1, "Invalid schema: not JSON"),
    (("register", "x-value", "-f", "{bad.proto}"), 1,
     "Invalid schema of type PROTOBUF, details: schema.proto:2:26: Expected field number."),
    (("register", "", "-f", "{order.avsc}"), 1, "The specified subject '' is not a valid."),
    (("register", "x-value", "-f", "{order.avsc}", "-t", "xml"), 2,
     "'xml' is not one of 'avro', 'protobuf', 'json'"),
    (("register", "x-value", "-f", "{person.avsc}", "-r", "com.acme.Address"), 2,
     "Invalid value for --reference: 'com.acme.Address': use NAME=SUBJECT:VERSION"),
    (("register", "x-value", "-f", "{person.avsc}", "-r", "A=address-value:latest"), 2,
     "use NAME=SUBJECT:VERSION"),
    (("check", "orders-value", "-f", "/nonexistent/o.avsc"), 1, "cannot read --file"),
    (("check", "orders-value", "-f", "{order.avsc}", "-r", "a=b"), 2,
     "Invalid value for --reference"),
    (("check", "orders-value", "-f", "{order.avsc}", "--version", "0"), 2,
     "Invalid value for --version: '0': a version number from 1, or latest"),
    (("check", "nope-value", "-f", "{order.avsc}", "--version", "1"), 1,
     "Subject 'nope-value' not found."),
    (("get", "nope-value"), 1, "Subject 'nope-value' not found."),
    (("get", "orders-value", "--version", "9"), 1, "Version 9 not found."),
    (("get", "orders-value", "--version", "abc"), 2,
     "Invalid value for --version: 'abc': a version number from 1, or latest"),
    (("get", "orders-value", "--id", "1", "--version", "1"), 2,
     "Invalid value for --id: use either --version or --id"),
    (("get",), 2, "give a SUBJECT, or --id ID"),
    (("get", "--id", "7"), 1, "Schema 7 not found"),
    (("get", "other-value", "--id", "1"), 1,
     "schema id 1 is not a version of subject 'other-value'; drop SUBJECT or see 'rivven "
     "schema get --id 1'"),
    (("delete", "nope-value"), 1, "Subject 'nope-value' not found."),
    (("delete", "orders-value", "--version", "9"), 1, "Version 9 not found."),
    (("delete", "orders-value", "--version", "x"), 2, "Invalid value for --version"),
    (("config", "orders-value", "--compatibility", "SIDEWAYS"), 2,
     "Invalid value for '--compatibility' / '-c': 'SIDEWAYS' is not one of"),
    (("config", "nope-value", "--delete"), 1, "Subject 'nope-value' not found."),
    (("list", "--prefix"), 2, "Option '--prefix' requires an argument"),
    (("serve", "--listen", "0.0.0.0:0"), 2,
     "--listen 0.0.0.0:0 is not a loopback address: plain HTTP has no encryption; add --tls"),
    (("serve", "--listen", "nowhere"), 2, "--listen"),
])
def test_bad_input_is_one_line_and_changes_nothing(data_dir, files, tmp_path, args, code, said):
    with Engine.open(data_dir) as eng:  # (set up and looked at in this process: faster)
        eng.schemas.register("orders-value", json.dumps(ORDER))
    binary = tmp_path / "binary.avsc"
    binary.write_bytes(b"\xff\xfe{}")
    paths = {**files, "dir": str(tmp_path), "binary": str(binary)}
    args = [paths[a[1:-1]] if a.startswith("{") and a.endswith("}") else a for a in args]
    err = fails(data_dir, "schema", *args, code=code)
    assert said in err, err
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.schemas.subjects(deleted=True) == ["orders-value"]
        assert eng.schemas.versions("orders-value") == [1]
        assert eng.schemas.config() == {"compatibilityLevel": "BACKWARD"}


# ---------------------------------------------------------------------------- serve
def test_serve_answers_what_the_cli_registered_and_follows_other_processes(data_dir, files):
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    reg = start_registry(data_dir)
    try:
        assert request(reg.port, "GET", "/subjects") == (200, ["orders-value"])
        assert request(reg.port, "GET", "/schemas/ids/1")[1]["schema"] == json.dumps(ORDER)
        # a registration by another process, seen within a second of its end
        ok(data_dir, "schema", "register", "keys-key", "-f", files["key.avsc"])
        registered = time.monotonic()
        while request(reg.port, "GET", "/subjects")[1] != ["keys-key", "orders-value"]:
            assert time.monotonic() - registered < 1.0, "not seen within a second"
            time.sleep(0.02)
        # and what it registers, the CLI reads
        assert request(reg.port, "POST", "/subjects/addr-value/versions",
                       {"schema": json.dumps(ADDRESS)}) == (200, {"id": 3})
        assert ok_json(data_dir, "schema", "get", "addr-value")["id"] == 3
    finally:
        code = reg.stop()
    assert code == 0, reg.log()
    assert reg.log().rstrip().endswith("stopped")


def test_serve_authenticate_needs_a_user(data_dir, files):
    ok(data_dir, "user", "add", "alice", "--password-stdin", input=b"pencil\n")
    ok(data_dir, "schema", "register", "orders-value", "-f", files["order.avsc"])
    reg = start_registry(data_dir, 0, "--authenticate")
    try:
        def get(auth=None):
            conn = http.client.HTTPConnection("127.0.0.1", reg.port, timeout=30)
            try:
                headers = {} if auth is None else {
                    "Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}
                conn.request("GET", "/subjects", headers=headers)
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read())
            finally:
                conn.close()

        status, body = get()
        assert status == 401 and body["error_code"] == 40101
        assert get("alice:wrong")[0] == 401
        assert get("alice:pencil") == (200, ["orders-value"])
    finally:
        assert reg.stop() == 0, reg.log()
