"""The AVRO schema type (engine/schemas/avro.py, avro_values.py): parsing with references,
what it refuses and how it says so, JSON input to Avro values and back, the bytes against
confluent-kafka's AvroSerializer (fastavro), and decoding garbage without a traceback or a
huge allocation."""

import datetime as dt
import io
import json
import random
import uuid
from decimal import Decimal

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from engine.schemas import avro, kinds
from engine.schemas.errors import InvalidSchema, SchemaMismatch
from engine.schemas.kinds import Reference

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
    {"name": "street", "type": "string"},
    {"name": "zip", "type": "int"},
]}
ORDER = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "quantity", "type": "int", "default": 1},
    {"name": "paid", "type": "boolean", "default": False},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "attrs", "type": {"type": "map", "values": "long"}, "default": {}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]},
     "default": "NEW"},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4},
     "default": "\u0000\u0001\u00fe\u00ff"},
    {"name": "blob", "type": "bytes", "default": "\u00ff"},
    {"name": "ship_to", "type": ["null", "Address"], "default": None},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}, "default": []},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
     "default": "\u0000"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 0},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"},
     "default": "00000000-0000-0000-0000-000000000000"},
]}
ADDRESS_REF = Reference("com.acme.Address", "address-value", 1, "AVRO", json.dumps(ADDRESS))


def order():
    return avro.parse(json.dumps(ORDER), [ADDRESS_REF])


def test_a_record_goes_from_json_to_bytes_and_back():
    p = order()
    doc = {"id": 7, "customer": "ann", "amount": 9.5, "quantity": 3, "paid": True, "note": "gift",
           "tags": ["a", "b"], "attrs": {"x": 1}, "status": "PAID", "hash": "abcd", "blob": "\u00e9\u0000",
           "ship_to": {"street": "Main", "zip": 12345},
           "lines": [{"sku": "s1", "qty": 2}], "price": "1234.50", "day": 19724,
           "at": 1704153600123, "ref": "12345678-1234-5678-1234-567812345678"}
    value = p.from_json(doc)
    back = p.to_json(p.decode(p.encode(value)))
    assert back == doc  # bytes and fixed as ISO-8859-1 strings, unions untagged, logical as stored
    assert p.decode(p.encode(value))["price"] == Decimal("1234.50")


def test_left_out_fields_take_their_defaults():
    p = order()
    back = p.to_json(p.decode(p.encode(p.from_json({"id": 1, "customer": "c", "amount": 0}))))
    assert back == {"id": 1, "customer": "c", "amount": 0.0, "quantity": 1, "paid": False,
                    "note": None, "tags": [], "attrs": {}, "status": "NEW",
                    "hash": "\u0000\u0001\u00fe\u00ff", "blob": "\u00ff", "ship_to": None,
                    "lines": [], "price": "0.00", "day": 0, "at": 0,
                    "ref": "00000000-0000-0000-0000-000000000000"}


def test_python_values_encode_too_and_defaults_of_bytes_are_written_as_bytes():
    # the Python serializer path: bytes, Decimal, date, datetime, UUID, fastavro's values
    p = order()
    value = {"id": 1, "customer": "c", "amount": 1.0, "hash": b"\x00\x01\x02\x03",
             "price": Decimal("1.50"), "day": dt.date(2024, 1, 2),
             "at": dt.datetime(2024, 1, 2, tzinfo=dt.UTC), "ref": uuid.UUID(int=5)}
    decoded = p.decode(p.encode(value))
    assert decoded["hash"] == b"\x00\x01\x02\x03" and decoded["blob"] == b"\xff"
    assert decoded["day"] == dt.date(2024, 1, 2) and decoded["ref"] == uuid.UUID(int=5)
    assert decoded["at"] == dt.datetime(2024, 1, 2, tzinfo=dt.UTC)


@pytest.mark.parametrize("given,stored", [
    ({"note": {"string": "x"}}, "x"),  # Avro's JSON encoding of a union: tagged
    ({"note": "x"}, "x"),  # or plain
    ({"note": None}, None),
    ({"note": {"null": None}}, None),
    ({"ship_to": {"com.acme.Address": {"street": "s", "zip": 1}}}, {"street": "s", "zip": 1}),
    ({"ship_to": {"Address": {"street": "s", "zip": 1}}}, {"street": "s", "zip": 1}),
])
def test_unions_take_the_plain_or_the_tagged_form(given, stored):
    p = order()
    field = next(iter(given))
    doc = {"id": 1, "customer": "c", "amount": 1, **given}
    assert p.to_json(p.decode(p.encode(p.from_json(doc))))[field] == stored


