"""Consumer groups over Kafka's protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (the
classic protocol: engine.kafka.groups's coordinator), OffsetCommit, OffsetFetch (the data
dir's group offsets: ``eng.groups``), ListGroups, DescribeGroups, DeleteGroups,
OffsetDelete.

A group this server coordinates is described from memory; any other group of the data dir
from its files: a group with live native consumers (engine.groups.consumer) is Stable with
the consumer protocol's ``roundrobin`` and its members' leases as their assignments, a group
with only offsets is Empty, an unknown one Dead (v6: GROUP_ID_NOT_FOUND)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..errors import GroupActive, GroupNotFound, RivvenError, UnknownTopic
from ..security.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC
from . import codes
from .api_meta import authorized_ops
from .groups import (
    CONSUMER,
    DEAD,
    EMPTY,
    STABLE,
    Coordinator,
    NotEmpty,
    check_group_id,
    client_host,
    encode_assignment,
)
from .registry import Request, api

MAX_METADATA = 4096  # offset.metadata.max.bytes, Kafka's default
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


def _coordinator(req: Request) -> Coordinator:
    b = req.broker
    if b.groups is None:  # (a broker made without one: tests of other APIs)
        b.groups = Coordinator(b)
    return b.groups


# ---------------------------------------------------------------- the classic protocol
def _read_refused(req: Request) -> bool:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup need Read on the group (Kafka's)."""
    return not req.allowed("Read", GROUP, req.body.group_id)


@api(11, "JoinGroup", 0, 9)
async def join_group(req: Request) -> Any:
    body, v = req.body, req.version
    if _read_refused(req):
        return req.respond(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED,
                           generation_id=-1, protocol_type=None, protocol_name="", leader="",
                           skip_assignment=False, member_id="", members=[])
    rebalance = body.rebalance_timeout_ms if v >= 1 and body.rebalance_timeout_ms >= 0 \
        else body.session_timeout_ms
    res = await _coordinator(req).join(
        body.group_id, body.member_id or "", body.group_instance_id if v >= 5 else None,
        v >= 4, req.frame.client_id or "", client_host(req.peer), body.session_timeout_ms,
        rebalance, body.protocol_type or "",
        [(p.name, bytes(p.metadata or b"")) for p in body.protocols or ()],
        body.reason if v >= 8 else None, v >= 9)
    M = req.R.JoinGroupResponseMember
    return req.respond(
        throttle_time_ms=0, error_code=res.error, generation_id=res.generation,
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name if res.protocol_name is not None or v >= 7 else "",
        leader=res.leader, skip_assignment=res.skip_assignment, member_id=res.member_id,
        members=[M(member_id=i, group_instance_id=s, metadata=m) for i, s, m in res.members])


@api(14, "SyncGroup", 0, 5)
async def sync_group(req: Request) -> Any:
    body, v = req.body, req.version
    if _read_refused(req):
        return req.respond(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED,
                           protocol_type=None, protocol_name=None, assignment=b"")
    res = await _coordinator(req).sync(
        body.group_id, body.generation_id, body.member_id,
        body.group_instance_id if v >= 3 else None,
        body.protocol_type if v >= 5 else None, body.protocol_name if v >= 5 else None,
        {a.member_id: bytes(a.assignment or b"") for a in body.assignments or ()})
    return req.respond(throttle_time_ms=0, error_code=res.error,
                       protocol_type=res.protocol_type, protocol_name=res.protocol_name,
                       assignment=res.assignment)


@api(12, "Heartbeat", 0, 4)
async def heartbeat(req: Request) -> Any:
    body = req.body
    if _read_refused(req):
        return req.respond(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED)
    err = _coordinator(req).heartbeat(body.group_id, body.generation_id, body.member_id,
                                      body.group_instance_id if req.version >= 3 else None)
    return req.respond(throttle_time_ms=0, error_code=err)


@api(13, "LeaveGroup", 0, 5)
async def leave_group(req: Request) -> Any:
    body, v = req.body, req.version
    if _read_refused(req):
        return req.respond(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED,
                           members=[])
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id or "", m.group_instance_id) for m in body.members or ()]
        if v >= 3 else [(body.member_id or "", None)])
    err, out = _coordinator(req).leave(body.group_id, leaving)
    if v < 3:
        return req.respond(throttle_time_ms=0, error_code=err or (out[0][2] if out else 0))
    MR = req.R.MemberResponse
    return req.respond(throttle_time_ms=0, error_code=err, members=[
        MR(member_id=i, group_instance_id=s, error_code=e) for i, s, e in out])


