"""The JSON schema type (engine/schemas/json_schema.py): parsing (check_schema, references by
name, every $ref resolved), what it refuses and how it says so, validation on encode naming
the field, the bytes against confluent-kafka's JSONSerializer, decoding without validating."""

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from engine.schemas import json_schema, kinds
from engine.schemas.errors import InvalidSchema, SchemaMismatch
from engine.schemas.kinds import Reference

ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}},
           "required": ["zip"]}
ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string", "maxLength": 10},
        "amount": {"type": "number", "minimum": 0},
        "status": {"enum": ["NEW", "PAID"]},
        "note": {"type": ["string", "null"]},
        "ship_to": {"$ref": "address.json"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}},
    },
    "required": ["id", "customer"],
    "additionalProperties": False,
    "definitions": {"line": {"type": "object", "properties": {"sku": {"type": "string"},
                                                              "qty": {"type": "integer"}},
                             "required": ["sku", "qty"]}},
}
ADDRESS_REF = Reference("address.json", "address", 1, "JSON", json.dumps(ADDRESS))


def order():
    return json_schema.parse(json.dumps(ORDER), [ADDRESS_REF])


DOC = {"id": 1, "customer": "ann", "amount": 2.5, "status": "PAID", "note": None,
       "ship_to": {"street": "Main", "zip": 1}, "lines": [{"sku": "a", "qty": 2}]}


def test_a_document_goes_to_compact_utf8_json_and_back():
    p = order()
    doc = dict(DOC, customer="zoë")
    payload = p.encode(p.from_json(doc))
    assert payload == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert p.to_json(p.decode(payload)) == doc


@pytest.mark.parametrize("doc,field,problem", [
    ({"customer": "ann"}, "id", "missing, and it is required"),
    ({"id": "1", "customer": "ann"}, "id", "expected integer, got '1'"),
    ({"id": 1, "customer": "a" * 11}, "customer", "'aaaaaaaaaaa' is too long"),
    ({"id": 1, "customer": "c", "amount": -1}, "amount", "-1 is less than the minimum of 0"),
    ({"id": 1, "customer": "c", "status": "LOST"}, "status", "'LOST' is not one of ['NEW', 'PAID']"),
    ({"id": 1, "customer": "c", "note": 5}, "note", "expected string or null, got 5"),
    ({"id": 1, "customer": "c", "ship_to": {"street": "s"}}, "ship_to.zip", "missing, and it is required"),
    ({"id": 1, "customer": "c", "ship_to": {"zip": "z"}}, "ship_to.zip", "expected integer, got 'z'"),
    ({"id": 1, "customer": "c", "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": "x"}]},
     "lines[1].qty", "expected integer, got 'x'"),
    ({"id": 1, "customer": "c", "colour": "red"}, "colour",
     "not allowed here (additionalProperties is false)"),
    ([1], "", "expected object, got an array"),
])
def test_a_document_that_does_not_fit_names_its_field(doc, field, problem):
    p = order()
    with pytest.raises(SchemaMismatch) as e:
        p.from_json(doc)
    assert (e.value.field, e.value.problem) == (field, problem)
    with pytest.raises(SchemaMismatch) as again:
        p.encode(doc)
    assert (again.value.field, again.value.problem) == (field, problem)


def test_nan_has_no_json_form():
    p = json_schema.parse('{"type": "number"}')
    with pytest.raises(SchemaMismatch, match="^NaN and Infinity have no JSON form$"):
        p.encode(float("nan"))


def test_decode_does_not_validate_and_refuses_what_is_not_json():
    p = order()
    assert p.decode(b'{"unexpected": true}') == {"unexpected": True}  # as Confluent's deserializer
    for payload, problem in [(b"{", "payload is not JSON: Expecting property name enclosed in double "
                                    "quotes: line 1 column 2 (char 1)"),
                             (b"\xff\xfe\x00", "payload is not JSON: "),
                             (b"", "payload is not JSON: Expecting value: line 1 column 1 (char 0)"),
                             (b"[" * 100000, "payload is not JSON: ")]:
        with pytest.raises(SchemaMismatch) as e:
            p.decode(payload)
        assert e.value.field == "" and e.value.problem.startswith(problem)