@pytest.mark.parametrize("field,given,stored", [
    ("day", "2024-01-02", 19724),
    ("at", "2024-01-02T00:00:00Z", 1704153600000),
    ("at", "2024-01-02T01:00:00+01:00", 1704153600000),
    ("at", "2024-01-02T00:00:00", 1704153600000),  # no offset: UTC
    ("price", 12, "12.00"),
    ("price", 12.5, "12.50"),
    ("price", "0.1", "0.10"),
])
def test_logical_types_take_readable_forms(field, given, stored):
    p = order()
    doc = {"id": 1, "customer": "c", "amount": 1, field: given}
    assert p.to_json(p.decode(p.encode(p.from_json(doc))))[field] == stored


@pytest.mark.parametrize("doc,field,problem", [
    ({"customer": "c", "amount": 1}, "id", "missing, and the field has no default"),
    ({"id": "7", "customer": "c", "amount": 1}, "id", "expected long, got '7'"),
    ({"id": 1.5, "customer": "c", "amount": 1}, "id", "expected long, got 1.5"),
    ({"id": True, "customer": "c", "amount": 1}, "id", "expected long, got true"),
    ({"id": 2 ** 63, "customer": "c", "amount": 1}, "id", f"{2 ** 63} is out of range for long"),
    ({"id": 1, "customer": None, "amount": 1}, "customer", "expected string, got null"),
    ({"id": 1, "customer": "c", "amount": "x"}, "amount", "expected double, got 'x'"),
    ({"id": 1, "customer": "c", "amount": 1, "quantity": 2 ** 31}, "quantity",
     f"{2 ** 31} is out of range for int"),
    ({"id": 1, "customer": "c", "amount": 1, "note": 5}, "note", "expected null or string, got 5"),
    ({"id": 1, "customer": "c", "amount": 1, "tags": ["a", 2]}, "tags[1]", "expected string, got 2"),
    ({"id": 1, "customer": "c", "amount": 1, "tags": "a"}, "tags", "expected an array, got 'a'"),
    ({"id": 1, "customer": "c", "amount": 1, "attrs": {"k": "v"}}, 'attrs["k"]', "expected long, got 'v'"),
    ({"id": 1, "customer": "c", "amount": 1, "status": "LOST"}, "status",
     "expected one of NEW, PAID (enum com.acme.Status), got 'LOST'"),
    ({"id": 1, "customer": "c", "amount": 1, "hash": "abc"}, "hash",
     "expected 4 bytes (fixed com.acme.Hash), got 3"),
    ({"id": 1, "customer": "c", "amount": 1, "blob": "\u20ac"}, "blob",
     "expected bytes as a string of code points 0-255 (Avro's JSON encoding of bytes), got '€'"),
    ({"id": 1, "customer": "c", "amount": 1, "ship_to": {"street": "s"}}, "ship_to.zip",
     "missing, and the field has no default"),
    ({"id": 1, "customer": "c", "amount": 1, "ship_to": {"street": "s", "zip": "z"}}, "ship_to.zip",
     "expected int, got 'z'"),
    ({"id": 1, "customer": "c", "amount": 1, "ship_to": 5}, "ship_to",
     "expected null or com.acme.Address, got 5"),
    ({"id": 1, "customer": "c", "amount": 1, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": "x"}]},
     "lines[1].qty", "expected int, got 'x'"),
    ({"id": 1, "customer": "c", "amount": 1, "price": "1.234"}, "price",
     "1.234 has more than 2 decimal places (decimal(6,2))"),
    ({"id": 1, "customer": "c", "amount": 1, "price": 12345.5}, "price",
     "12345.5 has more than 6 digits (decimal(6,2))"),
    ({"id": 1, "customer": "c", "amount": 1, "price": "abc"}, "price",
     "expected a decimal number, got 'abc'"),
    ({"id": 1, "customer": "c", "amount": 1, "day": "yesterday"}, "day",
     "expected a date (days since 1970-01-01, or YYYY-MM-DD), got 'yesterday'"),
    ({"id": 1, "customer": "c", "amount": 1, "at": "later"}, "at",
     "expected a timestamp (ms since the epoch, or ISO 8601), got 'later'"),
    ({"id": 1, "customer": "c", "amount": 1, "ref": "not-a-uuid"}, "ref",
     "expected a UUID, got 'not-a-uuid'"),
    ([1], "", "expected an object (record com.acme.Order), got an array"),
])
def test_a_value_that_does_not_fit_names_its_field(doc, field, problem):
    p = order()
    with pytest.raises(SchemaMismatch) as e:
        p.from_json(doc)
    assert (e.value.field, e.value.problem) == (field, problem)
    assert str(e.value) == (f"field {field}: {problem}" if field else problem)
    with pytest.raises(SchemaMismatch) as again:  # encode checks what from_json did not make
        p.encode(doc)
    assert again.value.field == field


def test_a_union_of_several_records_reports_the_branch_that_fits_least_generally():
    s = {"type": "record", "name": "W", "fields": [{"name": "u", "type": [
        "null", {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
        {"type": "record", "name": "B", "fields": [{"name": "b", "type": "string"}]}]}]}
    p = avro.parse(json.dumps(s))
    assert p.to_json(p.decode(p.encode(p.from_json({"u": {"b": "x"}})))) == {"u": {"b": "x"}}
    assert p.to_json(p.decode(p.encode(p.from_json({"u": {"B": {"b": "y"}}})))) == {"u": {"b": "y"}}
    with pytest.raises(SchemaMismatch) as e:
        p.from_json({"u": {"c": 1}})
    assert (e.value.field, e.value.problem) == ("u", "expected null or A or B, got an object")


def test_recursive_types_convert():
    s = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    p = avro.parse(json.dumps(s))
    doc = {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}}
    assert p.to_json(p.decode(p.encode(p.from_json(doc)))) == doc
    with pytest.raises(SchemaMismatch) as e:
        p.from_json({"v": 1, "next": {"v": 2, "next": {"v": "x"}}})
    assert e.value.field == "next.next.v"


def test_primitive_and_union_schemas():
    p = avro.parse('"string"')
    assert p.decode(p.encode(p.from_json("hé"))) == "hé"
    u = avro.parse('["null", "long", "string"]')
    for v in (None, 5, "s"):
        assert u.to_json(u.decode(u.encode(u.from_json(v)))) == v
    with pytest.raises(SchemaMismatch, match="^expected long, got 1.5$"):  # the one numeric branch
        u.from_json(1.5)
    with pytest.raises(SchemaMismatch, match="^expected null or long or string, got true$"):
        u.from_json(True)


# ---- the bytes: the same as confluent-kafka's ----

def serde():
    client = SchemaRegistryClient.new_client({"url": "mock://rivven-tests"})
    return client, SerializationContext("orders", MessageField.VALUE)


PYTHON_VALUES = [
    {"id": 1, "customer": "ann", "amount": 2.5, "quantity": 1, "paid": False, "note": None,
     "tags": [], "attrs": {}, "status": "NEW", "hash": b"\x00\x01\x02\x03", "blob": b"",
     "ship_to": None, "lines": [], "price": Decimal("0.00"), "day": dt.date(1970, 1, 1),
     "at": dt.datetime(1970, 1, 1, tzinfo=dt.UTC), "ref": "00000000-0000-0000-0000-000000000000"},
    {"id": -(2 ** 62), "customer": "bé", "amount": -1e300, "quantity": -5, "paid": True,
     "note": "n", "tags": ["x", "y"], "attrs": {"a": 1, "b": -2}, "status": "PAID",
     "hash": b"\xff\xfe\xfd\xfc", "blob": bytes(range(256)), "ship_to": {"street": "s", "zip": 1},
     "lines": [{"sku": "k", "qty": 9}] * 3, "price": Decimal("-9999.99"), "day": dt.date(2024, 2, 29),
     "at": dt.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=dt.UTC), "ref": str(uuid.UUID(int=7))},
]


