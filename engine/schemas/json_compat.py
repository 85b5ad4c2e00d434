"""JSON Schema compatibility by Confluent's rules: a port of its ``json/diff`` package
(``SchemaDiff.compare(original, update)``, ``ObjectSchemaDiff``, ``ArraySchemaDiff``,
``CombinedSchemaDiff`` ...), with the STRICT policy's set of compatible changes.

The question is whether every document the ``original`` (the writer) accepts is accepted by
the ``update`` (the reader). Confluent diffs the schemas as the everit library loads them
(``json_model``); ``json_diff`` walks the two, handing each pair of one kind to its rules
(``json_diff_scalars``, ``json_diff_combined``, ``json_diff_content``); ``json_messages``
words what it finds.
"""

from __future__ import annotations

from typing import Any

from referencing.exceptions import Unresolvable

from . import json_diff_combined, json_diff_content, json_diff_scalars
from .json_diff import COMPATIBLE, Rule, compare
from .json_messages import message
from .json_model import Loader

_RULES: dict[str, Rule] = {**json_diff_scalars.RULES, **json_diff_combined.RULES,
                           **json_diff_content.RULES}


def problems(writer: Any, reader: Any, names: tuple[str, str] = ("reader", "writer")
             ) -> list[str]:
    """The incompatible differences from ``writer`` (a ``JsonSchema``: the original) to
    ``reader`` (the update), one message each, as Confluent words them."""
    return [message(kind, path, *names) for kind, path in incompatible(writer, reader)]


def incompatible(writer: Any, reader: Any) -> list[tuple[str, str]]:
    """``(difference type, JSON path)`` of each incompatible difference."""
    original = Loader(writer.registry).root(writer.doc)
    update = Loader(reader.registry).root(reader.doc)
    try:
        found = compare(original, update, _RULES)
    except Unresolvable as e:
        return [("TYPE_CHANGED", f"#/ ($ref {e} does not resolve)")]
    return [(kind, path) for kind, path in found if kind not in COMPATIBLE]
