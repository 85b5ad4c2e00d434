"""Kafka's ACL model: bindings, filters, and the authorizer's decision.

A binding (``Acl``) says: ``principal`` from ``host`` is allowed (or denied) ``operation`` on
the resources of ``resource_type`` named ``name`` (LITERAL: exactly, or every one when the
name is ``*``; PREFIXED: every name starting with it). The decision (``Authorizer``) is
Kafka's (``StandardAuthorizer``): a super user may do anything; a matching DENY for the
operation or for ALL refuses; a matching ALLOW for the operation, for ALL, or for an
operation that implies it (Read, Write, Delete and Alter imply Describe; AlterConfigs implies
DescribeConfigs) permits; a resource with no binding at all (of anyone) is allowed only when
``allow.everyone.if.no.acl.found``; anything else is refused.

Lookups are indexed: by resource type, then the literal name (a dict), the prefixes present
(one dict lookup per distinct prefix length, not a scan), then the principal: a check reads
only the bindings that can match it, whatever the number of bindings."""

from __future__ import annotations

import bisect
import ipaddress
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from .results import AclInfo

# Kafka's codes (org.apache.kafka.common.resource / acl): the wire carries these numbers
RESOURCE_TYPES = {"Unknown": 0, "Any": 1, "Topic": 2, "Group": 3, "Cluster": 4,
                  "TransactionalId": 5, "DelegationToken": 6, "User": 7}
PATTERN_TYPES = {"Unknown": 0, "Any": 1, "Match": 2, "Literal": 3, "Prefixed": 4}
OPERATIONS = {"Unknown": 0, "Any": 1, "All": 2, "Read": 3, "Write": 4, "Create": 5,
              "Delete": 6, "Alter": 7, "Describe": 8, "ClusterAction": 9,
              "DescribeConfigs": 10, "AlterConfigs": 11, "IdempotentWrite": 12,
              "CreateTokens": 13, "DescribeTokens": 14}
PERMISSIONS = {"Unknown": 0, "Any": 1, "Deny": 2, "Allow": 3}

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "Topic", "Group", "Cluster", "TransactionalId"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
CACHE_MAX = 16384  # answers an Authorizer remembers (bounded: a flood of names churns it)
ANY_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
LITERAL, PREFIXED = "Literal", "Prefixed"
ALLOW, DENY = "Allow", "Deny"
# the operations a binding of each resource type can grant (kafka-acls refuses the others)
VALID_OPERATIONS = {
    TOPIC: ("Read", "Write", "Create", "Delete", "Alter", "Describe", "DescribeConfigs",
            "AlterConfigs", "All"),
    GROUP: ("Read", "Delete", "Describe", "All"),
    CLUSTER: ("Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
              "Alter", "Describe", "All"),
    TRANSACTIONAL_ID: ("Describe", "Write", "All"),
    "DelegationToken": ("Describe", "All"),
    "User": ("CreateTokens", "DescribeTokens", "All"),
}
# what an ALLOW of each operation also permits (Kafka's AclEntry.supportedOperations rule)
IMPLIED_BY = {"Describe": ("Describe", "Read", "Write", "Delete", "Alter", "All"),
              "DescribeConfigs": ("DescribeConfigs", "AlterConfigs", "All")}

_RT = {k.lower(): k for k in RESOURCE_TYPES} | {"transactional-id": TRANSACTIONAL_ID,
                                                "transactional_id": TRANSACTIONAL_ID,
                                                "delegation-token": "DelegationToken"}
_PT = {k.lower(): k for k in PATTERN_TYPES}
_OP = {k.lower(): k for k in OPERATIONS} | {"cluster-action": "ClusterAction",
                                            "describe-configs": "DescribeConfigs",
                                            "alter-configs": "AlterConfigs",
                                            "idempotent-write": "IdempotentWrite"}
_PERM = {k.lower(): k for k in PERMISSIONS}


