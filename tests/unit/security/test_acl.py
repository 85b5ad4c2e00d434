"""Kafka's ACL model (engine/security/acl.py): the Authorizer's decision (Deny beats Allow,
implied operations, literal, prefixed and wildcard names, User:*, hosts, super users,
allow.everyone.if.no.acl.found, authorize_any), AclFilter's pattern types, and what
Acl.make refuses."""

import random

import pytest

from engine.errors import InvalidArgument
from engine.security import acl as acl_module
from engine.security.acl import (
    IMPLIED_BY,
    VALID_OPERATIONS,
    Acl,
    AclFilter,
    Authorizer,
    operation,
    pattern_type,
    resource_type,
)

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER = "10.0.0.1", "10.0.0.2"


def acl(name="orders", op="Read", perm="Allow", who=ALICE, rtype="Topic", pattern="Literal",
        host="*"):
    return Acl.make(rtype, name, pattern, who, host, op, perm)


def auth(*acls, **kw):
    return Authorizer(acls, **kw)


def may(a, op="Read", name="orders", who=ALICE, host=HOST, rtype="Topic"):
    return a.authorize(who, host, op, rtype, name)


def test_no_acl_refuses_unless_allow_everyone():
    assert not may(auth())
    assert may(auth(allow_everyone_if_no_acl_found=True))
    # an ACL on another resource leaves this one without any: still allowed to everyone
    a = auth(acl(name="other"), allow_everyone_if_no_acl_found=True)
    assert may(a) and may(a, name="other") and not may(a, name="other", who=BOB)
    # an ACL of anyone on the resource: no longer "no ACL found", even for another principal
    a = auth(acl(who=BOB), allow_everyone_if_no_acl_found=True)
    assert not may(a) and may(a, who=BOB)
    # a Deny counts too (it is an ACL on the resource)
    a = auth(acl(who=BOB, perm="Deny"), allow_everyone_if_no_acl_found=True)
    assert not may(a) and not may(a, who=BOB)


def test_allow_grants_only_its_operation_resource_and_principal():
    a = auth(acl())
    assert may(a)
    assert not may(a, op="Write")
    assert not may(a, name="orders2") and not may(a, name="order")
    assert not may(a, who=BOB)
    assert not may(a, rtype="Group")


def test_deny_beats_allow():
    a = auth(acl(), acl(perm="Deny"))
    assert not may(a)
    # a Deny of All denies every operation, whatever is allowed
    a = auth(acl(op="All"), acl(op="Write"), acl(op="All", perm="Deny"))
    assert not may(a) and not may(a, op="Write") and not may(a, op="Describe")
    # a Deny on a prefix beats an Allow on the literal name, and the other way round
    assert not may(auth(acl(), acl(name="ord", pattern="Prefixed", perm="Deny")))
    assert not may(auth(acl(name="ord", pattern="Prefixed"), acl(perm="Deny")))
    # a Deny for User:* beats alice's own Allow; a wildcard resource's Deny too
    assert not may(auth(acl(), acl(who="User:*", perm="Deny")))
    assert not may(auth(acl(), acl(name="*", perm="Deny")))
    # a Deny of another operation denies nothing else
    a = auth(acl(op="All"), acl(op="Write", perm="Deny"))
    assert may(a) and not may(a, op="Write")


@pytest.mark.parametrize("granted, implied", [
    ("Read", "Describe"), ("Write", "Describe"), ("Delete", "Describe"), ("Alter", "Describe"),
    ("AlterConfigs", "DescribeConfigs"), ("All", "Describe"), ("All", "Write"),
    ("All", "DescribeConfigs"),
])
def test_implied_operations(granted, implied):
    assert may(auth(acl(op=granted)), op=implied)


@pytest.mark.parametrize("granted, not_implied", [
    ("Describe", "Read"), ("DescribeConfigs", "AlterConfigs"), ("Read", "Write"),
    ("Write", "Read"), ("Read", "DescribeConfigs"), ("Create", "Describe"),
    ("AlterConfigs", "Describe"),
])
def test_operations_not_implied(granted, not_implied):
    assert not may(auth(acl(op=granted)), op=not_implied)


def test_an_implied_operation_is_not_denied_by_the_deny_of_what_implies_it():
    """Kafka: a Deny of Read does not deny Describe (only a Deny of Describe or All does)."""
    a = auth(acl(op="Describe"), acl(op="Read", perm="Deny"))
    assert may(a, op="Describe") and not may(a, op="Read")
    assert not may(auth(acl(op="Read"), acl(op="Describe", perm="Deny")), op="Describe")


