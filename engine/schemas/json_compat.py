"""JSON Schema compatibility by Confluent's rules: a port of its ``json/diff`` package
(``SchemaDiff.compare(original, update)``, ``ObjectSchemaDiff``, ``ArraySchemaDiff``,
``CombinedSchemaDiff`` ...), with the STRICT policy's set of compatible changes.

The question is whether every document the ``original`` (the writer) accepts is accepted by
the ``update`` (the reader). Confluent diffs the schemas as the everit library loads them; the
model below loads them the same way: a schema with several applicable parts (``type`` and
``enum``, two ``type``s, an ``allOf`` beside properties) is an ``allOf`` of those parts; a list
of types is an ``anyOf``; ``integer`` and ``number`` are one kind that may require integers;
``true`` and ``{}`` accept anything, ``false`` nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any

import referencing.jsonschema
from referencing import Resource
from referencing.exceptions import Unresolvable

# the draft of a schema without "$schema" (Confluent's default)
SPEC = referencing.jsonschema.DRAFT7

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

_KEYWORDS = {  # the keywords that imply a type when "type" is absent (everit's sniffing)
    "object": ("properties", "required", "minProperties", "maxProperties", "dependencies",
               "patternProperties", "additionalProperties", "propertyNames",
               "unevaluatedProperties"),
    "array": ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "prefixItems", "unevaluatedItems", "minContains", "maxContains"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "string": ("minLength", "maxLength", "pattern", "format"),
}
_COMBINED = ("allOf", "anyOf", "oneOf")


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
        found = compare(original, update)
    except Unresolvable as e:
        return [("TYPE_CHANGED", f"#/ ($ref {e} does not resolve)")]
    return [(kind, path) for kind, path in found if kind not in COMPATIBLE]


# ---- the model: schemas as everit loads them ----

class Node:
    """One schema: ``kind`` is everit's class (empty, true, false, object, array, string,
    number, boolean, null, enum, const, combined, not, ref); ``doc`` its JSON."""

    def __init__(self, kind: str, doc: Any, **attrs: Any) -> None:
        self.kind = kind
        self.doc = doc
        self.attrs = attrs
        self.common: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["attrs"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def has_default(self) -> bool:
        return "default" in self.common

    def key(self) -> str:
        """Equal for equal schemas (Confluent collapses equal sub-schemas of a combination)."""
        flag = "i" if self.kind == "number" and self.attrs.get("integer") else ""
        return self.kind + flag + json.dumps(self.doc, sort_keys=True, default=str)


class Loader:
    """Builds nodes from JSON schemas, ``$ref``s resolved lazily through the references'
    registry (a node per JSON object and part, so that recursion meets the same nodes)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.cache: dict[tuple[int, str], Node] = {}
        self.keep: list[Any] = []  # what the cache's ids belong to

    def root(self, doc: Any) -> Node:
        return self.load(doc, self.registry.resolver_with_root(_resource(doc)))

    def load(self, doc: Any, resolver: Any, part: str = "") -> Node:
        key = (id(doc), part)
        node = self.cache.get(key)
        if node is None:
            self.keep.append(doc)
            node = self._build(doc, resolver, part)
            self.cache[key] = node
        return node

    def _build(self, doc: Any, resolver: Any, part: str) -> Node:
        if doc is True:
            return Node("true", doc)
        if doc is False:
            return Node("false", doc)
        if not isinstance(doc, dict):
            return Node("empty", doc)
        if part:
            return self._typed(part, doc, resolver)
        if isinstance(doc.get("$ref"), str):
            ref = doc["$ref"]
            return Node("ref", doc, target=lambda: self._follow(ref, resolver))
        own_id = doc.get("$id")
        if isinstance(own_id, str) and not own_id.startswith("#"):
            try:
                resolver = resolver.in_subresource(_resource(doc))
            except Exception:  # an $id referencing cannot use: the base stays
                pass
        parts: list[Node] = []
        if "enum" in doc and isinstance(doc["enum"], list):
            parts.append(Node("enum", doc, values=doc["enum"]))
        for crit in _COMBINED:
            if isinstance(doc.get(crit), list):
                subs = [self.load(x, resolver) for x in doc[crit]]
                parts.append(Node("combined", doc, criterion=crit, subs=subs))
        if "not" in doc:
            parts.append(Node("not", doc, inner=self.load(doc["not"], resolver)))
        if "const" in doc:
            parts.append(Node("const", doc, value=doc["const"]))
        t = doc.get("type")
        if isinstance(t, str):
            parts.append(self.load(doc, resolver, t))
        elif isinstance(t, list) and t:
            if len(t) == 1:
                parts.append(self.load(doc, resolver, t[0]))
            else:
                subs = [self.load(doc, resolver, x) for x in t]
                parts.append(Node("combined", doc, criterion="anyOf", subs=subs))
        elif t is None:
            for kind, words in _KEYWORDS.items():
                if any(w in doc for w in words):
                    parts.append(self.load(doc, resolver, kind))
        if not parts:
            node = Node("empty", doc)
        elif len(parts) == 1:
            node = parts[0]
        else:
            node = Node("combined", doc, criterion="allOf", subs=parts)
        node.common = {k: doc[k] for k in ("$id", "title", "description", "default") if k in doc}
        return node

    def _typed(self, t: str, doc: dict[str, Any], resolver: Any) -> Node:
        def sub(name: str) -> Node | None:
            return self.load(doc[name], resolver) if isinstance(doc.get(name), (dict, bool)) \
                else None

        if t in ("integer", "number"):
            return Node("number", doc, integer=t == "integer", maximum=_num(doc, "maximum"),
                        minimum=_num(doc, "minimum"),
                        exclusiveMaximum=_num(doc, "exclusiveMaximum"),
                        exclusiveMinimum=_num(doc, "exclusiveMinimum"),
                        multipleOf=_num(doc, "multipleOf"))
        if t == "string":
            return Node("string", doc, maxLength=_num(doc, "maxLength"),
                        minLength=_num(doc, "minLength"), pattern=doc.get("pattern"))
        if t == "object":
            props = _dict(doc, "properties")
            patterns = []
            for regex, schema in _dict(doc, "patternProperties").items():
                try:
                    patterns.append((re.compile(regex), self.load(schema, resolver)))
                except re.error:
                    continue
            deps = _dict(doc, "dependencies")
            additional = doc.get("additionalProperties")
            return Node(
                "object", doc,
                properties={k: self.load(v, resolver) for k, v in props.items()},
                required=set(doc.get("required") or ()),
                permits=additional is not False,
                additional=self.load(additional, resolver) if isinstance(additional, dict) else None,
                patterns=patterns,
                property_deps={k: set(v) for k, v in deps.items() if isinstance(v, list)},
                schema_deps={k: self.load(v, resolver) for k, v in deps.items()
                             if isinstance(v, (dict, bool))},
                maxProperties=_num(doc, "maxProperties"), minProperties=_num(doc, "minProperties"),
                unevaluated=sub("unevaluatedProperties"))
        if t == "array":
            items, prefix = doc.get("items"), doc.get("prefixItems")
            more = doc.get("additionalItems")
            if isinstance(prefix, list):  # 2020-12: prefixItems, then items for the rest
                items, more = prefix, items
            return Node(
                "array", doc,
                all_items=self.load(items, resolver) if isinstance(items, (dict, bool)) else None,
                item_list=[self.load(x, resolver) for x in items] if isinstance(items, list) else [],
                permits=more is not False,
                additional=self.load(more, resolver) if isinstance(more, dict) else None,
                maxItems=_num(doc, "maxItems"), minItems=_num(doc, "minItems"),
                unique=doc.get("uniqueItems") is True,
                maxContains=_num(doc, "maxContains"), minContains=_num(doc, "minContains"),
                unevaluated=sub("unevaluatedItems"))
        return Node(t if t in ("boolean", "null") else "empty", doc)

    def _follow(self, ref: str, resolver: Any) -> Node:
        resolved = resolver.lookup(ref)
        return self.load(resolved.contents, resolved.resolver)


