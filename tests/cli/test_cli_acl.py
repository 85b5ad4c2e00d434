"""``rivven acl`` as real processes: kafka-acls' options (principals, hosts, operations any
case, resources, pattern types), its --producer and --consumer roles, list filters, remove
(asks; --force off a terminal), the table and --json, Kafka-style refusals (one line, exit 2)."""

import json
import os

from helpers import run_rivven

from engine import Engine

KEYS = {"resource_type", "name", "pattern_type", "principal", "host", "operation", "permission"}


def ok(data_dir, *args, input=b""):
    r = run_rivven(data_dir, *args, input=input)
    assert r.returncode == 0, r.stderr.decode()
    return r


def fails(data_dir, *args, code=2):
    r = run_rivven(data_dir, *args, input=b"")
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return err


def acls(data_dir):
    """The stored ACLs as (type, name, pattern, principal, host, op, permission)."""
    if not os.path.exists(data_dir):
        return set()
    with Engine.open(data_dir, read_only=True) as eng:
        return {tuple(a.to_json().values()) for a in eng.acls.bindings()}


def decide(data_dir, who, op, rtype, name, host="10.0.0.1"):
    with Engine.open(data_dir, read_only=True) as eng:
        return eng.acls.authorizer().authorize(who, host, op, rtype, name)


def test_add_and_list_in_kafkas_words(data_dir):
    r = ok(data_dir, "acl", "add", "--allow-principal", "User:alice", "--operation", "read",
           "--operation", "DESCRIBE", "--topic", "orders", "--group", "billing")
    assert r.stdout.decode().splitlines() == [
        "added 4 ACLs",
        "RESOURCE-TYPE  NAME     PATTERN  PRINCIPAL   HOST  OPERATION  PERMISSION",
        "Topic          orders   Literal  User:alice  *     Read       Allow",
        "Topic          orders   Literal  User:alice  *     Describe   Allow",
        "Group          billing  Literal  User:alice  *     Read       Allow",
        "Group          billing  Literal  User:alice  *     Describe   Allow"]
    assert decide(data_dir, "User:alice", "Read", "Topic", "orders")
    assert not decide(data_dir, "User:alice", "Write", "Topic", "orders")
    # the same again: kept once
    again = ok(data_dir, "acl", "add", "--allow-principal", "User:alice", "--operation", "Read",
               "--topic", "orders", "--json")
    assert json.loads(again.stdout) == []
    # deny, with hosts, on a prefix; the operation defaults to All
    ok(data_dir, "acl", "add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
       "--deny-host", "10.0.0.8", "--topic", "ord", "--resource-pattern-type", "PREFIXED")
    assert ("Topic", "ord", "Prefixed", "User:mallory", "10.0.0.9", "All", "Deny") in \
        acls(data_dir)
    assert len(acls(data_dir)) == 6
    ok(data_dir, "acl", "add", "--allow-principal", "User:*", "--operation", "Describe",
       "--cluster", "--transactional-id", "tx-1")
    rows = json.loads(ok(data_dir, "acl", "list", "--json").stdout)
    assert len(rows) == 8 and all(set(r) == KEYS for r in rows)
    assert {"resource_type": "Cluster", "name": "kafka-cluster", "pattern_type": "Literal",
            "principal": "User:*", "host": "*", "operation": "Describe",
            "permission": "Allow"} in rows
    table = ok(data_dir, "acl", "list").stdout.decode().splitlines()
    assert table[0].split() == ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST",
                                "OPERATION", "PERMISSION"] and len(table) == 9


