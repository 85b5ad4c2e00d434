"""Confluent's JSON Schema diff rules for objects and arrays (``ObjectSchemaDiff``,
``ArraySchemaDiff``): properties and items added or removed under open, closed and partially
open content models, ``required``, dependencies, additional and unevaluated properties or
items, the size bounds."""

from __future__ import annotations

from .json_diff import Context, Rule, bound, deref, diff
from .json_model import Node


def _open(node: Node) -> bool:
    """``ObjectSchemaDiff.isOpenContentModel`` (and the array one): anything else allowed."""
    if not node.permits or node.additional is not None:
        return False
    if node.kind == "object" and node.patterns:
        return False
    return node.unevaluated is None or node.unevaluated.kind in ("empty", "true")


def _partial(node: Node, name: str | None = None) -> Node | None:
    """The schema a partially open content model gives to an unlisted property (or item)."""
    if name is not None:
        for regex, schema in node.patterns:
            if regex.search(name):
                return schema
    if node.additional is not None:
        return node.additional
    uneval = node.unevaluated
    if node.permits and uneval is not None and uneval.kind not in ("false", "empty", "true"):
        return uneval
    return None


def _object(ctx: Context, o: Node, u: Node) -> None:
    with ctx.enter("required"):
        for name in o.properties:
            if name in u.properties:
                was, now = name in o.required, name in u.required
                if was and not now:
                    ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
                elif now and not was:
                    ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                            if deref(u.properties[name]).has_default or
                            u.properties[name].has_default else "REQUIRED_ATTRIBUTE_ADDED", name)
    with ctx.enter("properties"):
        for name in list(o.properties) + [k for k in u.properties if k not in o.properties]:
            with ctx.enter(name):
                _property(ctx, o, u, name)
    with ctx.enter("dependencies"):
        for name in list(o.property_deps) + [k for k in u.property_deps if k not in o.property_deps]:
            with ctx.enter(name):
                was, now = o.property_deps.get(name), u.property_deps.get(name)
                if now is None:
                    ctx.add("DEPENDENCY_ARRAY_REMOVED")
                elif was is None:
                    ctx.add("DEPENDENCY_ARRAY_ADDED")
                elif was != now:
                    ctx.add("DEPENDENCY_ARRAY_EXTENDED" if now >= was else
                            "DEPENDENCY_ARRAY_NARROWED" if was >= now else "DEPENDENCY_ARRAY_CHANGED")
        for name in list(o.schema_deps) + [k for k in u.schema_deps if k not in o.schema_deps]:
            with ctx.enter(name):
                was_s, now_s = o.schema_deps.get(name), u.schema_deps.get(name)
                if now_s is None:
                    ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                elif was_s is None:
                    ctx.add("DEPENDENCY_SCHEMA_ADDED")
                else:
                    diff(ctx, was_s, now_s)
    _additional(ctx, o, u, "additionalProperties", "ADDITIONAL_PROPERTIES")
    _unevaluated(ctx, o.unevaluated, u.unevaluated, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    bound(ctx, "maxProperties", o.maxProperties, u.maxProperties, "MAX_PROPERTIES")
    bound(ctx, "minProperties", o.minProperties, u.minProperties, "MIN_PROPERTIES")


def _additional(ctx: Context, o: Node, u: Node, key: str, kind: str) -> None:
    """``additionalProperties`` / ``additionalItems``: allowed or not, then its schema."""
    with ctx.enter(key):
        if o.permits != u.permits:
            ctx.add(f"{kind}_ADDED" if u.permits else f"{kind}_REMOVED")
        elif o.additional is None and u.additional is not None:
            ctx.add(f"{kind}_NARROWED")
        elif u.additional is None and o.additional is not None:
            ctx.add(f"{kind}_EXTENDED")
        else:
            diff(ctx, o.additional, u.additional)


def _property(ctx: Context, o: Node, u: Node, name: str) -> None:
    was, now = o.properties.get(name), u.properties.get(name)
    if now is None:  # removed: only the update's content model counts
        if _open(u):
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _partial(u, name)
        if partial is not None:
            sub = ctx.sub()
            diff(sub, was, partial)
            ctx.diffs += sub.diffs
            ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                    else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif was is not None and deref(was).kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        return
    if was is None:  # added: only the original's content model counts
        required = name in u.required
        with_default = now.has_default or deref(now).has_default
        if _open(o):
            if deref(now).kind == "empty" or deref(now).kind == "true":
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            elif required:
                ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if with_default
                        else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _partial(o, name)
        if partial is not None:
            sub = ctx.sub()
            diff(sub, partial, now)
            ctx.diffs += sub.diffs
            ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if with_default
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        return
    diff(ctx, was, now)


def _unevaluated(ctx: Context, o: Node | None, u: Node | None, word: str, prefix: str) -> None:
    if o is None and u is None:
        return
    with ctx.enter(word):
        if o is None:
            ctx.add(f"{prefix}_REMOVED" if u is not None and u.kind == "false" else f"{prefix}_NARROWED")
        elif u is None:
            ctx.add(f"{prefix}_ADDED" if o.kind == "false" else f"{prefix}_EXTENDED")
        elif o.kind == "false" and u.kind != "false":
            ctx.add(f"{prefix}_ADDED")
        elif o.kind != "false" and u.kind == "false":
            ctx.add(f"{prefix}_REMOVED")
        elif o.kind in ("empty", "true") and u.kind not in ("empty", "true"):
            ctx.add(f"{prefix}_NARROWED")
        elif o.kind not in ("empty", "true") and u.kind in ("empty", "true"):
            ctx.add(f"{prefix}_EXTENDED")
        else:
            diff(ctx, o, u)


def _array(ctx: Context, o: Node, u: Node) -> None:
    with ctx.enter("items"):
        diff(ctx, o.all_items, u.all_items)
    n = min(len(o.item_list), len(u.item_list))
    for i in range(max(len(o.item_list), len(u.item_list))):
        with ctx.enter(f"items/{i}"):
            if i < n:
                diff(ctx, o.item_list[i], u.item_list[i])
            elif i < len(o.item_list):
                _item_removed(ctx, o.item_list[i], u)
            else:
                _item_added(ctx, o, u.item_list[i])
    _additional(ctx, o, u, "additionalItems", "ADDITIONAL_ITEMS")
    _unevaluated(ctx, o.unevaluated, u.unevaluated, "unevaluatedItems", "UNEVALUATED_ITEMS")
    bound(ctx, "maxItems", o.maxItems, u.maxItems, "MAX_ITEMS")
    bound(ctx, "minItems", o.minItems, u.minItems, "MIN_ITEMS")
    if o.unique != u.unique:
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    bound(ctx, "maxContains", o.maxContains, u.maxContains, "MAX_CONTAINS")
    bound(ctx, "minContains", o.minContains, u.minContains, "MIN_CONTAINS")


def _item_removed(ctx: Context, was: Node, u: Node) -> None:
    if _open(u):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial(u)
    if partial is not None:
        sub = ctx.sub()
        diff(sub, was, partial)
        ctx.diffs += sub.diffs
        ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif deref(was).kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: Context, o: Node, now: Node) -> None:
    if _open(o):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if deref(now).kind in ("empty", "true") else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial(o)
    if partial is not None:
        sub = ctx.sub()
        diff(sub, partial, now)
        ctx.diffs += sub.diffs
        ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


RULES: dict[str, Rule] = {"object": _object, "array": _array}