def test_literal_prefixed_and_wildcard_names():
    a = auth(acl(name="logs-", pattern="Prefixed"))
    for name in ("logs-", "logs-a", "logs-a-b"):
        assert may(a, name=name)
    for name in ("logs", "log", "xlogs-a", "Logs-a"):
        assert not may(a, name=name)
    a = auth(acl(name="*"))
    assert may(a, name="anything") and may(a, name="*")
    # a literal "*" is the wildcard; a literal name is only itself (no glob)
    a = auth(acl(name="ord*"))
    assert not may(a, name="orders") and may(a, name="ord*")
    # several prefixes of different lengths, each found
    a = auth(acl(name="a", pattern="Prefixed", op="Read"),
             acl(name="abc-", pattern="Prefixed", op="Write"),
             acl(name="abcdef-long-", pattern="Prefixed", op="Delete"))
    assert may(a, name="abc-def-long-x") and may(a, op="Write", name="abc-d")
    assert may(a, op="Delete", name="abcdef-long-z") and not may(a, op="Delete", name="abcdef")
    assert not may(a, name="b")


def test_user_star_is_every_principal():
    a = auth(acl(who="User:*"))
    assert may(a) and may(a, who=BOB) and may(a, who="User:ANONYMOUS")
    assert not may(a, op="Write")


def test_hosts():
    a = auth(acl(host=HOST))
    assert may(a, host=HOST) and not may(a, host=OTHER)
    a = auth(acl(), acl(perm="Deny", host=OTHER))
    assert may(a, host=HOST) and not may(a, host=OTHER)
    # an IPv6 address as Kafka writes it, normalized on the way in
    a = auth(acl(host="0:0:0:0:0:0:0:1"))
    assert may(a, host="::1")


def test_super_users_may_do_anything_even_denied():
    a = auth(acl(who=BOB, op="All", perm="Deny"), acl(name="*", who="User:*", perm="Deny",
                                                      op="All"), super_users=[BOB])
    assert may(a, who=BOB, op="Write") and may(a, who=BOB, rtype="Cluster", name="kafka-cluster",
                                              op="ClusterAction")
    assert not may(a)
    assert may(auth(super_users=[BOB]), who=BOB)


def test_resource_types_are_separate():
    a = auth(acl(rtype="Group", name="orders"))
    assert may(a, rtype="Group") and not may(a, rtype="Topic")
    a = auth(acl(rtype="Cluster", name="kafka-cluster", op="IdempotentWrite"))
    assert may(a, rtype="Cluster", name="kafka-cluster", op="IdempotentWrite")
    assert not may(a, rtype="Cluster", name="kafka-cluster", op="ClusterAction")


def test_authorize_any():
    def any_(a, op="Write", who=ALICE, host=HOST, rtype="Topic"):
        return a.authorize_any(who, host, op, rtype)

    assert not any_(auth())
    assert any_(auth(allow_everyone_if_no_acl_found=True))
    assert any_(auth(acl(op="Write")))
    assert any_(auth(acl(op="All", name="x-", pattern="Prefixed")))
    assert any_(auth(acl(op="Write", who="User:*")))
    assert not any_(auth(acl(op="Read")))
    assert not any_(auth(acl(op="Write", who=BOB)))
    assert not any_(auth(acl(op="Write", host=OTHER)))
    # a Deny that covers every Allow refuses; one that covers some leaves the others
    assert not any_(auth(acl(op="Write"), acl(op="Write", perm="Deny")))
    assert not any_(auth(acl(op="Write"), acl(op="All", perm="Deny", name="o",
                                               pattern="Prefixed")))
    assert not any_(auth(acl(op="Write", name="ab-", pattern="Prefixed"),
                         acl(op="Write", perm="Deny", name="ab", pattern="Prefixed")))
    assert not any_(auth(acl(op="Write"), acl(op="Write", perm="Deny", name="*")))
    assert any_(auth(acl(op="Write"), acl(op="Write", name="b"),
                     acl(op="Write", perm="Deny")))
    # a literal Deny of the prefix's own text covers only that name, not the prefix's others
    assert any_(auth(acl(op="Write", name="ab", pattern="Prefixed"),
                     acl(op="Write", perm="Deny", name="ab")))
    # a Deny from another host, or of another operation, covers nothing here
    assert any_(auth(acl(op="Write"), acl(op="Write", perm="Deny", host=OTHER)))
    assert any_(auth(acl(op="Write"), acl(op="Read", perm="Deny")))
    assert any_(auth(acl(op="Write", who=BOB, perm="Deny"), super_users=[BOB]), who=BOB)