def _resource(doc: Any) -> Resource[Any]:
    return Resource.from_contents(doc, default_specification=SPEC)


def _dict(doc: dict[str, Any], name: str) -> dict[str, Any]:
    v = doc.get(name)
    return v if isinstance(v, dict) else {}


def _num(doc: dict[str, Any], name: str) -> Any:
    v = doc.get(name)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ---- the diff ----

class Context:
    """Confluent's ``diff.Context``: the path, the differences found, and (shared by every
    sub-context) the memo of compared pairs, the pairs in progress (a cycle: optimistically
    compatible) and the pairs a previous pass found incompatible."""

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


def compare(original: Node, update: Node) -> list[tuple[str, str]]:
    """``SchemaDiff.compare``: passes until the pairs found incompatible stop changing (a
    recursive schema's cycles are first assumed compatible)."""
    seed: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}
    while True:
        shared: dict[str, Any] = {"memo": {}, "busy": set(), "seed": seed, "optimistic": False}
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
    o, u = _deref(original), _deref(update)
    ctx.add_rebased(ctx.memoized(o, u, lambda sub: _types(sub, o, u)))


def _deref(node: Node) -> Node:
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
    compare_kind = _BY_KIND.get(o.kind)
    if compare_kind is not None:
        compare_kind(ctx, o, u)


def _connect_type(node: Node) -> Any:
    return node.doc.get("connect.type") if isinstance(node.doc, dict) else None


def _bound(ctx: Context, name: str, o: Any, u: Any, prefix: str) -> None:
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