@pytest.mark.parametrize("value", PYTHON_VALUES)
def test_encode_writes_what_confluents_avro_serializer_writes(value):
    p = order()
    client, ctx = serde()
    client.register_schema("address-value", Schema(json.dumps(ADDRESS), "AVRO"))
    schema = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("com.acme.Address", "address-value", 1)])
    framed = AvroSerializer(client, schema, conf={"auto.register.schemas": True})(value, ctx)
    assert framed[:1] == b"\x00"
    assert p.encode(value) == framed[5:]
    named: dict = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER, named_schemas=named), value)
    assert p.encode(value) == out.getvalue()
    # and confluent's deserializer reads what rivven wrote, framed the same way
    assert AvroDeserializer(client)(framed[:5] + p.encode(value), ctx) == p.decode(framed[5:])


def test_json_input_encodes_as_confluents_serializer_writes_the_same_values():
    p = order()
    doc = {"id": 5, "customer": "c", "amount": 1.25, "note": "x", "hash": "\u0000\u0001\u0002\u0003",
           "blob": "\u00ff\u0000", "price": "3.10", "day": "1970-01-02", "ship_to": {"street": "s", "zip": 2}}
    value = dict(PYTHON_VALUES[0], id=5, customer="c", amount=1.25, note="x", blob=b"\xff\x00",
                 price=Decimal("3.10"), day=dt.date(1970, 1, 2), ship_to={"street": "s", "zip": 2})
    named: dict = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER, named_schemas=named), value)
    assert p.encode(p.from_json(doc)) == out.getvalue()


