"""Confluent's JSON Schema diff rules for strings, numbers, ``const`` and ``enum``
(``StringSchemaDiff``, ``NumberSchemaDiff``, ``EnumSchemaDiff``...): bounds, patterns,
``multipleOf``, integer against number, the values listed."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from .json_diff import Context, Rule, bound
from .json_model import Node


def _string(ctx: Context, o: Node, u: Node) -> None:
    bound(ctx, "maxLength", o.maxLength, u.maxLength, "MAX_LENGTH")
    bound(ctx, "minLength", o.minLength, u.minLength, "MIN_LENGTH")
    if o.pattern is None and u.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif o.pattern is not None and u.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif o.pattern != u.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx: Context, o: Node, u: Node) -> None:
    bound(ctx, "maximum", o.maximum, u.maximum, "MAXIMUM")
    bound(ctx, "minimum", o.minimum, u.minimum, "MINIMUM")
    bound(ctx, "exclusiveMaximum", o.exclusiveMaximum, u.exclusiveMaximum, "EXCLUSIVE_MAXIMUM")
    bound(ctx, "exclusiveMinimum", o.exclusiveMinimum, u.exclusiveMinimum, "EXCLUSIVE_MINIMUM")
    om, um = _decimal(o.multipleOf), _decimal(u.multipleOf)
    if om != um:
        if om is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif um is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif om != 0 and um % om == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif um != 0 and om % um == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if o.integer != u.integer:
        ctx.add("TYPE_EXTENDED" if o.integer else "TYPE_NARROWED")


def _decimal(v: Any) -> Decimal | None:
    if v is None:
        return None
    try:
        return Decimal(str(v))
    except InvalidOperation:
        return None


def _values(values: Any) -> set[str]:
    return {json.dumps(v, sort_keys=True) for v in values}


def _const(ctx: Context, o: Node, u: Node) -> None:
    if _values([o.value]) != _values([u.value]):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _enum(ctx: Context, o: Node, u: Node) -> None:
    ov, uv = _values(o.values), _values(u.values)
    if ov != uv:
        if uv >= ov:
            ctx.add("ENUM_ARRAY_EXTENDED", "enum")
        elif ov >= uv:
            ctx.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            ctx.add("ENUM_ARRAY_CHANGED", "enum")


RULES: dict[str, Rule] = {"string": _string, "number": _number, "const": _const, "enum": _enum}