def _string(ctx: Context, o: Node, u: Node) -> None:
    _bound(ctx, "maxLength", o.maxLength, u.maxLength, "MAX_LENGTH")
    _bound(ctx, "minLength", o.minLength, u.minLength, "MIN_LENGTH")
    if o.pattern is None and u.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif o.pattern is not None and u.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif o.pattern != u.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx: Context, o: Node, u: Node) -> None:
    _bound(ctx, "maximum", o.maximum, u.maximum, "MAXIMUM")
    _bound(ctx, "minimum", o.minimum, u.minimum, "MINIMUM")
    _bound(ctx, "exclusiveMaximum", o.exclusiveMaximum, u.exclusiveMaximum, "EXCLUSIVE_MAXIMUM")
    _bound(ctx, "exclusiveMinimum", o.exclusiveMinimum, u.exclusiveMinimum, "EXCLUSIVE_MINIMUM")
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


def _not(ctx: Context, o: Node, u: Node) -> None:
    with ctx.enter("not"):
        sub = ctx.sub()
        diff(sub, u.inner, o.inner)  # reversed: what must not match
        ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")


def _combined(ctx: Context, o: Node, u: Node) -> None:
    same = o.criterion == u.criterion
    if not same:
        extended = (u.criterion == "anyOf" or (len(o.subs) == 1 and len(u.subs) == 1)
                    or (len(o.subs) == 1 and u.criterion == "oneOf")
                    or (len(u.subs) == 1 and o.criterion == "allOf"))
        ctx.add("COMBINED_TYPE_EXTENDED" if extended else "COMBINED_TYPE_CHANGED")
        if not extended:
            return
    olist, ulist = _distinct(o.subs), _distinct(u.subs)
    if len(olist) < len(ulist):
        ctx.add("PRODUCT_TYPE_EXTENDED" if u.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olist) > len(ulist):
        ctx.add("SUM_TYPE_NARROWED" if o.criterion in ("anyOf", "oneOf")
                else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, x in enumerate(olist):
        with ctx.enter(f"{o.criterion}/{i}"):
            for j, y in enumerate(ulist):
                sub = ctx.sub()
                diff(sub, x, y)
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.diffs
    matching = _max_matching(edges, len(olist))
    for i, j in sorted(matching.items()):
        ctx.diffs += edges[i][j]
    if len(matching) < min(len(olist), len(ulist)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(nodes: list[Node]) -> list[Node]:
    seen: dict[str, Node] = {}
    for n in nodes:
        seen.setdefault(n.key(), n)
    return list(seen.values())


def _max_matching(edges: dict[int, dict[int, Any]], left: int) -> dict[int, int]:
    """A maximum bipartite matching (augmenting paths), as ``{left: right}``."""
    owner: dict[int, int] = {}  # right -> left

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in owner.items()}


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
                            if _deref(u.properties[name]).has_default or
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
    with ctx.enter("additionalProperties"):
        if o.permits != u.permits:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if u.permits else "ADDITIONAL_PROPERTIES_REMOVED")
        elif o.additional is None and u.additional is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif u.additional is None and o.additional is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            diff(ctx, o.additional, u.additional)
    _unevaluated(ctx, o.unevaluated, u.unevaluated, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _bound(ctx, "maxProperties", o.maxProperties, u.maxProperties, "MAX_PROPERTIES")
    _bound(ctx, "minProperties", o.minProperties, u.minProperties, "MIN_PROPERTIES")


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
        elif was is not None and _deref(was).kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        return
    if was is None:  # added: only the original's content model counts
        required = name in u.required
        with_default = now.has_default or _deref(now).has_default
        if _open(o):
            if _deref(now).kind == "empty" or _deref(now).kind == "true":
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
    with ctx.enter("additionalItems"):
        if o.permits != u.permits:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if o.permits else "ADDITIONAL_ITEMS_ADDED")
        elif o.additional is None and u.additional is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif u.additional is None and o.additional is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            diff(ctx, o.additional, u.additional)
    _unevaluated(ctx, o.unevaluated, u.unevaluated, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _bound(ctx, "maxItems", o.maxItems, u.maxItems, "MAX_ITEMS")
    _bound(ctx, "minItems", o.minItems, u.minItems, "MIN_ITEMS")
    if o.unique != u.unique:
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    _bound(ctx, "maxContains", o.maxContains, u.maxContains, "MAX_CONTAINS")
    _bound(ctx, "minContains", o.minContains, u.minContains, "MIN_CONTAINS")


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
    elif _deref(was).kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: Context, o: Node, now: Node) -> None:
    if _open(o):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if _deref(now).kind in ("empty", "true") else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
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


_BY_KIND: dict[str, Callable[[Context, Node, Node], None]] = {
    "string": _string, "number": _number, "const": _const, "enum": _enum,
    "combined": _combined, "not": _not, "object": _object, "array": _array,
}


# ---- Confluent's words (json.diff.Difference.error) ----

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
