"""Confluent's words for a JSON Schema difference (``json.diff.Difference.error``)."""

from __future__ import annotations

_ADDED_OR_REMOVED = frozenset("""MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED
EXCLUSIVE_MINIMUM_ADDED MULTIPLE_OF_ADDED MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED
REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED
DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED MIN_ITEMS_ADDED MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED
UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED
UNEVALUATED_PROPERTIES_REMOVED UNEVALUATED_ITEMS_REMOVED""".split())
_INCREASED = frozenset("""MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED
MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED""".split())
_DECREASED = frozenset("""MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED
MAX_CONTAINS_DECREASED EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED""".split())
_CHANGED = frozenset("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED".split())
_NARROWED = frozenset("""ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED
ADDITIONAL_PROPERTIES_NARROWED UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED""".split())
_EXTENDED = frozenset("""DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED
NOT_TYPE_EXTENDED""".split())
_TYPE = frozenset("""TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED
COMBINED_TYPE_SUBSCHEMAS_CHANGED ENUM_ARRAY_CHANGED""".split())
_ADDED_TO_OPEN = frozenset("""REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL
OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL""".split())


def message(kind: str, path: str, reader: str = "reader", writer: str = "writer") -> str:
    """A difference as Confluent's ``Difference.toString`` words it; ``reader`` and ``writer``
    name the two schemas (Confluent fills in "new" and "old")."""
    r, w, p = reader, writer, path
    if kind in _ADDED_OR_REMOVED:
        text = f"The keyword at path '{p}' in the {r} schema is not present in the {w} schema"
    elif kind in _INCREASED:
        text = f"The value at path '{p}' in the {r} schema is more than its value in the {w} schema"
    elif kind in _DECREASED:
        text = f"The value at path '{p}' in the {r} schema is less than its value in the {w} schema"
    elif kind in _CHANGED:
        text = f"The value at path '{p}' is different between the {r} and {w} schema"
    elif kind in _NARROWED:
        text = (f"An array or combined type at path '{p}' has fewer elements in the {r} schema "
                f"than the {w} schema")
    elif kind in _EXTENDED:
        text = (f"An array or combined type at path '{p}' has more elements in the {r} schema "
                f"than the {w} schema")
    elif kind in _TYPE:
        text = f"A type at path '{p}' is different between the {r} schema and the {w} schema"
    elif kind in _ADDED_TO_OPEN:
        text = (f"The {r} schema has an open content model and has a property or item at path "
                f"'{p}' which is missing in the {w} schema")
    elif kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        text = (f"The {r} schema has an unopen content model and has a required property at "
                f"path '{p}' which is missing in the {w} schema")
    elif kind in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
        text = (f"The {r} has a closed content model and is missing a property or item present "
                f"at path '{p}' in the {w} schema")
    elif kind in ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                  "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        text = (f"A property or item is missing in the {r} schema but present at path '{p}' in "
                f"the {w} schema and is not covered by its partially open content model")
    elif kind in ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                  "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        text = (f"The {r} schema has a property or item at path '{p}' which is missing in the "
                f"{w} schema and is not covered by its partially open content model")
    else:
        text = f"{kind.lower().replace('_', ' ')} at path '{p}'"
    return f'{{errorType:"{kind}", description:"{text}"}}'
