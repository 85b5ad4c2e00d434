"""Avro compatibility (engine/schemas/avro_compat.py) against Confluent's documented rules
(docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html: BACKWARD
allows "delete fields, add optional fields", FORWARD "add fields, delete optional fields", FULL
"add optional fields, delete optional fields") and Avro's schema resolution rules (promotions,
aliases, enum symbols, unions), which Confluent applies through Avro Java's
SchemaCompatibility. BACKWARD = new.problems_reading(old); FORWARD = old.problems_reading(new);
FULL = both. Each row is also held against avro.compatibility, Avro's own Python port."""

import json

import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from engine.schemas import avro, json_schema

INT, LONG, STRING = "int", "long", "string"


def rec(*fields, name="Order", **extra):
    return {"type": "record", "name": name, "namespace": "com.acme", "fields": list(fields), **extra}


def f(name, type_, **extra):
    return {"name": name, "type": type_, **extra}


def enum(*symbols, **extra):
    return {"type": "enum", "name": "Status", "symbols": list(symbols), **extra}


BASE = rec(f("id", LONG), f("name", STRING))

# (change, old, new, BACKWARD ok, FORWARD ok); FULL = both
TABLE = [
    # "add optional fields": a field with a default is BACKWARD (the new reader fills it in)
    # and FORWARD (the old reader skips it): FULL
    ("add a field with a default", BASE, rec(f("id", LONG), f("name", STRING), f("n", INT, default=0)),
     True, True),
    # FORWARD "add fields"; not BACKWARD: the new reader has no value for old records
    ("add a field without a default", BASE, rec(f("id", LONG), f("name", STRING), f("n", INT)),
     False, True),
    # "delete optional fields": the old reader fills in the default: FULL
    ("remove a field with a default", rec(f("id", LONG), f("name", STRING, default="")),
     rec(f("id", LONG)), True, True),
    # BACKWARD "delete fields"; not FORWARD: the old reader has no value for the field
    ("remove a field without a default", BASE, rec(f("id", LONG)), True, False),
    # a rename is a removal and an addition: neither side has a default
    ("rename a field", BASE, rec(f("id", LONG), f("title", STRING)), False, False),
    # the reader's aliases name the writer's field: BACKWARD; the old reader has no alias
    ("rename a field with an alias", BASE, rec(f("id", LONG), f("title", STRING, aliases=["name"])),
     True, False),
    # with defaults on both sides a rename is FULL (each side fills the other's field in)
    ("rename a field, both with defaults", rec(f("id", LONG), f("name", STRING, default="")),
     rec(f("id", LONG), f("title", STRING, default="")), True, True),
    # Avro's promotions: int -> long -> float -> double; a long reader reads ints
    ("int to long", rec(f("n", INT)), rec(f("n", LONG)), True, False),
    ("long to int", rec(f("n", LONG)), rec(f("n", INT)), False, True),
    ("int to double", rec(f("n", INT)), rec(f("n", "double")), True, False),
    ("float to double", rec(f("n", "float")), rec(f("n", "double")), True, False),
    # string and bytes read each other
    ("string to bytes", rec(f("n", STRING)), rec(f("n", "bytes")), True, True),
    # no promotion between numbers and strings
    ("int to string", rec(f("n", INT)), rec(f("n", STRING)), False, False),
    ("boolean to int", rec(f("n", "boolean")), rec(f("n", INT)), False, False),
    # a reader enum must hold every writer symbol
    ("add an enum symbol", rec(f("s", enum("A", "B"))), rec(f("s", enum("A", "B", "C"))), True, False),
    ("remove an enum symbol", rec(f("s", enum("A", "B"))), rec(f("s", enum("A"))), False, True),
    # ... unless the reader's enum has a default (Avro 1.9+): then FULL
    ("add a symbol to enums with a default", rec(f("s", enum("A", "B", default="A"))),
     rec(f("s", enum("A", "B", "C", default="A"))), True, True),
    ("reorder enum symbols", rec(f("s", enum("A", "B"))), rec(f("s", enum("B", "A"))), True, True),
    # a union reader reads each of its branches: making a field nullable is BACKWARD
    ("make a field optional", rec(f("n", INT)), rec(f("n", ["null", INT], default=None)), True, False),
    ("add a union branch", rec(f("n", ["null", INT])), rec(f("n", ["null", INT, STRING])), True, False),
    ("remove a union branch", rec(f("n", ["null", INT, STRING])), rec(f("n", ["null", INT])), False, True),
    # named types keep their (short) name, or the reader lists the writer's full name
    ("rename the record", BASE, rec(f("id", LONG), f("name", STRING), name="Purchase"), False, False),
    ("rename the record with an alias", BASE,
     rec(f("id", LONG), f("name", STRING), name="Purchase", aliases=["com.acme.Order"]), True, False),
    ("change only the namespace", BASE, {**BASE, "namespace": "org.other"}, True, True),
    # fixed sizes must match
    ("change a fixed size", rec(f("h", {"type": "fixed", "name": "H", "size": 4})),
     rec(f("h", {"type": "fixed", "name": "H", "size": 8})), False, False),
    # the same rules inside nested records, arrays and maps
    ("add a field without a default in a nested record",
     rec(f("a", rec(f("zip", INT), name="Address"))),
     rec(f("a", rec(f("zip", INT), f("city", STRING), name="Address"))), False, True),
    ("array items int to long", rec(f("xs", {"type": "array", "items": INT})),
     rec(f("xs", {"type": "array", "items": LONG})), True, False),
    ("map values string to int", rec(f("m", {"type": "map", "values": STRING})),
     rec(f("m", {"type": "map", "values": INT})), False, False),
    ("add a doc and change a default", rec(f("n", INT, default=1)),
     rec(f("n", INT, default=2, doc="the count"), doc="orders"), True, True),
]