# ---------------------------------------------------------------- offsets
@api(8, "OffsetCommit", 2, 9)
async def offset_commit(req: Request) -> Any:
    """Read on the group (else every partition GROUP_AUTHORIZATION_FAILED) and on each topic
    (TOPIC_AUTHORIZATION_FAILED; the others committed), as Kafka checks them, first."""
    b, body, v = req.broker, req.body, req.version
    coord = _coordinator(req)
    group = body.group_id
    err: int | None = None
    refused: set[str] = set()
    if not req.allowed("Read", GROUP, group):
        err = codes.GROUP_AUTHORIZATION_FAILED
    else:
        refused = {t.name for t in body.topics if not req.allowed("Read", TOPIC, t.name)}
        if len(refused) == len({t.name for t in body.topics}) and refused:
            err = codes.TOPIC_AUTHORIZATION_FAILED  # (nothing left to commit)
    if not err:
        err = coord.check_group_id(group)
    if not err:
        err = coord.check_commit(group, body.generation_id_or_member_epoch,
                                 body.member_id or "",
                                 body.group_instance_id if v >= 7 else None)
        if err is None:
            # a commit from outside group management: refused while any other process's
            # members hold the group (Kafka's rule for a group with members)
            try:
                live = await b.call(b.engine.groups.live, group)
                err = codes.UNKNOWN_MEMBER_ID if live["kind"] else codes.NONE
            except RivvenError as e:
                err = codes.code_of(e)
    if err:
        results = {(t.name, p.partition_index): err for t in body.topics
                   for p in t.partitions}
    else:
        results = await coord.store(group, functools.partial(
            _commit, b.engine, group, [t for t in body.topics if t.name not in refused]))
    results.update({(t.name, p.partition_index): codes.TOPIC_AUTHORIZATION_FAILED
                    for t in body.topics if t.name in refused for p in t.partitions})
    T = req.R.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return req.respond(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                     error_code=results[(t.name, p.partition_index)])
                                   for p in t.partitions]) for t in body.topics])


def _commit(eng: Any, group: str, topics: Any) -> dict[tuple[str, int], int]:
    """(Thread pool.) The valid offsets committed as one commit; an error code per
    partition."""
    out: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], int] = {}
    texts: dict[tuple[str, int], str] = {}
    counts: dict[str, int | None] = {}
    for t in topics:
        if t.name not in counts:
            try:
                counts[t.name] = eng.topic(t.name).partitions
            except (UnknownTopic, RivvenError):
                counts[t.name] = None
        n = counts[t.name]
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            text = p.committed_metadata or ""
            if n is None or not 0 <= p.partition_index < n:
                out[tp] = codes.UNKNOWN_TOPIC_OR_PARTITION
            elif len(text.encode()) > MAX_METADATA:
                out[tp] = codes.OFFSET_METADATA_TOO_LARGE
            elif p.committed_offset < 0:
                out[tp] = codes.INVALID_COMMIT_OFFSET_SIZE
            else:
                offsets[tp], texts[tp] = p.committed_offset, text
                out[tp] = codes.NONE
    if offsets:
        try:
            eng.groups.commit(group, offsets, texts)
        except RivvenError as e:
            code = codes.code_of(e)
            out.update(dict.fromkeys(offsets, code))
    return out


@api(9, "OffsetFetch", 1, 9)
async def offset_fetch(req: Request) -> Any:
    """The committed offsets (-1 where none), once the group's commits under way are done;
    with ``require_stable`` (read_committed consumers) UNSTABLE_OFFSET_COMMIT where an open
    transaction holds an offset of the group, so that the client asks again once it ends."""
    coord = _coordinator(req)
    body = req.body
    for g in (g.group_id for g in body.groups) if req.version >= 8 else (body.group_id,):
        await coord.settled(g)
    return await req.broker.call(_offset_fetch, req)