# ---- decoding bad bytes ----

def test_garbage_and_truncated_payloads_give_schema_mismatch():
    p = order()
    good = p.encode(p.from_json({"id": 1, "customer": "c", "amount": 1}))
    for cut in range(len(good)):
        with pytest.raises(SchemaMismatch) as e:
            p.decode(good[:cut])
        assert e.value.field == ""
        assert e.value.problem.startswith("payload does not decode as com.acme.Order:")
    rng = random.Random(33)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        try:
            p.decode(data)
        except SchemaMismatch:
            pass


def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


BOUND = f"it claims more than {avro.MAX_EMPTY_ITEMS} items of zero width in arrays (rivven's bound on those)"
EMPTY = {"type": "record", "name": "E", "fields": []}


@pytest.mark.parametrize("schema,payload,problem", [
    ("string", zigzag(2 ** 60) + b"abc", "truncated (Expected 1152921504606846976 bytes, read 3)"),
    ("bytes", zigzag(-5), "truncated (Expected -5 bytes, read 0)"),
    ({"type": "array", "items": "long"}, zigzag(2 ** 50), "truncated"),
    ({"type": "map", "values": "long"}, zigzag(2 ** 50), "truncated"),
    ({"type": "array", "items": "null"}, zigzag(2 ** 60) + zigzag(0), BOUND),
    ({"type": "array", "items": EMPTY}, zigzag(-(2 ** 40)) + zigzag(0), BOUND),  # a block with its size
    ("string", zigzag(2) + b"\xff\xfe",
     "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
])
def test_bogus_lengths_are_refused_without_allocating_them(schema, payload, problem):
    p = avro.parse(json.dumps(schema))
    with pytest.raises(SchemaMismatch) as e:
        p.decode(payload)
    assert e.value.problem.endswith(problem), e.value.problem


def test_arrays_of_zero_width_items_within_the_bound_decode():
    p = avro.parse(json.dumps({"type": "array", "items": "null"}))
    assert p.decode(zigzag(1000) + zigzag(0)) == [None] * 1000
    assert p.decode(p.encode([None, None])) == [None, None]


# ---- parsing ----

def record(*fields):
    return json.dumps({"type": "record", "name": "R", "fields": list(fields)})


@pytest.mark.parametrize("text,message", [
    ("{", "Invalid schema: not JSON: Expecting property name enclosed in double quotes: "
          "line 1 column 2 (char 1)"),
    ("5", "Invalid schema: expected a JSON object, array or string, got '5'"),
    (record({"name": "a", "type": "Missing"}),
     "Invalid schema: unknown type 'Missing': not a primitive type, nor a named type defined "
     "before it in the schema or in a reference"),
    (record({"name": "a", "type": "int", "default": "x"}),
     "Invalid schema: Default value <x> must match schema type: int"),
    (record({"name": "a", "type": "int"}, {"name": "a", "type": "long"}),
     "Invalid schema: Field name a already in use."),
    (record({"name": "a", "type": {"type": "record", "name": "R", "fields": []}}),
     'The name "R" is already in use.'),
    ('{"type": "record", "name": "1R", "fields": []}', "1R is not a valid Avro name"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "Invalid schema: Duplicate symbol: ['A', 'A']"),
    ('{"type": "fixed", "name": "F"}',
     "Invalid schema: Fixed Schema requires a valid positive integer for size property."),
    ('["int", "int"]', "Invalid schema: int type already in Union"),
    ('["null", ["int"]]', "Invalid schema: Unions cannot contain other unions."),
    ('{"type": "record", "name": "R"}',
     "Invalid schema: Record schema requires a non-empty fields property."),
])
def test_a_schema_that_does_not_parse_is_refused_with_the_parsers_message(text, message):
    with pytest.raises(InvalidSchema) as e:
        avro.parse(text)
    assert message in str(e.value) and e.value.code == 42201
    assert "\n" not in str(e.value)


def test_references_give_their_named_types_and_a_missing_one_is_named():
    p = avro.parse(json.dumps({"type": "record", "name": "Person", "fields": [
        {"name": "home", "type": "com.acme.Address"}]}), [ADDRESS_REF])
    assert p.from_json({"home": {"street": "s", "zip": 1}}) == {"home": {"street": "s", "zip": 1}}
    with pytest.raises(InvalidSchema, match="unknown type 'com.acme.Address'"):
        avro.parse(json.dumps({"type": "record", "name": "Person", "fields": [
            {"name": "home", "type": "com.acme.Address"}]}))
    bad = Reference("com.acme.Address", "address-value", 2, "AVRO", "{")
    with pytest.raises(InvalidSchema, match=r"reference 'com.acme.Address' \(address-value version 2\): "
                                            "Invalid schema: not JSON"):
        avro.parse('"string"', [bad])
    other = Reference("x", "x-value", 1, "JSON", "{}")
    with pytest.raises(InvalidSchema, match="is a JSON schema, not AVRO"):
        avro.parse('"string"', [other])


def test_references_chain_in_order_and_repeat_harmlessly():
    zip_ref = Reference("com.acme.Zip", "zip", 1, "AVRO", json.dumps(
        {"type": "fixed", "name": "Zip", "namespace": "com.acme", "size": 5}))
    addr = Reference("com.acme.Addr", "addr", 1, "AVRO", json.dumps(
        {"type": "record", "name": "Addr", "namespace": "com.acme", "fields": [
            {"name": "zip", "type": "Zip", "default": "00000"}]}))
    p = kinds.parse("AVRO", json.dumps({"type": "record", "name": "P", "fields": [
        {"name": "a", "type": "com.acme.Addr"}]}), [zip_ref, addr, zip_ref])
    assert p.decode(p.encode(p.from_json({"a": {}}))) == {"a": {"zip": b"00000"}}


def test_canonical_keeps_order_and_drops_whitespace_normalized_settles_spellings():
    text = '{"type": "record", "name": "R", "namespace": "n",\n "fields": [{"name": "a", "type": "int"}]}'
    a = avro.parse(text)
    b = avro.parse('{"namespace":"n","name":"R","type":"record",'
                   '"fields":[{"type":{"type":"int"},"name":"a"}]}')
    assert a.canonical() == ('{"type":"record","name":"R","namespace":"n",'
                             '"fields":[{"name":"a","type":"int"}]}')
    assert a.canonical() != b.canonical()
    assert a.normalized() == b.normalized() == ('{"name":"n.R","type":"record",'
                                                '"fields":[{"name":"a","type":"int"}]}')
    c = avro.parse('{"type":"record","name":"R","namespace":"n",'
                   '"fields":[{"name":"a","type":"int","default":1}]}')
    assert c.normalized() != a.normalized()  # a default changes what a reader does
    assert avro.parse(a.normalized()).normalized() == a.normalized()
    assert a.text() == a.text("serialized") == text


def test_normalized_form_of_a_rich_schema_parses_back_to_itself():
    p = order()
    again = avro.parse(p.normalized(), [ADDRESS_REF])
    assert again.normalized() == p.normalized()
    assert json.loads(p.normalized())["fields"][9]["default"] == "\u0000\u0001\u00fe\u00ff"


def test_nesting_too_deep_is_refused_in_one_line():
    deep = '{"type": "array", "items": ' * 5000 + '"int"' + "}" * 5000
    with pytest.raises(InvalidSchema, match="^Invalid schema: nested too deeply$"):
        avro.parse(deep)
    p = avro.parse(json.dumps({"type": "record", "name": "N",
                               "fields": [{"name": "n", "type": ["null", "N"]}]}))
    doc = None
    for _ in range(5000):
        doc = {"n": doc}
    for call in (p.from_json, p.encode):
        with pytest.raises(SchemaMismatch, match="^nested too deeply$"):
            call(doc)


def test_a_union_of_referenced_records_at_the_top_encodes_as_confluents_layout():
    # Confluent's "several types in one topic": the schema is a union naming types that
    # references define; fastavro encodes it only in its expanded form (the same bytes)
    from engine.schemas.avro import parse as parse_avro
    from engine.schemas.kinds import Reference

    a = '{"type":"record","name":"A","namespace":"e","fields":[{"name":"x","type":"int"}]}'
    b = '{"type":"record","name":"B","namespace":"e","fields":[{"name":"y","type":"string"}]}'
    s = parse_avro('["e.A", "e.B"]', [Reference("e.A", "a", 1, "AVRO", a),
                                       Reference("e.B", "b", 1, "AVRO", b)])
    data = s.encode(s.from_json({"y": "s"}))
    assert data == b"\x02\x02s"  # (branch 1, then the record)
    assert s.decode(data) == {"y": "s"} and s.decode(s.encode({"x": 3})) == {"x": 3}