def parse(doc):
    return avro.parse(json.dumps(doc))


def library_says(reader, writer):
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader.model, writer.model)
    return result.compatibility is SchemaCompatibilityType.compatible


@pytest.mark.parametrize("change,old,new,backward,forward", TABLE, ids=[row[0] for row in TABLE])
def test_schema_changes_follow_confluents_rules(change, old, new, backward, forward):
    o, n = parse(old), parse(new)
    assert (not n.problems_reading(o), not o.problems_reading(n)) == (backward, forward)
    # FULL: both; each problem is one line
    assert all("\n" not in m for m in n.problems_reading(o) + o.problems_reading(n))
    assert (library_says(n, o), library_says(o, n)) == (backward, forward)


@pytest.mark.parametrize("old,new,message", [
    (BASE, rec(f("id", LONG), f("name", STRING), f("n", INT)),
     "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'n' at path '/fields/2' in "
     "the new schema has no default value and is missing in the old schema', additionalInfo:'n'}"),
    (rec(f("n", STRING)), rec(f("n", INT)),
     "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new "
     "schema does not match with the old schema', additionalInfo:'reader type: INT not compatible with "
     "writer type: STRING'}"),
    (rec(f("s", enum("A", "B", "C"))), rec(f("s", enum("A"))),
     "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[B, C]' at "
     "path '/fields/0/type/symbols' in the old schema', additionalInfo:'[B, C]'}"),
    (rec(f("n", ["null", INT, STRING])), rec(f("n", ["null", INT])),
     "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union "
     "field at path '/fields/0/type/2' in the old schema', additionalInfo:'reader union lacking writer "
     "type: STRING'}"),
    (BASE, rec(f("id", LONG), f("name", STRING), name="Purchase"),
     "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
     "additionalInfo:'expected: com.acme.Order'}"),
    (rec(f("h", {"type": "fixed", "name": "H", "size": 4})),
     rec(f("h", {"type": "fixed", "name": "H", "size": 8})),
     "{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path "
     "'/fields/0/type/size' in the new schema does not match with the old schema', "
     "additionalInfo:'expected: 4, found: 8'}"),
])
def test_each_problem_says_its_kind_and_place_as_confluent_does(old, new, message):
    assert parse(new).problems_reading(parse(old), names=("new", "old")) == [message]


def test_every_problem_is_reported_with_its_own_place():
    old = rec(f("a", INT), f("b", STRING))
    new = rec(f("a", STRING), f("b", INT), f("c", INT))
    found = parse(new).problems_reading(parse(old))
    places = [m.split("path '")[1].split("'")[0] for m in found]
    assert places == ["/fields/0/type", "/fields/1/type", "/fields/2"]
    assert "in the reader schema has no default value and is missing in the writer schema" in found[2]


def test_recursive_types_are_compared_without_looping():
    node = rec(f("v", INT), f("next", ["null", "Order"], default=None))
    wider = rec(f("v", LONG), f("next", ["null", "Order"], default=None))
    assert parse(wider).problems_reading(parse(node)) == []
    assert len(parse(node).problems_reading(parse(wider))) == 1


def test_a_schema_of_another_type_is_incompatible():
    assert parse(BASE).problems_reading(json_schema.parse("{}")) == [
        "Incompatible because of different schema type"]
