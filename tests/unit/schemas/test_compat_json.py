"""JSON Schema compatibility (engine/schemas/json_compat.py) against Confluent's rules: its
json/diff package with the STRICT policy (SchemaDiff.COMPATIBLE_CHANGES_STRICT: a change is
compatible when every difference found is in that set) and the content models its docs
describe (docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/
serdes-json.html: open, closed, partially open). BACKWARD = new.problems_reading(old), i.e.
SchemaDiff.compare(old, new); FORWARD = old.problems_reading(new); FULL = both. Each row's
comment names the difference types Confluent finds, BACKWARD | FORWARD."""

import json

import pytest

from engine.schemas import avro, json_schema
from engine.schemas.kinds import Reference

STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}


def t(type_, **keywords):
    return {"type": type_, **keywords}


def obj(props, required=(), **extra):
    return {"type": "object", "properties": props, "required": list(required), **extra}


def closed(props, required=(), **extra):
    return obj(props, required, additionalProperties=False, **extra)


# (change, old, new, BACKWARD ok, FORWARD ok)
TABLE = [
    # OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL | PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ("add an optional property, closed model", closed({"a": STR}), closed({"a": STR, "b": STR}), True, False),
    # OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL (LENIENT only) | PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    ("add an optional property, open model", obj({"a": STR}), obj({"a": STR, "b": STR}), False, True),
    # PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL | PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    ("add a property with the empty schema, open model", obj({"a": STR}), obj({"a": STR, "b": {}}),
     True, True),
    # REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL | PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ("add a required property, closed model", closed({"a": STR}), closed({"a": STR, "b": STR}, ["b"]),
     False, False),
    # REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    #   | PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ("add a required property with a default, closed model", closed({"a": STR}),
     closed({"a": STR, "b": t("string", default="x")}, ["b"]), True, False),
    # REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL | PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    ("add a required property, open model", obj({"a": STR}), obj({"a": STR, "b": STR}, ["b"]), False, True),
    # PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL | OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
    ("remove a property, open model", obj({"a": STR, "b": STR}), obj({"a": STR}), True, False),
    # PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL | OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    ("remove a property, closed model", closed({"a": STR, "b": STR}), closed({"a": STR}), False, True),
    # PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL | OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    ("remove a property declared false, closed model", closed({"a": STR, "b": False}), closed({"a": STR}),
     True, True),
    # PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL | ..._REMOVED_IS_COVERED_...
    ("add a property its additionalProperties covers", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": STR}, additionalProperties=STR), True, True),
    # PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL | ..._REMOVED_NOT_COVERED_...
    ("add a property its additionalProperties does not cover", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": INT}, additionalProperties=STR), False, False),
    # the same with patternProperties: covered when a pattern matches the name
    ("add a property a patternProperties covers", obj({"a": STR}, patternProperties={"^s_": STR}),
     obj({"a": STR, "s_x": STR}, patternProperties={"^s_": STR}), True, True),
    # ADDITIONAL_PROPERTIES_ADDED | ADDITIONAL_PROPERTIES_REMOVED
    ("open a closed model", closed({"a": STR}), obj({"a": STR}), True, False),
    # ADDITIONAL_PROPERTIES_NARROWED | ADDITIONAL_PROPERTIES_EXTENDED
    ("give an open model an additionalProperties schema", obj({"a": STR}),
     obj({"a": STR}, additionalProperties=STR), False, True),
    # REQUIRED_ATTRIBUTE_ADDED | REQUIRED_ATTRIBUTE_REMOVED
    ("make a property required", obj({"a": STR}), obj({"a": STR}, ["a"]), False, True),
    # REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED | REQUIRED_ATTRIBUTE_REMOVED
    ("make a property with a default required", obj({"a": t("string", default="")}),
     obj({"a": t("string", default="")}, ["a"]), True, True),
    # TYPE_CHANGED both ways
    ("change a type", obj({"a": STR}), obj({"a": INT}), False, False),
    # TYPE_EXTENDED | TYPE_NARROWED
    ("widen integer to number", obj({"a": INT}), obj({"a": NUM}), True, False),
    # SUM_TYPE_EXTENDED | TYPE_CHANGED
    ("make a property nullable", obj({"a": STR}), obj({"a": {"type": ["string", "null"]}}), True, False),
    # MAX_LENGTH_INCREASED | MAX_LENGTH_DECREASED
    ("raise maxLength", t("string", maxLength=5), t("string", maxLength=9), True, False),
    # MAX_LENGTH_ADDED | MAX_LENGTH_REMOVED
    ("add maxLength", STR, t("string", maxLength=9), False, True),
    # MIN_LENGTH_INCREASED | MIN_LENGTH_DECREASED
    ("raise minLength", t("string", minLength=1), t("string", minLength=2), False, True),
    # MINIMUM_DECREASED | MINIMUM_INCREASED
    ("lower minimum", t("integer", minimum=5), t("integer", minimum=0), True, False),
    # MAXIMUM_REMOVED | MAXIMUM_ADDED
    ("remove maximum", t("number", maximum=5), NUM, True, False),
    # EXCLUSIVE_MINIMUM_INCREASED | EXCLUSIVE_MINIMUM_DECREASED
    ("raise exclusiveMinimum", t("number", exclusiveMinimum=0), t("number", exclusiveMinimum=1),
     False, True),
    # MULTIPLE_OF_REDUCED | MULTIPLE_OF_EXPANDED
    ("reduce multipleOf", t("integer", multipleOf=4), t("integer", multipleOf=2), True, False),
    # PATTERN_REMOVED | PATTERN_ADDED
    ("remove a pattern", t("string", pattern="^a"), STR, True, False),
    # PATTERN_CHANGED both ways
    ("change a pattern", t("string", pattern="^a"), t("string", pattern="^b"), False, False),
    # ENUM_ARRAY_EXTENDED | ENUM_ARRAY_NARROWED
    ("add an enum value", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True, False),
    ("add an enum value to a typed enum", t("string", enum=["a"]), t("string", enum=["a", "b"]),
     True, False),
    # ENUM_ARRAY_CHANGED both ways
    ("replace an enum value", {"enum": ["a", "b"]}, {"enum": ["a", "c"]}, False, False),
    # SUM_TYPE_EXTENDED | SUM_TYPE_NARROWED
    ("add a oneOf branch", {"oneOf": [STR, INT]}, {"oneOf": [STR, INT, {"type": "boolean"}]}, True, False),
    ("add an anyOf branch", {"anyOf": [STR, INT]}, {"anyOf": [STR, INT, {"type": "null"}]}, True, False),
    # COMBINED_TYPE_SUBSCHEMAS_CHANGED both ways
    ("change a oneOf branch", {"oneOf": [STR, INT]}, {"oneOf": [STR, {"type": "boolean"}]}, False, False),
    # PRODUCT_TYPE_NARROWED | PRODUCT_TYPE_EXTENDED
    ("drop an allOf part", {"allOf": [obj({"a": STR}), obj({"b": STR})]}, {"allOf": [obj({"a": STR})]},
     True, False),
    # COMBINED_TYPE_EXTENDED | COMBINED_TYPE_CHANGED
    ("oneOf to anyOf", {"oneOf": [STR, INT]}, {"anyOf": [STR, INT]}, True, False),
    # NOT_TYPE_EXTENDED | NOT_TYPE_NARROWED
    ("forbid more with not", {"not": STR}, {"not": {"type": ["string", "number"]}}, False, True),
    # TITLE_CHANGED, DESCRIPTION_CHANGED, DEFAULT_CHANGED, ID_CHANGED: all compatible
    ("change title, description, default", obj({"a": t("string", default="x")}, title="A"),
     obj({"a": t("string", default="y", description="d")}, title="B"), True, True),
    # TYPE_CHANGED inside array items
    ("change array items", t("array", items=STR), t("array", items=INT), False, False),
    # MIN_ITEMS_INCREASED | MIN_ITEMS_DECREASED
    ("raise minItems", t("array", minItems=0), t("array", minItems=1), False, True),
    # UNIQUE_ITEMS_ADDED | UNIQUE_ITEMS_REMOVED
    ("require unique items", {"type": "array"}, t("array", uniqueItems=True), False, True),
    # SCHEMA_ADDED | SCHEMA_REMOVED: items constrained where any were allowed
    ("give array items a schema", {"type": "array"}, t("array", items=STR), False, True),
    # ITEM_ADDED_TO_CLOSED_CONTENT_MODEL | ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL (tuples)
    ("add a tuple item, closed", t("array", items=[STR], additionalItems=False),
     t("array", items=[STR, INT], additionalItems=False), True, False),
]

ADDRESS = obj({"zip": INT, "city": STR})


def parse(doc, refs=()):
    return json_schema.parse(json.dumps(doc), refs)


@pytest.mark.parametrize("change,old,new,backward,forward", TABLE, ids=[row[0] for row in TABLE])
def test_schema_changes_follow_confluents_rules(change, old, new, backward, forward):
    o, n = parse(old), parse(new)
    assert (not n.problems_reading(o), not o.problems_reading(n)) == (backward, forward)
    assert all("\n" not in m for m in n.problems_reading(o) + o.problems_reading(n))


def test_definitions_and_references_are_compared_through_their_refs():
    old = {"type": "object", "properties": {"a": {"$ref": "#/definitions/addr"}},
           "definitions": {"addr": ADDRESS}}
    new = {"type": "object", "properties": {"a": {"$ref": "#/definitions/addr"}},
           "definitions": {"addr": obj({"zip": STR, "city": STR})}}
    assert parse(new).problems_reading(parse(old), names=("new", "old")) == [
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/a/properties/zip\' is '
        'different between the new schema and the old schema"}']
    v1 = Reference("address.json", "address", 1, "JSON", json.dumps(ADDRESS))
    v2 = Reference("address.json", "address", 2, "JSON", json.dumps(obj({"zip": NUM, "city": STR})))
    top = {"type": "object", "properties": {"a": {"$ref": "address.json"}}}
    o, n = parse(top, [v1]), parse(top, [v2])
    assert (n.problems_reading(o), len(o.problems_reading(n))) == ([], 1)  # integer -> number


def test_recursive_schemas_are_compared_without_looping():
    def tree(leaf):
        return {"$ref": "#/definitions/node", "definitions": {"node": {
            "type": "object", "properties": {"v": leaf, "kids": {"type": "array",
                                                                 "items": {"$ref": "#/definitions/node"}}}}}}
    assert parse(tree(NUM)).problems_reading(parse(tree(INT))) == []
    found = parse(tree(INT)).problems_reading(parse(tree(NUM)))
    assert found and all("TYPE_NARROWED" in m for m in found)
    assert "#/properties/v" in found[0]


@pytest.mark.parametrize("old,new,message", [
    (obj({"a": STR}), obj({"a": STR, "b": STR}),
     '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new schema has an open '
     'content model and has a property or item at path \'#/properties/b\' which is missing in the old '
     'schema"}'),
    (closed({"a": STR, "b": STR}), closed({"a": STR}),
     '{errorType:"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", description:"The new has a closed content '
     'model and is missing a property or item present at path \'#/properties/b\' in the old schema"}'),
    (obj({"a": STR}), obj({"a": STR}, ["a"]),
     '{errorType:"REQUIRED_ATTRIBUTE_ADDED", description:"The keyword at path \'#/required/a\' in the new '
     'schema is not present in the old schema"}'),
    (t("string", maxLength=9), t("string", maxLength=5),
     '{errorType:"MAX_LENGTH_DECREASED", description:"The value at path \'#/maxLength\' in the new schema is '
     'less than its value in the old schema"}'),
    ({"enum": ["a", "b"]}, {"enum": ["a"]},
     '{errorType:"ENUM_ARRAY_NARROWED", description:"An array or combined type at path \'#/enum\' has fewer '
     'elements in the new schema than the old schema"}'),
])
def test_each_difference_is_worded_as_confluent_words_it(old, new, message):
    assert parse(new).problems_reading(parse(old), names=("new", "old")) == [message]


def test_a_schema_of_another_type_is_incompatible():
    assert parse(STR).problems_reading(avro.parse('"string"')) == [
        "Incompatible because of different schema type"]