def test_list_filters(data_dir):
    ok(data_dir, "acl", "add", "--allow-principal", "User:alice", "--allow-principal",
       "User:bob", "--operation", "Read", "--topic", "orders")
    ok(data_dir, "acl", "add", "--allow-principal", "User:carol", "--operation", "Write",
       "--topic", "ord", "--resource-pattern-type", "prefixed")
    ok(data_dir, "acl", "add", "--allow-principal", "User:carol", "--operation", "Read",
       "--topic", "*", "--group", "g")

    def names(*args):
        rows = json.loads(ok(data_dir, "acl", "list", "--json", *args).stdout)
        return sorted((r["principal"], r["name"], r["pattern_type"]) for r in rows)

    assert len(names()) == 5
    assert names("--principal", "User:carol") == [
        ("User:carol", "*", "Literal"), ("User:carol", "g", "Literal"),
        ("User:carol", "ord", "Prefixed")]
    assert names("--topic", "orders") == [("User:alice", "orders", "Literal"),
                                          ("User:bob", "orders", "Literal")]
    assert names("--topic", "ord") == []  # (literal by default, as kafka-acls)
    assert names("--topic", "ord", "--resource-pattern-type", "prefixed") == [
        ("User:carol", "ord", "Prefixed")]
    assert names("--topic", "orders", "--resource-pattern-type", "match") == [
        ("User:alice", "orders", "Literal"), ("User:bob", "orders", "Literal"),
        ("User:carol", "*", "Literal"), ("User:carol", "ord", "Prefixed")]
    assert names("--resource-pattern-type", "prefixed") == [("User:carol", "ord", "Prefixed")]
    assert names("--group", "g", "--principal", "User:alice") == []
    assert names("--principal", "User:alice", "--principal", "User:bob") == [
        ("User:alice", "orders", "Literal"), ("User:bob", "orders", "Literal")]


def test_producer_and_consumer_roles_as_kafka_acls(data_dir):
    ok(data_dir, "acl", "add", "--allow-principal", "User:p", "--producer", "--topic", "t",
       "--transactional-id", "tx", "--idempotent")
    assert acls(data_dir) == {
        ("Topic", "t", "Literal", "User:p", "*", op, "Allow") for op in
        ("Write", "Describe", "Create")} | {
        ("TransactionalId", "tx", "Literal", "User:p", "*", op, "Allow") for op in
        ("Write", "Describe")} | {
        ("Cluster", "kafka-cluster", "Literal", "User:p", "*", "IdempotentWrite", "Allow")}
    ok(data_dir, "acl", "add", "--allow-principal", "User:c", "--consumer", "--topic", "in-",
       "--group", "workers-", "--resource-pattern-type", "prefixed")
    got = {a for a in acls(data_dir) if a[3] == "User:c"}
    assert got == {("Topic", "in-", "Prefixed", "User:c", "*", "Read", "Allow"),
                   ("Topic", "in-", "Prefixed", "User:c", "*", "Describe", "Allow"),
                   ("Group", "workers-", "Prefixed", "User:c", "*", "Read", "Allow")}
    assert decide(data_dir, "User:c", "Read", "Group", "workers-1")
    # both roles at once: the union
    ok(data_dir, "acl", "add", "--allow-principal", "User:pc", "--producer", "--consumer",
       "--topic", "both", "--group", "g")
    assert {a[5] for a in acls(data_dir) if a[3] == "User:pc" and a[0] == "Topic"} == {
        "Write", "Describe", "Create", "Read"}
    # remove --producer takes away what add --producer gave
    ok(data_dir, "acl", "remove", "--allow-principal", "User:p", "--producer", "--topic", "t",
       "--transactional-id", "tx", "--idempotent", "--force")
    assert not [a for a in acls(data_dir) if a[3] == "User:p"]


