"""DescribeUserScramCredentials and AlterUserScramCredentials over ``Engine.users`` (Kafka's
``kafka-configs --alter --add-config SCRAM-SHA-256=[...]`` and AdminClient's
describe/alterUserScramCredentials), with Kafka's checks and error codes: a user described
twice (DUPLICATE_RESOURCE), an unknown one (RESOURCE_NOT_FOUND), an unknown mechanism
(UNSUPPORTED_SASL_MECHANISM), iterations out of 4096..16384 or an empty name
(UNACCEPTABLE_CREDENTIAL), a user altered twice in one request (DUPLICATE_RESOURCE), the
deletion of a credential that does not exist (RESOURCE_NOT_FOUND). Describe needs Describe
on the cluster, Alter needs Alter (CLUSTER_AUTHORIZATION_FAILED). Describe tells mechanisms
and iterations, never a salt or a key."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument, RivvenError
from ..security import scram, users
from . import codes
from .registry import Request, api

# Kafka's ScramMechanism types (the int8 on the wire)
TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {v: k for k, v in TYPES.items()}
CLUSTER = "kafka-cluster"


@api(50, "DescribeUserScramCredentials", 0, 0)
def describe_user_scram_credentials(req: Request) -> Any:
    R = req.R
    asked = [u.name for u in req.body.users or ()]
    if not req.allowed("Describe", "Cluster", CLUSTER):
        msg = "Cluster authorization failed."
        return req.respond(throttle_time_ms=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                           error_message=msg, results=[
                               R.DescribeUserScramCredentialsResult(
                                   user=u, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                                   error_message=msg, credential_infos=[])
                               for u in asked])
    eng = req.broker.engine
    known = {u["name"]: u for u in eng.users.list()}
    results = []
    if not asked:
        names = {n: False for n in known}
    else:
        names = {}
        for n in asked:
            names[n] = n in names  # (True: asked twice)
    for name, twice in names.items():
        info = known.get(name)
        if twice:
            results.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=codes.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in "
                              f"a single request: {name}", credential_infos=[]))
        elif info is None or not info["credentials"]:
            results.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=codes.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: "
                              f"{name}", credential_infos=[]))
        else:
            R2 = R.DescribeUserScramCredentialsResult
            results.append(R2(user=name, error_code=codes.NONE, error_message=None,
                              credential_infos=[
                                  R2.CredentialInfo(mechanism=TYPE_OF[c["mechanism"]],
                                                    iterations=c["iterations"])
                                  for c in info["credentials"] if c["mechanism"] in TYPE_OF]))
    return req.respond(throttle_time_ms=0, error_code=codes.NONE, error_message=None,
                       results=results)


def _check(name: str, mech_type: int) -> tuple[int, str] | None:
    if not name:
        return codes.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech_type not in TYPES:
        return codes.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    try:
        users.check_name(name)
    except InvalidArgument as e:
        return codes.UNACCEPTABLE_CREDENTIAL, str(e)
    return None


@api(51, "AlterUserScramCredentials", 0, 0)
def alter_user_scram_credentials(req: Request) -> Any:
    R = req.R
    body = req.body
    dels = list(body.deletions or ())
    ups = list(body.upsertions or ())
    if not req.allowed("Alter", "Cluster", CLUSTER):
        msg = "Cluster authorization failed."
        return req.respond(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                                              error_message=msg)
            for u in sorted({d.name for d in dels} | {u.name for u in ups})])
    eng = req.broker.engine
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, Any] = {}
    upserts: dict[str, Any] = {}
    twice = (codes.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same "
                                       "request")
    # Kafka's order: deletions, then upsertions; a user named twice fails whole
    for d in dels:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = twice
            continue
        bad = _check(d.name, d.mechanism)
        if bad is None and eng.users.credential(d.name, TYPES[d.mechanism]) is None:
            bad = codes.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if bad is not None:
            errors[d.name] = bad
        else:
            deletions[d.name] = d
    for u in ups:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = twice
            continue
        bad = _check(u.name, u.mechanism)
        if bad is None and u.iterations < scram.MIN_ITERATIONS:
            bad = codes.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif bad is None and u.iterations > scram.MAX_ITERATIONS:
            bad = codes.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        elif bad is None and not (u.salt and u.salted_password):
            bad = codes.UNACCEPTABLE_CREDENTIAL, "An empty salt or salted password"
        if bad is not None:
            errors[u.name] = bad
        else:
            upserts[u.name] = u
    if deletions or upserts:
        try:
            eng.users.alter([(u.name, TYPES[u.mechanism], u.iterations, bytes(u.salt),
                              bytes(u.salted_password)) for u in upserts.values()],
                            [(d.name, TYPES[d.mechanism]) for d in deletions.values()])
        except users.UnknownUser as e:  # (deleted meanwhile by another process)
            for n in (*deletions, *upserts):
                errors[n] = (codes.RESOURCE_NOT_FOUND, str(e))
            deletions, upserts = {}, {}
        except RivvenError as e:
            for n in (*deletions, *upserts):
                errors[n] = (codes.code_of(e), str(e))
            deletions, upserts = {}, {}
    results = [R.AlterUserScramCredentialsResult(user=n, error_code=codes.NONE,
                                                 error_message=None)
               for n in (*deletions, *upserts)]
    results += [R.AlterUserScramCredentialsResult(user=n, error_code=c, error_message=m)
                for n, (c, m) in errors.items()]
    return req.respond(throttle_time_ms=0, results=results)
