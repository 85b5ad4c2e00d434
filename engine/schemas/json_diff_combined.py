"""Confluent's JSON Schema diff rules for sum and product types and ``not``
(``CombinedSchemaDiff``, ``NotSchemaDiff``): the criterion changed, sub-schemas added or
removed, each original sub-schema matched to a compatible update (a maximum bipartite
matching)."""

from __future__ import annotations

from typing import Any

from .json_diff import Context, Rule, diff
from .json_model import Node


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


RULES: dict[str, Rule] = {"combined": _combined, "not": _not}