def test_kafka_style_refusals_are_one_line_usage_errors(data_dir):
    add = ["acl", "add", "--allow-principal", "User:a"]
    err = fails(data_dir, *add, "--operation", "IdempotentWrite", "--topic", "t")
    assert "IdempotentWrite does not apply to a Topic; a Topic takes Read, Write, Create, " \
        "Delete, Alter, Describe, DescribeConfigs, AlterConfigs, All" in err
    assert "a Group takes Read, Delete, Describe, All" in fails(
        data_dir, *add, "--operation", "Write", "--group", "g")
    assert "unknown operation 'Reed'" in fails(data_dir, *add, "--operation", "Reed", "--topic",
                                                "t")
    assert "write it as User:alice" in fails(data_dir, "acl", "add", "--allow-principal",
                                              "alice", "--topic", "t")
    assert "not an IP address" in fails(data_dir, *add, "--allow-host", "db.example",
                                         "--topic", "t")
    assert "name a resource" in fails(data_dir, *add, "--operation", "Read")
    assert "name who" in fails(data_dir, "acl", "add", "--topic", "t")
    assert "--allow-principal too" in fails(data_dir, "acl", "add", "--deny-principal",
                                             "User:a", "--allow-host", "1.2.3.4", "--topic", "t")
    assert "give literal or prefixed" in fails(data_dir, *add, "--topic", "t",
                                                "--resource-pattern-type", "match")
    assert "with --producer give a --topic" in fails(data_dir, *add, "--producer", "--group",
                                                      "g")
    assert "with --consumer give a --group" in fails(data_dir, *add, "--consumer", "--topic",
                                                      "t")
    assert "--idempotent is only for --producer" in fails(data_dir, *add, "--idempotent",
                                                          "--topic", "t")
    assert "leave --operation out" in fails(data_dir, *add, "--producer", "--topic", "t",
                                            "--operation", "Read")
    assert "Literal *" in fails(data_dir, *add, "--topic", "*", "--resource-pattern-type",
                                "prefixed")
    assert not os.path.exists(data_dir)  # (nothing made, not even the data dir)
    # a data dir without ACLs, or none at all: an empty list
    assert ok(data_dir, "acl", "list", "--json").stdout == b"[]\n"
    assert ok(data_dir, "user", "list", "--json").stdout == b"[]\n"


def test_remove_asks_and_needs_force_off_a_terminal(data_dir):
    ok(data_dir, "acl", "add", "--allow-principal", "User:a", "--allow-principal", "User:b",
       "--operation", "Read", "--operation", "Write", "--topic", "t")
    before = acls(data_dir)
    err = fails(data_dir, "acl", "remove", "--topic", "t", code=1)
    assert "removing 4 ACLs needs confirmation: pass --force" in err
    assert acls(data_dir) == before
    # with principals: only those (operation default All, as kafka-acls: none here)
    r = ok(data_dir, "acl", "remove", "--allow-principal", "User:a", "--topic", "t", "--force")
    assert b"no ACL matches: nothing was removed" in r.stderr and acls(data_dir) == before
    r = ok(data_dir, "acl", "remove", "--allow-principal", "User:a", "--operation", "read",
           "--topic", "t", "--force", "--json")
    assert [(x["principal"], x["operation"]) for x in json.loads(r.stdout)] == [("User:a",
                                                                                 "Read")]
    assert len(acls(data_dir)) == 3
    # without principals, every ACL of the resource; --yes is the same as --force
    r = ok(data_dir, "acl", "remove", "--topic", "t", "--yes")
    assert r.stdout.decode().startswith("removed 3 ACLs\n") and not acls(data_dir)
    assert "name a resource" in fails(data_dir, "acl", "remove", "--force")


def test_remove_by_pattern_type(data_dir):
    ok(data_dir, "acl", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic",
       "logs", "--topic", "*")
    ok(data_dir, "acl", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic",
       "lo", "--resource-pattern-type", "prefixed")
    ok(data_dir, "acl", "remove", "--topic", "lo", "--resource-pattern-type", "prefixed",
       "--force")
    assert {a[1] for a in acls(data_dir)} == {"logs", "*"}
    ok(data_dir, "acl", "remove", "--topic", "logs", "--resource-pattern-type", "match",
       "--force")
    assert not acls(data_dir)


def test_a_running_engine_sees_the_commands_change(data_dir):
    """ACL changes apply at once: an Engine opened before `rivven acl add` decides with it."""
    with Engine.open(data_dir) as eng:
        assert not eng.acls.authorizer().authorize("User:a", "1.1.1.1", "Read", "Topic", "t")
        ok(data_dir, "acl", "add", "--allow-principal", "User:a", "--operation", "Read",
           "--topic", "t")
        assert eng.acls.authorizer().authorize("User:a", "1.1.1.1", "Read", "Topic", "t")
        ok(data_dir, "acl", "remove", "--topic", "t", "--force")
        assert not eng.acls.authorizer().authorize("User:a", "1.1.1.1", "Read", "Topic", "t")