def _offset_fetch(req: Request) -> Any:
    body, v, R = req.body, req.version, req.R
    stable = v >= 7 and body.require_stable
    if v >= 8:
        G = R.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in body.groups:
            wanted = (None if g.topics is None
                      else [(t.name, list(t.partition_indexes)) for t in g.topics])
            err, rows = _fetch_authorized(req, g.group_id, wanted, stable)
            groups.append(G(group_id=g.group_id, error_code=err, topics=[
                T(name=t, partitions=[P(partition_index=p, committed_offset=o,
                                        committed_leader_epoch=-1, metadata=m, error_code=e)
                                      for p, o, m, e in parts]) for t, parts in rows]))
        return req.respond(throttle_time_ms=0, groups=groups)
    T1 = R.OffsetFetchResponseTopic
    P1 = T1.OffsetFetchResponsePartition
    wanted = (None if body.topics is None
              else [(t.name, list(t.partition_indexes)) for t in body.topics])
    err, rows = _fetch_authorized(req, body.group_id, wanted, stable)
    if v < 2 and err:  # (v1 has no top-level error: each partition carries it)
        rows = [(t, [(p, -1, "", err) for p in ps]) for t, ps in wanted or ()]
    return req.respond(throttle_time_ms=0, error_code=err, topics=[
        T1(name=t, partitions=[P1(partition_index=p, committed_offset=o,
                                  committed_leader_epoch=-1, metadata=m, error_code=e)
                               for p, o, m, e in parts]) for t, parts in rows])


def _fetch_authorized(req: Request, group: str, wanted: list[tuple[str, list[int]]] | None,
                      stable: bool) -> tuple[int, list[tuple[str, list[tuple[int, int, str, int]]]]]:
    """Kafka's checks around ``_fetch``: Describe on the group (GROUP_AUTHORIZATION_FAILED),
    on each topic named (its partitions TOPIC_AUTHORIZATION_FAILED); of all the group's
    offsets, those of topics the principal may Describe."""
    if not req.allowed("Describe", GROUP, group):
        return codes.GROUP_AUTHORIZATION_FAILED, []
    eng = req.broker.engine
    if wanted is None:
        err, rows = _fetch(eng, group, None, stable)
        return err, [(t, ps) for t, ps in rows if req.allowed("Describe", TOPIC, t, log=False)]
    refused = {t for t, _ in wanted if not req.allowed("Describe", TOPIC, t)}
    err, rows = _fetch(eng, group, [(t, ps) for t, ps in wanted if t not in refused], stable)
    if err:
        return err, rows
    return err, rows + [(t, [(p, -1, "", codes.TOPIC_AUTHORIZATION_FAILED) for p in ps])
                        for t, ps in wanted if t in refused]


def _fetch(eng: Any, group: str, wanted: list[tuple[str, list[int]]] | None, stable: bool
           ) -> tuple[int, list[tuple[str, list[tuple[int, int, str, int]]]]]:
    """(error, [(topic, [(partition, offset, metadata, error)])])."""
    if check_group_id(eng, group):
        return codes.INVALID_GROUP_ID, []
    try:
        committed = eng.groups.offsets(group)
        pending = _pending_txn_offsets(eng, group) if stable else set()
    except RivvenError as e:
        return codes.code_of(e), []
    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(committed):
            by_topic.setdefault(t, []).append(p)
        wanted = list(by_topic.items())
    rows = []
    for t, parts in wanted:
        out = []
        for p in parts:
            c = committed.get((t, p))
            if (t, p) in pending:
                out.append((p, -1, "", codes.UNSTABLE_OFFSET_COMMIT))
            elif c is None:
                out.append((p, -1, "", codes.NONE))
            else:
                out.append((p, c["offset"], c["metadata"] or "", codes.NONE))
        rows.append((t, out))
    return codes.NONE, rows


def _pending_txn_offsets(eng: Any, group: str) -> set[tuple[str, int]]:
    """The partitions whose offsets of ``group`` an open transaction holds."""
    out: set[tuple[str, int]] = set()
    for row in eng.txn.list_transactions():
        if row.get("state") in OPEN_TXN_STATES:
            out.update((t, p) for t, p, _ in row.get("offsets", {}).get(group, ()))
    return out