def test_authorize_any_with_allow_everyone_and_acls_on_other_resources():
    """Kafka's authorizeByResourceType asks first for a made-up name: with
    allow.everyone.if.no.acl.found, ACLs only on other topics leave the principal allowed
    (as authorize allows it on a topic without ACLs)."""
    a = auth(acl(who=BOB, op="Write", name="bobs"), allow_everyone_if_no_acl_found=True)
    assert may(a, op="Write", name="mine")
    assert a.authorize_any(ALICE, HOST, "Write", "Topic")
    # but a wildcard ACL of anyone leaves no resource without ACLs
    a = auth(acl(who=BOB, op="Write", name="*"), allow_everyone_if_no_acl_found=True)
    assert not a.authorize_any(ALICE, HOST, "Write", "Topic")


def test_acl_filters():
    lit, pre, star = acl(), acl(name="ord", pattern="Prefixed"), acl(name="*")
    other = acl(name="payments", who=BOB, op="Write", perm="Deny", host=HOST)
    group = acl(rtype="Group", name="orders")
    a = auth(lit, pre, star, other, group)

    def sel(**kw):
        return set(a.select(AclFilter.make(**kw)))

    assert sel() == {lit, pre, star, other, group}
    assert sel(resource_type_="Topic", name="orders") == {lit}  # (pattern Any: exact names)
    assert sel(resource_type_="Topic", name="orders", pattern_type_="Literal") == {lit}
    assert sel(resource_type_="Topic", name="orders", pattern_type_="Match") == {lit, pre, star}
    assert sel(resource_type_="Topic", name="ord", pattern_type_="Prefixed") == {pre}
    assert sel(resource_type_="Topic", name="orders", pattern_type_="Prefixed") == set()
    assert sel(pattern_type_="Prefixed") == {pre}
    assert sel(pattern_type_="Literal") == {lit, star, other, group}
    assert sel(resource_type_="Group") == {group}
    assert sel(principal_=BOB) == {other}
    assert sel(host_=HOST) == {other}
    assert sel(operation_="Write") == {other}
    assert sel(permission_="Deny") == {other}
    assert sel(permission_="Allow", resource_type_="Topic") == {lit, pre, star}
    assert sel(resource_type_="Topic", name="payments", pattern_type_="Match") == {other, star}
    with pytest.raises(InvalidArgument, match="Any, Match, Literal or Prefixed"):
        AclFilter.make(pattern_type_="Unknown")


def test_kafka_codes_and_names_any_case():
    assert resource_type(2) == "Topic" and resource_type("transactional-id") == "TransactionalId"
    assert operation("describe_configs") == "DescribeConfigs" and operation(12) == \
        "IdempotentWrite"
    assert operation("READ") == "Read" and pattern_type("PREFIXED") == "Prefixed"
    with pytest.raises(InvalidArgument, match="unknown operation 'Reed'"):
        operation("Reed")
    with pytest.raises(InvalidArgument, match="unknown resource type 99"):
        resource_type(99)


@pytest.mark.parametrize("args, error", [
    (("Any", "x", "Literal", ALICE, "*", "Read", "Allow"), "one resource type"),
    (("Topic", "x", "Match", ALICE, "*", "Read", "Allow"), "Literal or Prefixed"),
    (("Topic", "x", "Any", ALICE, "*", "Read", "Allow"), "Literal or Prefixed"),
    (("Topic", "", "Literal", ALICE, "*", "Read", "Allow"), "empty or not printable"),
    (("Topic", "a\nb", "Literal", ALICE, "*", "Read", "Allow"), "empty or not printable"),
    (("Cluster", "other", "Literal", ALICE, "*", "Create", "Allow"), "kafka-cluster"),
    (("Cluster", "kafka-cluster", "Prefixed", ALICE, "*", "Create", "Allow"), "kafka-cluster"),
    (("Topic", "*", "Prefixed", ALICE, "*", "Read", "Allow"), "Literal \\*"),
    (("Topic", "x", "Literal", ALICE, "*", "IdempotentWrite", "Allow"),
     "IdempotentWrite does not apply to a Topic; valid: Read, Write"),
    (("Group", "x", "Literal", ALICE, "*", "Write", "Allow"),
     "Write does not apply to a Group; valid: Read, Delete, Describe, All"),
    (("Topic", "x", "Literal", ALICE, "*", "Any", "Allow"), "does not apply"),
    (("Topic", "x", "Literal", ALICE, "*", "Read", "Any"), "Allow or Deny"),
    (("Topic", "x", "Literal", "alice", "*", "Read", "Allow"), "User:alice"),
    (("Topic", "x", "Literal", "User:", "*", "Read", "Allow"), "Type:name"),
    (("Topic", "x", "Literal", ALICE, "example.com", "Read", "Allow"), "not an IP address"),
])
def test_acl_make_refuses(args, error):
    with pytest.raises(InvalidArgument, match=error):
        Acl.make(*args)


