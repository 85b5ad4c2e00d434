"""JSON Schema as Confluent's compatibility check reads it: the everit library's model of a
schema (``Node``) and a ``Loader`` building it, ``$ref``s resolved lazily through the
references' registry.

A schema with several applicable parts (``type`` and ``enum``, two ``type``s, an ``allOf``
beside properties) is an ``allOf`` of those parts; a list of types is an ``anyOf``;
``integer`` and ``number`` are one kind that may require integers; ``true`` and ``{}`` accept
anything, ``false`` nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import referencing.jsonschema
from referencing import Resource

# the draft of a schema without "$schema" (Confluent's default)
SPEC = referencing.jsonschema.DRAFT7

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