# ---------------------------------------------------------------- administration
class _Shown:
    """A group as ListGroups and DescribeGroups show it."""

    def __init__(self, state: str, protocol_type: str, protocol: str,
                 members: Sequence[tuple[str, str | None, str, str, bytes, bytes]]) -> None:
        self.state, self.protocol_type, self.protocol = state, protocol_type, protocol
        self.members = members  # (id, instance id, client id, host, metadata, assignment)


def _shown_here(coord: Coordinator, group_id: str) -> _Shown | None:
    g = coord.live(group_id)
    if g is None:
        return None
    stable = g.state == STABLE
    return _Shown(g.state, g.protocol_type or "", (g.protocol_name or "") if stable else "",
                  [(m.member_id, m.instance_id, m.client_id, m.host,
                    m.metadata(g.protocol_name or "") if stable else b"",
                    m.assignment if stable else b"") for m in g.members.values()])


def _shown_on_disk(eng: Any, group_id: str) -> _Shown | None:
    """(Thread pool.) A group of the data dir this server does not hold (None: no such
    group)."""
    if group_id not in set(eng.groups.names()):
        return None
    live = eng.groups.live(group_id)
    if not live["kind"]:
        return _Shown(EMPTY, "", "", [])
    members = []
    for m in live["members"]:
        parts: dict[str, list[int]] = {}
        for a in m["assignment"]:
            parts.setdefault(a["topic"], []).append(a["partition"])
        host = m.get("host")
        members.append((str(m["member_id"]), None, str(m.get("client_id") or ""),
                        host if isinstance(host, str) else "", b"",
                        encode_assignment(sorted(parts.items()))))
    state = STABLE if live["kind"] == "rivven" else live["state"]
    return _Shown(state, CONSUMER, live["protocol"] or "", members)


@api(16, "ListGroups", 0, 5)
async def list_groups(req: Request) -> Any:
    b, body, v = req.broker, req.body, req.version
    coord = _coordinator(req)
    states = {s.lower() for s in body.states_filter or ()} if v >= 4 else set()
    types = {t.lower() for t in body.types_filter or ()} if v >= 5 else set()
    L = req.R.ListedGroup
    if types and "classic" not in types:
        return req.respond(throttle_time_ms=0, error_code=0, groups=[])
    ours = {g: s for g in list(coord.groups) if (s := _shown_here(coord, g)) is not None}

    def on_disk() -> dict[str, _Shown]:
        out = {}
        for name in b.engine.groups.names():
            if name not in ours:
                try:
                    s = _shown_on_disk(b.engine, name)
                except RivvenError:
                    continue  # (a group deleted meanwhile, a damaged one: not listed)
                if s is not None:
                    out[name] = s
        return out

    try:
        shown = {**await b.call(on_disk), **ours}
    except RivvenError as e:
        return req.respond(throttle_time_ms=0, error_code=codes.code_of(e), groups=[])
    # every group with Describe on the cluster, else those the principal may Describe (Kafka's)
    if not req.allowed("Describe", CLUSTER, CLUSTER_NAME, log=False):
        shown = {g: s for g, s in shown.items() if req.allowed("Describe", GROUP, g, log=False)}
    return req.respond(throttle_time_ms=0, error_code=0, groups=[
        L(group_id=g, protocol_type=s.protocol_type, group_state=s.state,
          group_type="classic")
        for g, s in sorted(shown.items()) if not states or s.state.lower() in states])


@api(15, "DescribeGroups", 0, 6)
async def describe_groups(req: Request) -> Any:
    b, body, v = req.broker, req.body, req.version
    coord = _coordinator(req)
    D = req.R.DescribedGroup
    M = D.DescribedGroupMember
    out = []
    for group_id in body.groups:
        err, msg = codes.NONE, None
        shown: _Shown | None = None
        if not req.allowed("Describe", GROUP, group_id):
            out.append(D(error_code=codes.GROUP_AUTHORIZATION_FAILED, error_message=None,
                         group_id=group_id, group_state="", protocol_type="", protocol_data="",
                         members=[], authorized_operations=None))
            continue
        if coord.check_group_id(group_id):
            err, msg = codes.INVALID_GROUP_ID, "not a valid group id"
        else:
            shown = _shown_here(coord, group_id)
            if shown is None:
                try:
                    shown = await b.call(_shown_on_disk, b.engine, group_id)
                except RivvenError as e:
                    err, msg = codes.code_of(e), str(e)
            if shown is None and not err and v >= 6:
                err, msg = codes.GROUP_ID_NOT_FOUND, f"group {group_id} not found"
        s = shown or _Shown(DEAD, "", "", [])
        out.append(D(error_code=err, error_message=msg, group_id=group_id,
                     group_state=s.state, protocol_type=s.protocol_type,
                     protocol_data=s.protocol,
                     members=[M(member_id=i, group_instance_id=gi, client_id=c, client_host=h,
                                member_metadata=md, member_assignment=a)
                              for i, gi, c, h, md, a in s.members],
                     authorized_operations=authorized_ops(req, GROUP, group_id)
                     if v >= 3 and body.include_authorized_operations and not err
                     else None))  # (None: not asked for)
    return req.respond(throttle_time_ms=0, groups=out)