def _name(table: dict[str, str], codes: dict[str, int], what: str, v: Any) -> str:
    """A Kafka enum value by name (any case, Kafka's or kafka-acls' spelling) or number."""
    if isinstance(v, int) and not isinstance(v, bool):
        for k, n in codes.items():
            if n == v:
                return k
    elif isinstance(v, str):
        got = table.get(v.replace("_", "").lower()) or table.get(v.lower())
        if got is not None:
            return got
    raise InvalidArgument(f"unknown {what} {v!r}; valid: {', '.join(codes)}")


def resource_type(v: Any) -> str:
    return _name(_RT, RESOURCE_TYPES, "resource type", v)


def pattern_type(v: Any) -> str:
    return _name(_PT, PATTERN_TYPES, "resource pattern type", v)


def operation(v: Any) -> str:
    return _name(_OP, OPERATIONS, "operation", v)


def permission(v: Any) -> str:
    return _name(_PERM, PERMISSIONS, "permission type", v)


def principal(v: str) -> str:
    """``Type:name`` (``User:alice``); refused without the type, as Kafka does."""
    if not isinstance(v, str) or ":" not in v or not v.partition(":")[0] or \
            not v.partition(":")[2] or len(v) > 1024 or not v.isprintable():
        raise InvalidArgument(f"principal {v!r} is not Type:name; write it as User:alice "
                              "(User:* for every user)")
    return v


def host(v: str) -> str:
    """``*`` or an IP address (Kafka's ACL hosts are addresses, not host names)."""
    if v == WILDCARD:
        return v
    try:
        return str(ipaddress.ip_address(v))
    except ValueError:
        raise InvalidArgument(f"ACL host {v!r} is not an IP address; give one, or * for "
                              "any host") from None


