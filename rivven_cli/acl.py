"""``rivven acl ...``: Kafka's ACLs of the data dir (``Engine.acls``) — add, list, remove,
with kafka-acls' options (``--allow-principal User:alice --operation Read --topic orders``)
and its convenience roles (``--producer``, ``--consumer``). A change applies to a running
``rivven serve`` at its next request."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import JsonOpt, as_usage_error, fail, no_data_yet, open_engine, state
from .render import done, info, print_json, print_table, printable

if TYPE_CHECKING:
    from engine.security.acl import Acl, AclFilter

app = typer.Typer(no_args_is_help=True)
CLUSTER_NAME = "kafka-cluster"  # (engine.security.acl.CLUSTER_NAME)
COLUMNS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
KEYS = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")

AllowPrincipalOpt = Annotated[list[str] | None, typer.Option(
    "--allow-principal", metavar="PRINCIPAL", help="Type:name (User:alice, User:* for every "
    "user) the ACLs allow (repeatable).", show_default=False)]
DenyPrincipalOpt = Annotated[list[str] | None, typer.Option(
    "--deny-principal", metavar="PRINCIPAL", help="Type:name the ACLs deny (repeatable; a "
    "Deny beats any Allow).", show_default=False)]
AllowHostOpt = Annotated[list[str] | None, typer.Option(
    "--allow-host", metavar="HOST", help="IP address the allowed principals may come from "
    "(repeatable; default: *, any).", show_default=False)]
DenyHostOpt = Annotated[list[str] | None, typer.Option(
    "--deny-host", metavar="HOST", help="IP address the denied principals are denied from "
    "(repeatable; default: *, any).", show_default=False)]
OperationOpt = Annotated[list[str] | None, typer.Option(
    "--operation", metavar="OPERATION", help="Read, Write, Create, Delete, Alter, Describe, "
    "DescribeConfigs, AlterConfigs, IdempotentWrite, ClusterAction or All, any case "
    "(repeatable; default: All).", show_default=False)]
TopicOpt = Annotated[list[str] | None, typer.Option(
    "--topic", help="Topic name, prefix with --resource-pattern-type prefixed, or * for every "
    "topic (repeatable).", show_default=False)]
GroupOpt = Annotated[list[str] | None, typer.Option(
    "--group", help="Consumer group name (or prefix, or *; repeatable).", show_default=False)]
TxnOpt = Annotated[list[str] | None, typer.Option(
    "--transactional-id", help="Transactional id (or prefix, or *; repeatable).",
    show_default=False)]
ClusterOpt = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
ProducerOpt = Annotated[bool, typer.Option(
    "--producer", help="A producer's ACLs, as kafka-acls: Write, Describe and Create on the "
    "--topic(s); Write and Describe on the --transactional-id(s); with --idempotent, "
    "IdempotentWrite on the cluster.")]
IdempotentOpt = Annotated[bool, typer.Option(
    "--idempotent", help="With --producer: IdempotentWrite on the cluster too.")]
ConsumerOpt = Annotated[bool, typer.Option(
    "--consumer", help="A consumer's ACLs, as kafka-acls: Read and Describe on the "
    "--topic(s), Read on the --group(s).")]


AddPatternOpt = Annotated[str | None, typer.Option(
    "--resource-pattern-type", metavar="TYPE", help="literal (the name exactly; * is every "
    "one) or prefixed (every name starting with it); default: literal.", show_default=False)]
FilterPatternOpt = Annotated[str | None, typer.Option(
    "--resource-pattern-type", metavar="TYPE", help="literal, prefixed, any (both), or match "
    "(every ACL that applies to the name: its literal, *, its prefixes); default: literal "
    "when a resource is named, else any.", show_default=False)]


def _resources(topic: list[str] | None, group: list[str] | None, txn: list[str] | None,
               cluster: bool) -> list[tuple[str, str]]:
    return ([("Topic", t) for t in topic or []] + [("Group", g) for g in group or []]
            + [("TransactionalId", t) for t in txn or []]
            + ([("Cluster", CLUSTER_NAME)] if cluster else []))


def _pattern(value: str | None, default: str, allowed: tuple[str, ...]) -> str:
    from engine.security.acl import pattern_type

    if value is None:
        return default
    with as_usage_error("--resource-pattern-type"):
        pt = pattern_type(value)
    if pt not in allowed:
        raise typer.BadParameter(f"{value!r}: give {' or '.join(a.lower() for a in allowed)}",
                                 param_hint="--resource-pattern-type")
    return pt


def _entries(allow: list[str] | None, deny: list[str] | None, allow_host: list[str] | None,
             deny_host: list[str] | None) -> list[tuple[str, str, str]]:
    """(principal, host, permission) of every principal and host given, checked."""
    from engine.security.acl import host, principal

    for hosts, who, opt in ((allow_host, allow, "--allow-host"),
                            (deny_host, deny, "--deny-host")):
        if hosts and not who:
            raise typer.BadParameter(f"{opt} names where a principal comes from: give "
                                     f"{opt.replace('host', 'principal')} too", param_hint=opt)
    out = []
    for who, hosts, perm, opt in ((allow, allow_host, "Allow", "--allow"),
                                  (deny, deny_host, "Deny", "--deny")):
        for p in dict.fromkeys(who or []):
            with as_usage_error(f"{opt}-principal"):
                principal(p)
            for h in dict.fromkeys(hosts or ["*"]):
                with as_usage_error(f"{opt}-host"):
                    out.append((p, host(h), perm))
    return out


def _operations(ops: list[str] | None) -> list[str] | None:
    from engine.security.acl import operation

    if not ops:
        return None
    with as_usage_error("--operation"):
        return list(dict.fromkeys(operation(o) for o in ops))


def _role_operations(resources: list[tuple[str, str]], producer: bool, idempotent: bool,
                     consumer: bool, ops: list[str] | None, cluster: bool
                     ) -> list[tuple[tuple[str, str], list[str]]]:
    """Each resource with the operations its ACLs grant: ``--operation`` (or All), or what
    kafka-acls' ``--producer``/``--consumer`` give (AclCommand's
    getProducerResourceFilterToAcls / getConsumerResourceFilterToAcls)."""
    if idempotent and not producer:
        raise typer.BadParameter("--idempotent is only for --producer", param_hint="--idempotent")
    if not producer and not consumer:
        return [(r, ops or ["All"]) for r in resources]
    if ops:
        raise typer.BadParameter("--producer and --consumer give their own operations: leave "
                                 "--operation out, or give it without them",
                                 param_hint="--operation")
    kinds = {rt for rt, _ in resources}
    if "Topic" not in kinds:
        raise typer.BadParameter(f"with --{'producer' if producer else 'consumer'} give a "
                                 "--topic", param_hint="--topic")
    if consumer and "Group" not in kinds:
        raise typer.BadParameter("with --consumer give a --group", param_hint="--group")
    if cluster:
        raise typer.BadParameter("--producer and --consumer name the cluster themselves "
                                 "(--producer --idempotent: IdempotentWrite on it): leave "
                                 "--cluster out", param_hint="--cluster")
    if not producer and "TransactionalId" in kinds:
        raise typer.BadParameter("a --transactional-id is for --producer",
                                 param_hint="--transactional-id")
    if not consumer and "Group" in kinds:
        raise typer.BadParameter("a --group is for --consumer", param_hint="--group")
    want: dict[tuple[str, str], list[str]] = {}
    for r in resources:
        rt = r[0]
        if producer and rt == "Topic":
            want.setdefault(r, []).extend(["Write", "Describe", "Create"])
        if producer and rt == "TransactionalId":
            want.setdefault(r, []).extend(["Write", "Describe"])
        if consumer and rt == "Topic":
            want.setdefault(r, []).extend(["Read", "Describe"])
        if consumer and rt == "Group":
            want.setdefault(r, []).append("Read")
    if producer and idempotent:
        want[("Cluster", CLUSTER_NAME)] = ["IdempotentWrite"]
    return [(r, list(dict.fromkeys(o))) for r, o in want.items()]


def _bindings(resources: list[tuple[tuple[str, str], list[str]]], pattern: str,
              entries: list[tuple[str, str, str]]) -> list[Acl]:
    from engine.security.acl import VALID_OPERATIONS, Acl

    out = []
    for (rt, name), ops in resources:
        for op in ops:
            if op not in VALID_OPERATIONS[rt]:  # (Kafka's refusal, naming the valid ones)
                raise typer.BadParameter(f"{op} does not apply to a {rt}; a {rt} takes "
                                         f"{', '.join(VALID_OPERATIONS[rt])}",
                                         param_hint="--operation")
            for p, h, perm in entries:
                with as_usage_error("--topic/--group/--transactional-id"):
                    out.append(Acl.make(rt, name, "Literal" if rt == "Cluster" else pattern,
                                        p, h, op, perm))
    return out


def _table(rows: list[dict[str, Any]]) -> None:
    print_table(COLUMNS, [tuple(r[k] for k in KEYS) for r in rows], drop=("HOST",))


def _union(lists: list[list[Any]]) -> list[dict[str, Any]]:
    seen = {tuple(r[k] for k in KEYS): dict(r) for rows in lists for r in rows}
    return [seen[k] for k in sorted(seen)]


@app.command()
def add(
    allow_principal: AllowPrincipalOpt = None,
    deny_principal: DenyPrincipalOpt = None,
    allow_host: AllowHostOpt = None,
    deny_host: DenyHostOpt = None,
    operation: OperationOpt = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: AddPatternOpt = None,
    producer: ProducerOpt = False,
    idempotent: IdempotentOpt = False,
    consumer: ConsumerOpt = False,
    json: JsonOpt = False,
) -> None:
    """Add ACLs: every principal x host x operation x resource given (kafka-acls --add).
    Those already there are kept once. With --json, the ACLs added."""
    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        raise typer.BadParameter("name a resource: --topic, --group, --transactional-id or "
                                 "--cluster", param_hint="--topic")
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not entries:
        raise typer.BadParameter("name who: --allow-principal User:NAME or --deny-principal "
                                 "User:NAME", param_hint="--allow-principal")
    pattern = _pattern(resource_pattern_type, "Literal", ("Literal", "Prefixed"))
    acls = _bindings(_role_operations(resources, producer, idempotent, consumer,
                                      _operations(operation), cluster), pattern, entries)
    with open_engine() as eng:
        added = eng.acls.add(acls)
    if json:
        print_json(added)
        return
    kept = len(set(acls)) - len(added)
    done(f"added {len(added)} ACL{'s' * (len(added) != 1)}"
         + (f" ({kept} already there)" if kept else ""))
    if added:
        _table(added)


def _filters(resources: list[tuple[str, str]], pattern: str, principals: list[str | None],
             operations: list[str] | None = None) -> list[AclFilter]:
    from engine.security.acl import AclFilter

    targets: list[tuple[str, str | None]] = [*resources] or [("Any", None)]
    return [AclFilter.make(rt, name, pattern, p, None, op)
            for rt, name in targets for p in principals for op in operations or ["Any"]]


@app.command("list")
def list_(
    principal: Annotated[list[str] | None, typer.Option(
        "--principal", metavar="PRINCIPAL", help="Only the ACLs of this Type:name "
        "(repeatable).", show_default=False)] = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: FilterPatternOpt = None,
    json: JsonOpt = False,
) -> None:
    """ACLs: all of them, or those of the resources and principals named (kafka-acls
    --list)."""
    from engine.security.acl import principal as check_principal

    resources = _resources(topic, group, transactional_id, cluster)
    pattern = _pattern(resource_pattern_type, "Literal" if resources else "Any",
                       ("Literal", "Prefixed", "Any", "Match"))
    for p in principal or []:
        with as_usage_error("--principal"):
            check_principal(p)
    filters = _filters(resources, pattern, list(dict.fromkeys(principal or [])) or [None])
    if no_data_yet(state().data_dir):  # (as `topic list`: an empty list, not an error)
        rows = []
    else:
        with open_engine(read_only=True) as eng:
            rows = _union([eng.acls.list(f) for f in filters])
    if json:
        print_json(rows)
        return
    _table(rows)


@app.command()
def remove(
    allow_principal: AllowPrincipalOpt = None,
    deny_principal: DenyPrincipalOpt = None,
    allow_host: AllowHostOpt = None,
    deny_host: DenyHostOpt = None,
    operation: OperationOpt = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    cluster: ClusterOpt = False,
    resource_pattern_type: FilterPatternOpt = None,
    producer: ProducerOpt = False,
    idempotent: IdempotentOpt = False,
    consumer: ConsumerOpt = False,
    force: Annotated[bool, typer.Option(
        "--force", "--yes", "-y", help="Do not ask for confirmation (needed when stdin is "
        "not a terminal).")] = False,
    json: JsonOpt = False,
) -> None:
    """Remove ACLs (kafka-acls --remove): with principals, the ACLs those options name
    (operation default All, host default *); without, every ACL of the resources named.
    Asks first, unless --force. With --json, the ACLs removed."""
    from engine.security.acl import AclFilter

    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        raise typer.BadParameter("name a resource: --topic, --group, --transactional-id or "
                                 "--cluster", param_hint="--topic")
    pattern = _pattern(resource_pattern_type, "Literal", ("Literal", "Prefixed", "Any", "Match"))
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    ops = _operations(operation)
    if entries:  # (each ACL those options name, checked as `acl add` checks it)
        acls = _bindings(_role_operations(resources, producer, idempotent, consumer, ops,
                                          cluster),
                         pattern if pattern in ("Literal", "Prefixed") else "Literal", entries)
        filters = [AclFilter.make(a.resource_type, a.name,
                                  "Literal" if a.resource_type == "Cluster" else pattern,
                                  a.principal, a.host, a.operation, a.permission) for a in acls]
    elif producer or consumer:
        raise typer.BadParameter("--producer and --consumer need a principal: give "
                                 "--allow-principal", param_hint="--allow-principal")
    else:  # every ACL of the resources (of those operations, when given)
        filters = _filters(resources, pattern, [None], ops)
    with open_engine() as eng:
        matched = _union([eng.acls.list(f) for f in filters])
        if not matched:
            info("no ACL matches: nothing was removed")
            if json:
                print_json([])
            return
        if not force:
            if not sys.stdin.isatty():
                fail(f"removing {len(matched)} ACL{'s' * (len(matched) != 1)} needs "
                     "confirmation: pass --force when not at a terminal")
            _table_to_stderr(matched)
            question = "remove this ACL?" if len(matched) == 1 else \
                f"remove these {len(matched)} ACLs?"
            if not typer.confirm(question, default=False, err=True):
                fail("aborted, nothing was changed")
        removed = _union(eng.acls.remove(filters))
    if json:
        print_json(removed)
        return
    done(f"removed {len(removed)} ACL{'s' * (len(removed) != 1)}")
    _table(removed)


def _table_to_stderr(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        info(printable(f"  {r['permission']} {r['principal']} from {r['host']} "
                       f"{r['operation']} on {r['resource_type']} {r['name']} "
                       f"({r['pattern_type']})"))