@pytest.mark.parametrize("text,message", [
    ("{", "Invalid schema: not JSON: Expecting property name enclosed in double quotes: "
          "line 1 column 2 (char 1)"),
    ("5", "Invalid schema: a JSON schema is an object or a boolean, got int '5'"),
    ('"string"', "Invalid schema: a JSON schema is an object or a boolean, got str '\"string\"'"),
    ('{"type": "nope"}', "Invalid schema: 'nope' is not valid under any of the given schemas at #/type"),
    ('{"properties": {"a": {"minLength": -1}}}',
     "Invalid schema: -1 is less than the minimum of 0 at #/properties/a/minLength"),
    ('{"required": "a"}', "Invalid schema: 'a' is not of type 'array' at #/required"),
    ('{"$ref": "address.json"}', "Invalid schema: $ref 'address.json' at # does not resolve: no reference "
                                 "of that name was given (references: name, subject, version)"),
    ('{"properties": {"a": {"$ref": "#/definitions/missing"}}}',
     "Invalid schema: $ref '#/definitions/missing' at #/properties/a points to nothing in the schema "
     "it names"),
    ('{"$ref": "http://example.com/remote.json"}',  # no network: only references resolve
     "$ref 'http://example.com/remote.json' at # does not resolve"),
])
def test_a_schema_that_is_not_one_is_refused(text, message):
    with pytest.raises(InvalidSchema) as e:
        json_schema.parse(text)
    assert message in str(e.value) and e.value.code == 42201


def test_boolean_schemas_and_other_drafts():
    assert json_schema.parse("true").from_json({"any": "thing"}) == {"any": "thing"}
    with pytest.raises(SchemaMismatch):
        json_schema.parse("false").from_json(1)
    p = json_schema.parse(json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema",
                                      "type": "array", "prefixItems": [{"type": "integer"}]}))
    with pytest.raises(SchemaMismatch) as e:
        p.from_json(["x"])
    assert e.value.field == "[0]"


def test_references_resolve_by_name_in_order_and_are_checked_themselves():
    zip_ref = Reference("zip.json", "zip", 1, "JSON", '{"type": "integer", "minimum": 10000}')
    addr = Reference("address.json", "address", 2, "JSON", json.dumps(
        {"type": "object", "properties": {"zip": {"$ref": "zip.json"}}}))
    p = kinds.parse("JSON", '{"type": "object", "properties": {"a": {"$ref": "address.json"}}}',
                    [zip_ref, addr])
    with pytest.raises(SchemaMismatch) as e:
        p.from_json({"a": {"zip": 5}})
    assert (e.value.field, e.value.problem) == ("a.zip", "5 is less than the minimum of 10000")
    with pytest.raises(InvalidSchema, match=r"\$ref 'zip.json' at address.json#/properties/zip does not "
                                            r"resolve: .* \(in reference 'address.json'\)"):
        json_schema.parse('{"$ref": "address.json"}', [addr])
    with pytest.raises(InvalidSchema, match=r"reference 'address.json' \(address version 2\): "
                                            "Invalid schema: not JSON"):
        json_schema.parse("{}", [Reference("address.json", "address", 2, "JSON", "{")])
    with pytest.raises(InvalidSchema, match="is a AVRO schema, not JSON"):
        json_schema.parse("{}", [Reference("x", "x", 1, "AVRO", '"int"')])


def test_canonical_keeps_order_normalized_sorts_keys():
    p = json_schema.parse('{"type": "object",\n  "properties": {"b": {}, "a": {"type": "string"}}}')
    assert p.canonical() == '{"type":"object","properties":{"b":{},"a":{"type":"string"}}}'
    assert p.normalized() == '{"properties":{"a":{"type":"string"},"b":{}},"type":"object"}'
    q = json_schema.parse('{"properties": {"a": {"type": "string"}, "b": {}}, "type": "object"}')
    assert q.normalized() == p.normalized() and q.canonical() != p.canonical()
    assert p.text() == '{"type": "object",\n  "properties": {"b": {}, "a": {"type": "string"}}}'


# ---- the bytes: the same as confluent-kafka's ----

@pytest.mark.parametrize("doc", [DOC, dict(DOC, customer="zoë €", note="\u2028 \"quoted\" \\ /"),
                                 {"id": 10 ** 20, "customer": "", "amount": 1e-7}])
def test_encode_writes_what_confluents_json_serializer_writes(doc):
    p = order()
    client = SchemaRegistryClient.new_client({"url": "mock://rivven-json-tests"})
    ctx = SerializationContext("orders", MessageField.VALUE)
    client.register_schema("address", Schema(json.dumps(ADDRESS), "JSON"))
    schema = Schema(json.dumps(ORDER), "JSON", [SchemaReference("address.json", "address", 1)])
    framed = JSONSerializer(schema, client)(doc, ctx)
    assert p.encode(doc) == framed[5:]
    assert p.encode(doc) == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    reader = JSONDeserializer(None, schema_registry_client=client)
    assert reader(framed[:5] + p.encode(doc), ctx) == p.decode(framed[5:]) == doc


def test_nesting_too_deep_is_refused_in_one_line():
    with pytest.raises(InvalidSchema, match="^Invalid schema: nested too deeply$"):
        json_schema.parse('{"items": ' * 5000 + "{}" + "}" * 5000)
    p = json_schema.parse('{"type": "object", "properties": {"n": {"$ref": "#"}}}')
    doc: dict = {}
    for _ in range(5000):
        doc = {"n": doc}
    with pytest.raises(SchemaMismatch, match="^nested too deeply$"):
        p.from_json(doc)
