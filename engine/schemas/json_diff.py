"""The walk of Confluent's ``json/diff`` package (``SchemaDiff.compare(original, update)``):
the context of a comparison (path, differences, the memo of compared pairs, cycles), the
passes until a recursive schema's verdict settles, the type and common-keyword checks, and
the hand-off to the rules of each kind (``json_diff_scalars``, ``json_diff_combined``,
``json_diff_content``, gathered by ``json_compat``), with the STRICT policy's set of
compatible changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .json_model import Node

# SchemaDiff.COMPATIBLE_CHANGES_STRICT
COMPATIBLE = frozenset("""
ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED
EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED
MULTIPLE_OF_REMOVED REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED
MAX_PROPERTIES_INCREASED MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED MAX_CONTAINS_INCREASED
MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED UNIQUE_ITEMS_REMOVED
ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_EXTENDED
ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED
""".split())


class Context:
    """Confluent's ``diff.Context``: the path, the differences found, and (shared by every
    sub-context) the memo of compared pairs, the pairs in progress (a cycle: optimistically
    compatible), the pairs a previous pass found incompatible, and the rules by kind."""

    def __init__(self, shared: dict[str, Any], path: list[str] | None = None) -> None:
        self.shared = shared
        self.path = list(path or [])
        self.diffs: list[tuple[str, str]] = []

    def sub(self) -> Context:
        return Context(self.shared, self.path)

    def where(self) -> str:
        return "#/" + "/".join(self.path)

    def add(self, kind: str, attribute: str | None = None) -> None:
        if attribute is None:
            self.diffs.append((kind, self.where()))
        else:
            with self.enter(attribute):
                self.diffs.append((kind, self.where()))

    @contextmanager
    def enter(self, name: str) -> Iterator[None]:
        self.path.append(name)
        try:
            yield
        finally:
            self.path.pop()

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.diffs)

    def memoized(self, original: Node, update: Node, compare: Callable[[Context], None]
                 ) -> list[tuple[str, str]]:
        key = (id(original), id(update))
        memo, busy = self.shared["memo"], self.shared["busy"]
        if key in memo:
            return list(memo[key])
        if key in busy:
            seeded = self.shared["seed"].get(key)
            if seeded is not None:
                return list(seeded)
            self.shared["optimistic"] = True
            return []
        busy.add(key)
        try:
            sub = Context(self.shared)
            compare(sub)
            memo[key] = tuple(sub.diffs)
            return list(sub.diffs)
        finally:
            busy.discard(key)

    def add_rebased(self, diffs: list[tuple[str, str]]) -> None:
        if not self.path:
            self.diffs += diffs
            return
        prefix = self.where()
        self.diffs += [(k, prefix if len(p) <= 2 else f"{prefix}/{p[2:]}") for k, p in diffs]


Rule = Callable[[Context, Node, Node], None]  # the comparison of two nodes of one kind


def compare(original: Node, update: Node, rules: dict[str, Rule]) -> list[tuple[str, str]]:
    """``SchemaDiff.compare``: passes until the pairs found incompatible stop changing (a
    recursive schema's cycles are first assumed compatible); ``rules`` compare two nodes
    of one kind, by kind."""
    seed: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}
    while True:
        shared: dict[str, Any] = {"memo": {}, "busy": set(), "seed": seed, "optimistic": False,
                                  "rules": rules}
        ctx = Context(shared)
        diff(ctx, original, update)
        bad = {k: v for k, v in shared["memo"].items()
               if any(kind not in COMPATIBLE for kind, _ in v)}
        if not shared["optimistic"] or bad.keys() == seed.keys():
            return ctx.diffs
        seed = bad


def diff(ctx: Context, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    o, u = deref(original), deref(update)
    ctx.add_rebased(ctx.memoized(o, u, lambda sub: _types(sub, o, u)))


def deref(node: Node) -> Node:
    seen = 0
    while node.kind == "ref":
        node = node.target()
        seen += 1
        if seen > 100:
            raise RecursionError("a $ref cycle")
    return node


def _types(ctx: Context, o: Node, u: Node) -> None:
    if o.kind != "combined" and u.kind == "combined":
        if len(u.subs) == 1:
            sub = ctx.sub()
            diff(sub, o, u.subs[0])
            if sub.compatible():
                ctx.diffs += sub.diffs
                return
        elif u.criterion in ("anyOf", "oneOf"):
            for x in u.subs:
                sub = ctx.sub()
                diff(sub, o, x)
                if sub.compatible():
                    ctx.diffs += sub.diffs
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif o.kind == "combined" and u.kind != "combined":
        if len(o.subs) == 1:
            sub = ctx.sub()
            diff(sub, o.subs[0], u)
            if sub.compatible():
                ctx.diffs += sub.diffs
                return
        elif o.criterion == "allOf":
            for x in o.subs:
                sub = ctx.sub()
                diff(sub, x, u)
                if sub.compatible():
                    ctx.diffs += sub.diffs
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return
    if o.kind != u.kind:
        if o.kind == "false" or u.kind in ("empty", "true"):
            return
        if _connect_type(o) == "bytes" and _connect_type(u) == "bytes":
            return
        ctx.add("TYPE_CHANGED")
        return
    for word, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                       ("description", "DESCRIPTION_CHANGED"), ("default", "DEFAULT_CHANGED")):
        if o.common.get(word) != u.common.get(word):
            ctx.add(kind)
    compare_kind = ctx.shared["rules"].get(o.kind)
    if compare_kind is not None:
        compare_kind(ctx, o, u)


def _connect_type(node: Node) -> Any:
    return node.doc.get("connect.type") if isinstance(node.doc, dict) else None


def bound(ctx: Context, name: str, o: Any, u: Any, prefix: str) -> None:
    """A numeric keyword added, removed, increased or decreased: ``<PREFIX>_ADDED`` ..."""
    if o == u:
        return
    if o is None:
        ctx.add(f"{prefix}_ADDED", name)
    elif u is None:
        ctx.add(f"{prefix}_REMOVED", name)
    elif o < u:
        ctx.add(f"{prefix}_INCREASED", name)
    elif o > u:
        ctx.add(f"{prefix}_DECREASED", name)