def test_every_valid_operation_makes_a_binding():
    for rtype, ops in VALID_OPERATIONS.items():
        name = "kafka-cluster" if rtype == "Cluster" else "x"
        for op in ops:
            assert Acl.make(rtype, name, "Literal", ALICE, "*", op, "Deny").operation == op


def test_the_authorizer_reads_only_the_bindings_of_the_resource():
    """Indexed: 10,000 bindings on other topics change no decision on this one, and a check
    does not walk them (authorize of a topic without any is the no-ACL answer)."""
    many = [acl(name=f"t{i}", who=f"User:u{i % 100}") for i in range(10_000)]
    a = auth(*many, acl(name="t-", pattern="Prefixed", op="Write"))
    assert len(a) == 10_001
    assert may(a, name="t5", who="User:u5") and not may(a, name="t5", who="User:u6")
    assert may(a, op="Write", name="t-x") and not may(a, name="zzz")


def naive(acls, super_users, allow_everyone, who, host, op, rtype, name):
    """Kafka's decision by a scan of every binding: what the index must agree with."""
    if who in super_users:
        return True

    def applies(a):
        return a.resource_type == rtype and (
            (a.pattern_type == "Literal" and a.name in (name, "*")) or
            (a.pattern_type == "Prefixed" and name.startswith(a.name)))

    found = [a for a in acls if applies(a)]
    if not found:
        return allow_everyone
    mine = [a for a in found if a.principal in (who, "User:*") and a.host in ("*", host)]
    if any(a.permission == "Deny" and a.operation in (op, "All") for a in mine):
        return False
    return any(a.permission == "Allow" and a.operation in IMPLIED_BY.get(op, (op, "All"))
               for a in mine)


def test_the_index_agrees_with_a_scan_of_every_binding():
    rnd = random.Random(7)
    names = ["a", "ab", "abc", "abc-1", "abd", "b", "b-x", "b-xy", "*", "zz-top", "a-b-c-d"]
    ops = ["Read", "Write", "Describe", "Delete", "All", "Alter"]
    for _ in range(60):
        acls = set()
        for _ in range(rnd.randrange(1, 40)):
            pattern = rnd.choice(["Literal", "Prefixed"])
            name = rnd.choice([n for n in names if pattern == "Literal" or n != "*"])
            acls.add(Acl.make("Topic", name, pattern, rnd.choice([ALICE, BOB, "User:*"]),
                              rnd.choice(["*", HOST, OTHER]), rnd.choice(ops),
                              rnd.choice(["Allow", "Allow", "Deny"])))
        everyone = rnd.random() < 0.3
        a = Authorizer(acls, super_users=["User:root"], allow_everyone_if_no_acl_found=everyone)
        for _ in range(40):
            q = (rnd.choice([ALICE, BOB, "User:carol", "User:root"]), rnd.choice([HOST, OTHER]),
                 rnd.choice(ops[:4] + ["DescribeConfigs"]), "Topic",
                 rnd.choice(names + ["abc-12", "b-", "c", "ab-"]))
            want = naive(acls, {"User:root"}, everyone, *q)
            assert a.authorize(*q) is want, (q, sorted(acls))
            assert a.authorize(*q) is want  # (the remembered answer too)


def test_remembered_answers_are_bounded(monkeypatch):
    monkeypatch.setattr(acl_module, "CACHE_MAX", 4)
    a = auth(acl(name="t-", pattern="Prefixed"))
    for i in range(10):
        assert may(a, name=f"t-{i}") and not may(a, name=f"u-{i}")
        assert len(a._cache) <= 4
    assert may(a, name="t-0") and not may(a, who=BOB, name="t-0")