@dataclass(frozen=True, order=True)
class Acl:
    """One binding, in Kafka's words (``Topic``, ``Literal``, ``Read``, ``Allow``)."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    @classmethod
    def make(cls, resource_type_: Any, name: str, pattern_type_: Any, principal_: str,
             host_: str, operation_: Any, permission_: Any) -> Acl:
        """A binding from names or Kafka's codes, each value checked (InvalidArgument)."""
        rt = resource_type(resource_type_)
        if rt in ("Any", "Unknown"):
            raise InvalidArgument(f"an ACL is for one resource type, not {rt}: name Topic, "
                                  "Group, Cluster or TransactionalId")
        pt = pattern_type(pattern_type_)
        if pt not in (LITERAL, PREFIXED):
            raise InvalidArgument(f"an ACL's pattern type is Literal or Prefixed, not {pt}")
        if not isinstance(name, str) or not name or len(name) > 1024 or not name.isprintable():
            raise InvalidArgument(f"resource name {name!r} is empty or not printable: name the "
                                  "resource (or * for every one)")
        if rt == CLUSTER and (name != CLUSTER_NAME or pt != LITERAL):
            raise InvalidArgument(f"the Cluster resource is named {CLUSTER_NAME} (Literal)")
        if pt == PREFIXED and name == WILDCARD:
            raise InvalidArgument("a Prefixed pattern of * matches only names starting with "
                                  "*: use a Literal * for every resource")
        op = operation(operation_)
        if op not in VALID_OPERATIONS.get(rt, ()):
            raise InvalidArgument(f"operation {op} does not apply to a {rt}; valid: "
                                  f"{', '.join(VALID_OPERATIONS.get(rt, ()))}")
        perm = permission(permission_)
        if perm not in (ALLOW, DENY):
            raise InvalidArgument(f"an ACL's permission is Allow or Deny, not {perm}")
        return cls(rt, name, pt, principal(principal_), host(host_), op, perm)

    def to_json(self) -> AclInfo:
        return {"resource_type": self.resource_type, "name": self.name,
                "pattern_type": self.pattern_type, "principal": self.principal,
                "host": self.host, "operation": self.operation, "permission": self.permission}


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None is any value; ``pattern_type`` Any
    selects both kinds, Match the bindings that apply to the resource ``name`` (its literal,
    the wildcard, its prefixes)."""

    resource_type: str = "Any"
    name: str | None = None
    pattern_type: str = "Any"
    principal: str | None = None
    host: str | None = None
    operation: str = "Any"
    permission: str = "Any"

    @classmethod
    def make(cls, resource_type_: Any = "Any", name: str | None = None,
             pattern_type_: Any = "Any", principal_: str | None = None,
             host_: str | None = None, operation_: Any = "Any", permission_: Any = "Any"
             ) -> AclFilter:
        pt = pattern_type(pattern_type_)
        if pt == "Unknown":
            raise InvalidArgument("an ACL filter's pattern type is Any, Match, Literal or "
                                  "Prefixed")
        return cls(resource_type(resource_type_), name, pt, principal_, host_,
                   operation(operation_), permission(permission_))

    def matches(self, a: Acl) -> bool:
        if self.resource_type != "Any" and a.resource_type != self.resource_type:
            return False
        if self.principal is not None and a.principal != self.principal:
            return False
        if self.host is not None and a.host != self.host:
            return False
        if self.operation != "Any" and a.operation != self.operation:
            return False
        if self.permission != "Any" and a.permission != self.permission:
            return False
        pt, name = self.pattern_type, self.name
        if pt == "Match":
            if name is None:
                return True
            if a.pattern_type == LITERAL:
                return a.name in (name, WILDCARD)
            return name.startswith(a.name)
        if pt != "Any" and a.pattern_type != pt:
            return False
        return name is None or a.name == name


class _Index:
    """One resource type's bindings: literal name -> principal -> bindings; prefix ->
    principal -> bindings; the prefixes sorted, and each prefix's parent (the longest other
    prefix it starts with). The prefixes that apply to a name are a chain: the longest one
    (found by bisection, below) and its parents — a check costs a few bisections and the
    matches, whatever the number or the lengths of the prefixes."""

    __slots__ = ("literal", "prefixed", "sorted", "parent", "any_allow")

    def __init__(self) -> None:
        self.literal: dict[str, dict[str, list[Acl]]] = {}
        self.prefixed: dict[str, dict[str, list[Acl]]] = {}
        self.sorted: list[str] = []
        self.parent: dict[str, str | None] = {}
        # principal -> ALLOW bindings of this type (authorize_any: "Write on any topic")
        self.any_allow: dict[str, list[Acl]] = defaultdict(list)

    def add(self, a: Acl) -> None:
        table = self.literal if a.pattern_type == LITERAL else self.prefixed
        table.setdefault(a.name, {}).setdefault(a.principal, []).append(a)
        if a.permission == ALLOW:
            self.any_allow[a.principal].append(a)

    def done(self) -> None:
        self.sorted = sorted(self.prefixed)
        self.parent = {}
        for p in self.sorted:  # (in order: a parent's own parent is known by then)
            self.parent[p] = self._longest(p[:-1]) if len(p) > 1 else None

    def _longest(self, name: str) -> str | None:
        """The longest prefix that ``name`` starts with: the greatest prefix <= ``name``, or
        the first of its parents that ``name`` starts with (every prefix of ``name`` lies
        between it and ``name`` in order, so it starts that greatest one too: it is among
        that one's parents)."""
        i = bisect.bisect_right(self.sorted, name) - 1
        if i < 0:
            return None
        p: str | None = self.sorted[i]
        parent = self.parent
        while p is not None and not name.startswith(p):
            p = parent[p]
        return p

    def matching(self, name: str) -> list[dict[str, list[Acl]]]:
        """The principal tables of every pattern that applies to ``name``."""
        out = []
        lit = self.literal
        t = lit.get(name)
        if t is not None:
            out.append(t)
        if name != WILDCARD:
            t = lit.get(WILDCARD)
            if t is not None:
                out.append(t)
        if self.sorted:
            out += self.prefixes_of(name)
        return out

    def prefixes_of(self, name: str) -> list[dict[str, list[Acl]]]:
        """The principal tables of the prefixes ``name`` starts with (itself included)."""
        out = []
        pre, parent = self.prefixed, self.parent
        p = self._longest(name)
        while p is not None:
            out.append(pre[p])
            p = parent[p]
        return out


class Authorizer:
    """The decision over one set of bindings (immutable: a change builds a new one)."""

    def __init__(self, acls: Iterable[Acl], super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.acls = sorted(set(acls))
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self._by_type: dict[str, _Index] = defaultdict(_Index)
        for a in self.acls:
            self._by_type[a.resource_type].add(a)
        for ix in self._by_type.values():
            ix.done()
        # a request's answer per (principal, host, operation, type, name): one dict lookup
        # instead of the walk
        self._cache: dict[tuple[str, str, str, str, str], bool] = {}

    def __len__(self) -> int:
        return len(self.acls)

    def authorize(self, principal_: str, host_: str, op: str, rtype: str, name: str) -> bool:
        """May ``principal_`` from ``host_`` do ``op`` on the ``rtype`` named ``name``?
        (Remembered: the bindings never change, a change builds another Authorizer; at most
        ``CACHE_MAX`` answers, then they are forgotten at once.)"""
        key = (principal_, host_, op, rtype, name)
        got = self._cache.get(key)
        if got is None:
            got = self._decide(principal_, host_, op, rtype, name)
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = got
        return got

    def _decide(self, principal_: str, host_: str, op: str, rtype: str, name: str) -> bool:
        if principal_ in self.super_users:
            return True
        ix = self._by_type.get(rtype)
        tables = ix.matching(name) if ix is not None else []
        if not tables:
            return self.allow_everyone
        allowing = IMPLIED_BY.get(op, (op, "All"))
        allowed = False
        for t in tables:
            for p in (principal_, ANY_PRINCIPAL):
                for a in t.get(p, ()):
                    if a.host != WILDCARD and a.host != host_:
                        continue
                    if a.permission == DENY:
                        if a.operation == op or a.operation == "All":
                            return False
                    elif a.operation in allowing:
                        allowed = True
        return allowed

    def authorize_any(self, principal_: str, host_: str, op: str, rtype: str) -> bool:
        """May ``principal_`` do ``op`` on some ``rtype`` (Kafka's authorizeByResourceType:
        InitProducerId of an idempotent producer asks for Write on any topic): an ALLOW
        binding for it whose resources a DENY does not wholly cover.

        First, as Kafka, the decision on a made-up name ("hardcode"): a super user, and with
        ``allow.everyone.if.no.acl.found`` a resource type whose bindings leave some name
        without any, are allowed there, so allowed here."""
        if self.authorize(principal_, host_, op, rtype, "hardcode"):
            return True
        ix = self._by_type.get(rtype)
        if ix is None:
            return False
        allowing = IMPLIED_BY.get(op, (op, "All"))
        for p in (principal_, ANY_PRINCIPAL):
            for a in ix.any_allow.get(p, ()):
                if a.operation in allowing and a.host in (WILDCARD, host_) and \
                        not self._denied_wholly(ix, principal_, host_, op, a):
                    return True
        return False

    @staticmethod
    def _denied_wholly(ix: _Index, principal_: str, host_: str, op: str, allow: Acl) -> bool:
        name = allow.name
        # (a prefixed grant is wholly denied by a Deny of * or of a prefix of its prefix)
        for t in ix.matching(name) if allow.pattern_type == LITERAL else \
                [ix.literal.get(WILDCARD, {}), *ix.prefixes_of(name)]:
            for p in (principal_, ANY_PRINCIPAL):
                for a in t.get(p, ()):
                    if a.permission == DENY and a.operation in (op, "All") and \
                            a.host in (WILDCARD, host_):
                        return True
        return False

    def select(self, f: AclFilter) -> list[Acl]:
        return [a for a in self.acls if f.matches(a)]