@api(42, "DeleteGroups", 0, 2)
async def delete_groups(req: Request) -> Any:
    b = req.broker
    coord = _coordinator(req)
    out = []
    for group_id in req.body.groups_names:
        if not req.allowed("Delete", GROUP, group_id):
            err = codes.GROUP_AUTHORIZATION_FAILED
        elif coord.check_group_id(group_id):
            err = codes.INVALID_GROUP_ID
        else:
            try:
                await coord.locked(group_id, functools.partial(b.engine.groups.delete,
                                                               group_id))
                err = codes.NONE
                b.log.info("group %s deleted by %s", group_id, req.peer)
            except (NotEmpty, GroupActive):
                err = codes.NON_EMPTY_GROUP
            except GroupNotFound:
                err = codes.GROUP_ID_NOT_FOUND
            except RivvenError as e:
                err = codes.code_of(e)
        out.append(req.R.DeletableGroupResult(group_id=group_id, error_code=err))
    return req.respond(throttle_time_ms=0, results=out)


@api(47, "OffsetDelete", 0, 0)
async def offset_delete(req: Request) -> Any:
    b, body = req.broker, req.body
    coord = _coordinator(req)
    group = body.group_id
    T = req.R.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition

    def answer(err: int, per: dict[tuple[str, int], int]) -> Any:
        return req.respond(throttle_time_ms=0, error_code=err, topics=[] if err else [
            T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                         error_code=per[(t.name, p.partition_index)])
                                       for p in t.partitions]) for t in body.topics])

    if not req.allowed("Delete", GROUP, group):
        return answer(codes.GROUP_AUTHORIZATION_FAILED, {})
    # Read on each topic (Kafka's): the others' partitions TOPIC_AUTHORIZATION_FAILED
    refused = {t.name for t in body.topics if not req.allowed("Read", TOPIC, t.name)}
    if coord.check_group_id(group):
        return answer(codes.INVALID_GROUP_ID, {})
    here = coord.live(group)
    if here is not None and here.protocol_type != CONSUMER:
        return answer(codes.NON_EMPTY_GROUP, {})
    subscribed = {t.name for t in body.topics if coord.subscribed(group, t.name)}

    def delete() -> tuple[int, dict[tuple[str, int], int]]:
        eng = b.engine
        if group not in set(eng.groups.names()):
            return codes.GROUP_ID_NOT_FOUND, {}
        per: dict[tuple[str, int], int] = {}
        for t in body.topics:
            parts = [p.partition_index for p in t.partitions]
            err = codes.NONE
            if t.name in refused:
                err = codes.TOPIC_AUTHORIZATION_FAILED
            elif t.name in subscribed:
                err = codes.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                try:
                    n = eng.topic(t.name).partitions
                    if any(not 0 <= p < n for p in parts):
                        err = codes.UNKNOWN_TOPIC_OR_PARTITION
                    else:
                        eng.groups.delete_offsets(group, t.name, parts, missing_ok=True)
                except UnknownTopic:
                    err = codes.UNKNOWN_TOPIC_OR_PARTITION
                except GroupNotFound:
                    return codes.GROUP_ID_NOT_FOUND, {}
                except GroupActive:
                    err = codes.GROUP_SUBSCRIBED_TO_TOPIC
                except RivvenError as e:
                    err = codes.code_of(e)
            per.update(dict.fromkeys(((t.name, p) for p in parts), err))
        return codes.NONE, per

    return answer(*await b.call(delete))

