"""DescribeAcls, CreateAcls and DeleteAcls: Kafka's AdminClient (``kafka-acls.sh``,
confluent-kafka's ``create_acls``...) managing the data dir's ACLs (``eng.acls``, the file
``rivven acl`` changes too).

As Kafka's brokers: DescribeAcls needs Describe on the cluster, CreateAcls and DeleteAcls
Alter on it (CLUSTER_AUTHORIZATION_FAILED); a binding or filter that is not valid gets
INVALID_REQUEST with the reason, the others go on; with ``authorizer.class.name=none`` the
answer is SECURITY_DISABLED. With the authorizer's default (on once the data dir has an ACL)
and no ACL yet, anyone may create the first ones, as anyone may do anything then. A change
applies to every connection at its next request: the authorizer is built again from the file
when it changes (engine.security.acls)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument, RivvenError
from ..security.acl import (
    CLUSTER,
    CLUSTER_NAME,
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    Acl,
    AclFilter,
)
from . import codes
from .registry import Request, api

CLUSTER_REFUSED = "Cluster authorization failed."
NO_AUTHORIZER = "No Authorizer is configured on the broker: authorizer.class.name=none"


def _off(req: Request) -> bool:
    return req.broker.authorizer_on is False


def _wire(a: dict[str, Any]) -> dict[str, Any]:
    """A stored binding (``AclInfo``) in Kafka's codes."""
    return {"resource_type": RESOURCE_TYPES[a["resource_type"]],
            "resource_name": a["name"], "pattern_type": PATTERN_TYPES[a["pattern_type"]],
            "principal": a["principal"], "host": a["host"],
            "operation": OPERATIONS[a["operation"]],
            "permission_type": PERMISSIONS[a["permission"]]}


def _filter(f: Any) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter as an ``AclFilter`` (InvalidArgument)."""
    for what, code in (("resource type", f.resource_type_filter), ("operation", f.operation),
                       ("permission type", f.permission_type),
                       ("pattern type", f.pattern_type_filter)):
        if code == 0:  # (Kafka's UNKNOWN: a filter that matches nothing it could name)
            raise InvalidArgument(f"the filter's {what} is UNKNOWN (0): give ANY (1) or a value")
    return AclFilter.make(f.resource_type_filter, f.resource_name_filter,
                          f.pattern_type_filter, f.principal_filter, f.host_filter,
                          f.operation, f.permission_type)


@api(29, "DescribeAcls", 0, 3)
def describe_acls(req: Request) -> Any:
    R = req.R
    if not req.allowed("Describe", CLUSTER, CLUSTER_NAME):
        return req.respond(throttle_time_ms=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                           error_message=CLUSTER_REFUSED, resources=[])
    if _off(req):
        return req.respond(throttle_time_ms=0, error_code=codes.SECURITY_DISABLED,
                           error_message=NO_AUTHORIZER, resources=[])
    try:
        rows = req.broker.engine.acls.list(_filter(req.body))
    except InvalidArgument as e:
        return req.respond(throttle_time_ms=0, error_code=codes.INVALID_REQUEST,
                           error_message=str(e), resources=[])
    except RivvenError as e:
        return req.respond(throttle_time_ms=0, error_code=codes.code_of(e),
                           error_message=str(e), resources=[])
    by_resource: dict[tuple[int, str, int], list[Any]] = {}
    for a in rows:
        w = _wire(dict(a))
        key = (w["resource_type"], w["resource_name"], w["pattern_type"])
        by_resource.setdefault(key, []).append(R.DescribeAclsResource.AclDescription(
            principal=w["principal"], host=w["host"], operation=w["operation"],
            permission_type=w["permission_type"]))
    return req.respond(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in by_resource.items()])


@api(30, "CreateAcls", 0, 3)
def create_acls(req: Request) -> Any:
    creations = req.body.creations or []
    if not req.allowed("Alter", CLUSTER, CLUSTER_NAME):
        return _create_answer(req, [(codes.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED)]
                              * len(creations))
    if _off(req):
        return _create_answer(req, [(codes.SECURITY_DISABLED, NO_AUTHORIZER)] * len(creations))
    results: list[tuple[int, str | None]] = []
    valid: list[Acl] = []
    for c in creations:
        try:
            valid.append(Acl.make(c.resource_type, c.resource_name, c.resource_pattern_type,
                                  c.principal, c.host, c.operation, c.permission_type))
            results.append((codes.NONE, None))
        except InvalidArgument as e:
            results.append((codes.INVALID_REQUEST, str(e)))
    if valid:
        try:
            new = req.broker.engine.acls.add(valid)
            if new:
                req.broker.log.info("%s added %d ACL(s) for %s: %s", req.principal, len(new),
                                    req.peer, "; ".join(_text(a) for a in new)[:1000])
        except RivvenError as e:
            results = [(code, msg) if code else (codes.code_of(e), str(e))
                       for code, msg in results]
    return _create_answer(req, results)


def _create_answer(req: Request, results: list[tuple[int, str | None]]) -> Any:
    return req.respond(throttle_time_ms=0, results=[
        req.R.AclCreationResult(error_code=code, error_message=msg) for code, msg in results])


def _text(a: Any) -> str:
    return (f"{a['permission']} {a['principal']} {a['operation']} from {a['host']} on "
            f"{a['resource_type']} {a['pattern_type']} {a['name']}")


@api(31, "DeleteAcls", 0, 3)
def delete_acls(req: Request) -> Any:
    R = req.R
    F = R.DeleteAclsFilterResult
    M = F.DeleteAclsMatchingAcl
    filters = req.body.filters or []
    if not req.allowed("Alter", CLUSTER, CLUSTER_NAME):
        return req.respond(throttle_time_ms=0, filter_results=[
            F(error_code=codes.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_REFUSED,
              matching_acls=[]) for _ in filters])
    if _off(req):
        return req.respond(throttle_time_ms=0, filter_results=[
            F(error_code=codes.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
              matching_acls=[]) for _ in filters])
    out: list[Any] = []
    valid: list[tuple[int, AclFilter]] = []
    for i, f in enumerate(filters):
        try:
            valid.append((i, _filter(f)))
            out.append(None)
        except InvalidArgument as e:
            out.append(F(error_code=codes.INVALID_REQUEST, error_message=str(e),
                         matching_acls=[]))
    if valid:
        try:
            gone = req.broker.engine.acls.remove([f for _, f in valid])
        except RivvenError as e:
            for i, _ in valid:
                out[i] = F(error_code=codes.code_of(e), error_message=str(e), matching_acls=[])
        else:
            removed = 0
            for (i, _), rows in zip(valid, gone):
                removed += len(rows)
                out[i] = F(error_code=0, error_message=None, matching_acls=[
                    M(error_code=0, error_message=None, **_wire(dict(a))) for a in rows])
            if removed:
                req.broker.log.info("%s removed %d ACL(s) for %s", req.principal, removed,
                                    req.peer)
    return req.respond(throttle_time_ms=0, filter_results=out)
