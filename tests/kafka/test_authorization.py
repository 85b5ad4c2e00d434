"""Kafka's authorization under ``rivven serve``: the matrix of every API the server answers
(a principal without the ACL it needs gets Kafka's error code, and nothing changes in the
data dir), then the ACL model through the wire: Allow, Deny beating Allow, literal, prefixed and
wildcard patterns, hosts, implied operations, super users, ``allow.everyone.if.no.acl.found``,
a change seen by an open connection, and Kafka's ACL APIs through real AdminClients.

On the PLAINTEXT listener every client is ``User:ANONYMOUS``: the ACLs below grant or deny
that principal (or ``User:*``). One server per setting, the ACLs changed between cases in
the data dir (``Engine.acls``), as another process (``rivven acl``) changes them."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import ROOT, run_rivven
from helpers.kafka import FAST, Served, start_server

from engine import Engine
from engine.format import kafka_batch
from engine.kafka.protocol import Messages
from engine.kafka.registry import APIS
from engine.kafka.serve import load_handlers
from engine.security.acl import OPERATIONS, Acl, AclFilter

M = Messages()
Q = M.request
ANON = "User:ANONYMOUS"
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
# the APIs Kafka answers before and whatever the ACLs (the handshake and authentication)
NO_AUTHORIZATION = {18: "ApiVersions", 17: "SaslHandshake", 36: "SaslAuthenticate"}


class Conn:
    """One client connection: raw requests through kafka-python's message classes."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    def call(self, key: int, version: int, /, **fields: Any) -> Any:
        self.corr += 1
        body = Q[key](version=version, **fields).encode(version=version)
        flexible = M.flexible(key, version)
        head = struct.pack(">hhih", key, version, self.corr, 4) + b"test" + \
            (b"\x00" if flexible else b"")
        self.sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        data = self._read(struct.unpack(">i", self._read(4))[0])
        assert struct.unpack(">i", data[:4])[0] == self.corr
        return M.response[key].decode(data[5 if flexible and key != 18 else 4:], version=version)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the server closed the connection"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def acl(rtype: str, name: str, op: str, permission: str = "Allow", principal: str = ANON,
        pattern: str = "Literal", host: str = "*") -> Acl:
    return Acl.make(rtype, name, pattern, principal, host, op, permission)


# a binding of someone else: authorization on, User:ANONYMOUS granted nothing
NOTHING = acl("Topic", "unrelated", "Read", principal="User:nobody")


def set_acls(data_dir: str, *acls: Acl) -> None:
    """The data dir's ACLs become exactly these (as ``rivven acl`` would leave them)."""
    with Engine.open(data_dir) as eng:
        eng.acls.remove([AclFilter()])
        if acls:
            eng.acls.add(list(acls))


def state(data_dir: str) -> dict[str, Any]:
    """What a refused request must not change: topics, their configs and offsets, groups and
    their committed offsets, transactional ids, ACLs."""
    with Engine.open(data_dir, read_only=True) as eng:
        topics = {m.name: (m.partitions, dict(m.config)) for m in eng.topics()}
        return {
            "topics": topics,
            "offsets": {(t, p): tuple(eng.offsets.of_partition(t, p))
                        for t, (n, _) in topics.items() for p in range(n)},
            "groups": {g: eng.groups.offsets(g) for g in eng.groups.names()},
            "txns": eng.txn.list_transactions(all=True),
            "acls": eng.acls.list(),
        }


def _records(attributes: int = 0, pid: int = -1, epoch: int = -1) -> bytes:
    return bytes(kafka_batch.encode(0, attributes, 0, 1, 1, pid, epoch, -1 if pid < 0 else 0,
                                    [0], [1], [None], [b"v"], None))


def produce(c: Conn, topic: str, transactional_id: str | None = None, attributes: int = 0
            ) -> int:
    T = Q[0].TopicProduceData
    r = c.call(0, 9, transactional_id=transactional_id, acks=-1, timeout_ms=30000,
               topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(
                   index=0, records=_records(attributes, 5 if attributes else -1,
                                             0 if attributes else -1))])])
    return r.responses[0].partition_responses[0].error_code


def metadata(c: Conn, *topics: str, auto: bool = False, version: int = 12) -> Any:
    return c.call(3, version, topics=None if not topics else [
        Q[3].MetadataRequestTopic(topic_id=None, name=t) for t in topics],
        allow_auto_topic_creation=auto, include_topic_authorized_operations=True,
        include_cluster_authorized_operations=True)


def topic_code(c: Conn, topic: str) -> int:
    return metadata(c, topic).topics[0].error_code


def describe_configs(c: Conn, rtype: int, name: str) -> Any:
    return c.call(32, 4, resources=[Q[32].DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False).results[0]


# ---------------------------------------------------------------- the matrix
def _fetch(c: Conn) -> list[int]:
    F = Q[1].FetchTopic
    r = c.call(1, 12, max_wait_ms=0, topics=[F(topic="t", partitions=[F.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return [p.error_code for t in r.responses for p in t.partitions]


def _list_offsets(c: Conn) -> list[int]:
    T = Q[2].ListOffsetsTopic
    r = c.call(2, 7, replica_id=-1, topics=[T(name="t", partitions=[T.ListOffsetsPartition(
        partition_index=0, timestamp=-1)])])
    return [p.error_code for t in r.topics for p in t.partitions]


def _metadata(c: Conn) -> list[int]:
    r = metadata(c, "t", "ghost", auto=True)
    listed = metadata(c)
    assert listed.topics == []  # (all topics: only those it may Describe)
    assert listed.authorized_operations is None  # (v12: no cluster field)
    assert all(t.authorized_operations is None for t in r.topics)  # (refused: omitted)
    return [t.error_code for t in r.topics]


def _offset_commit(c: Conn) -> list[int]:
    T = Q[8].OffsetCommitRequestTopic
    r = c.call(8, 9, group_id="g", generation_id_or_member_epoch=-1, member_id="",
               topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                   partition_index=0, committed_offset=0)])])
    return [p.error_code for t in r.topics for p in t.partitions]


def _offset_fetch(c: Conn) -> list[int]:
    G = Q[9].OffsetFetchRequestGroup
    r = c.call(9, 9, groups=[G(group_id="g", topics=None)], require_stable=False)
    old = c.call(9, 7, group_id="g", topics=None, require_stable=False)
    return [g.error_code for g in r.groups] + [old.error_code]


def _find_coordinator(c: Conn) -> list[int]:
    r = c.call(10, 4, key_type=0, coordinator_keys=["g"])
    t = c.call(10, 4, key_type=1, coordinator_keys=["tx"])
    old = c.call(10, 3, key="g", key_type=0)
    assert old.node_id == -1 and r.coordinators[0].node_id == -1
    return [r.coordinators[0].error_code, old.error_code, t.coordinators[0].error_code]


def _join(c: Conn) -> list[int]:
    P = Q[11].JoinGroupRequestProtocol
    r = c.call(11, 9, group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
               member_id="", protocol_type="consumer", protocols=[P(name="range",
                                                                   metadata=b"")])
    return [r.error_code]


def _heartbeat(c: Conn) -> list[int]:
    return [c.call(12, 4, group_id="g", generation_id=1, member_id="m").error_code]


def _leave(c: Conn) -> list[int]:
    L = Q[13].MemberIdentity
    return [c.call(13, 5, group_id="g", members=[L(member_id="m")]).error_code]


def _sync(c: Conn) -> list[int]:
    return [c.call(14, 5, group_id="g", generation_id=1, member_id="m", assignments=[]
                   ).error_code]


def _describe_groups(c: Conn) -> list[int]:
    r = c.call(15, 5, groups=["g"], include_authorized_operations=True)
    assert r.groups[0].authorized_operations is None
    return [r.groups[0].error_code]


def _list_groups(c: Conn) -> list[int]:
    r = c.call(16, 5, states_filter=[], types_filter=[])
    assert r.groups == []  # (g exists: hidden)
    return []


def _create_topics(c: Conn) -> list[int]:
    T = Q[19].CreatableTopic
    r = c.call(19, 7, topics=[T(name="newt", num_partitions=1, replication_factor=1,
                                assignments=[], configs=[])],
               timeout_ms=30000, validate_only=False)
    return [r.topics[0].error_code]


def _delete_topics(c: Conn) -> list[int]:
    r = c.call(20, 6, topics=[Q[20].DeleteTopicState(name=n, topic_id=None)
                              for n in ("t", "ghost")], timeout_ms=30000)
    return [t.error_code for t in r.responses]


def _delete_records(c: Conn) -> list[int]:
    T = Q[21].DeleteRecordsTopic
    r = c.call(21, 2, topics=[T(name="t", partitions=[T.DeleteRecordsPartition(
        partition_index=0, offset=-1)])], timeout_ms=30000)
    return [p.error_code for t in r.topics for p in t.partitions]


def _init_producer_id(c: Conn) -> list[int]:
    idem = c.call(22, 5, transactional_id=None, transaction_timeout_ms=60000,
                  producer_id=-1, producer_epoch=-1)
    txn = c.call(22, 5, transactional_id="tx", transaction_timeout_ms=60000,
                 producer_id=-1, producer_epoch=-1)
    assert idem.producer_id == -1 and txn.producer_id == -1
    return [idem.error_code, txn.error_code]


def _add_partitions(c: Conn) -> list[int]:
    T = Q[24].AddPartitionsToTxnTopic
    r = c.call(24, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=0,
               v3_and_below_producer_epoch=0, v3_and_below_topics=[T(name="t", partitions=[0])])
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition]


def _add_offsets(c: Conn) -> list[int]:
    return [c.call(25, 4, transactional_id="tx", producer_id=0, producer_epoch=0,
                   group_id="g").error_code]


def _end_txn(c: Conn) -> list[int]:
    return [c.call(26, 4, transactional_id="tx", producer_id=0, producer_epoch=0,
                   committed=True).error_code]


def _txn_offset_commit(c: Conn) -> list[int]:
    T = Q[28].TxnOffsetCommitRequestTopic
    r = c.call(28, 4, transactional_id="tx", group_id="g", producer_id=0, producer_epoch=0,
               generation_id=-1, member_id="", topics=[T(name="t", partitions=[
                   T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0)])])
    return [p.error_code for t in r.topics for p in t.partitions]


def _describe_acls(c: Conn) -> list[int]:
    return [c.call(29, 3, resource_type_filter=1, resource_name_filter=None,
                   pattern_type_filter=1, principal_filter=None, host_filter=None,
                   operation=1, permission_type=1).error_code]


def _create_acls(c: Conn) -> list[int]:
    C = Q[30].AclCreation
    r = c.call(30, 3, creations=[C(resource_type=2, resource_name="t",
                                   resource_pattern_type=3, principal=ANON, host="*",
                                   operation=2, permission_type=3)])
    return [x.error_code for x in r.results]


def _delete_acls(c: Conn) -> list[int]:
    F = Q[31].DeleteAclsFilter
    r = c.call(31, 3, filters=[F(resource_type_filter=1, resource_name_filter=None,
                                 pattern_type_filter=1, principal_filter=None,
                                 host_filter=None, operation=1, permission_type=1)])
    return [x.error_code for x in r.filter_results]


def _describe_configs(c: Conn) -> list[int]:
    return [describe_configs(c, 2, "t").error_code, describe_configs(c, 4, "0").error_code]


def _alter_configs(c: Conn) -> list[int]:
    R = Q[33].AlterConfigsResource
    r = c.call(33, 2, resources=[
        R(resource_type=2, resource_name="t", configs=[R.AlterableConfig(
            name="retention.ms", value="1000")]),
        R(resource_type=4, resource_name="0", configs=[])], validate_only=False)
    return [x.error_code for x in r.responses]


def _create_partitions(c: Conn) -> list[int]:
    T = Q[37].CreatePartitionsTopic
    r = c.call(37, 3, topics=[T(name="t", count=3, assignments=None)], timeout_ms=30000,
               validate_only=False)
    return [r.results[0].error_code]


def _delete_groups(c: Conn) -> list[int]:
    return [r.error_code for r in c.call(42, 2, groups_names=["g", "ghost"]).results]


def _incremental_alter_configs(c: Conn) -> list[int]:
    R = Q[44].AlterConfigsResource
    r = c.call(44, 1, resources=[
        R(resource_type=2, resource_name="t", configs=[R.AlterableConfig(
            name="retention.ms", config_operation=0, value="1000")]),
        R(resource_type=4, resource_name="0", configs=[])], validate_only=False)
    return [x.error_code for x in r.responses]


def _offset_delete(c: Conn) -> list[int]:
    T = Q[47].OffsetDeleteRequestTopic
    r = c.call(47, 0, group_id="g", topics=[T(name="t", partitions=[
        T.OffsetDeleteRequestPartition(partition_index=0)])])
    return [r.error_code]


def _describe_cluster(c: Conn) -> list[int]:
    r = c.call(60, 1, include_cluster_authorized_operations=True)
    assert r.authorized_operations == set()  # (answered, as by Kafka: no operation allowed)
    return []


def _describe_producers(c: Conn) -> list[int]:
    r = c.call(61, 0, topics=[Q[61].TopicRequest(name=n, partition_indexes=[0])
                              for n in ("t", "ghost")])
    return [p.error_code for t in r.topics for p in t.partitions]


def _describe_transactions(c: Conn) -> list[int]:
    return [t.error_code for t in c.call(65, 0, transactional_ids=["tx", "ghost"]
                                         ).transaction_states]


def _list_transactions(c: Conn) -> list[int]:
    r = c.call(66, 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
    assert r.transaction_states == []  # (tx exists: hidden)
    return [r.error_code]


def _describe_scram(c: Conn) -> list[int]:  # (the sasl branch's API; Kafka: Describe Cluster)
    return [c.call(50, 0, users=None).error_code]


def _alter_scram(c: Conn) -> list[int]:  # (Kafka: Alter Cluster)
    D = Q[51].ScramCredentialDeletion
    r = c.call(51, 0, deletions=[D(name="alice", mechanism=1)], upsertions=[])
    return [x.error_code for x in r.results]


# API key -> (what a principal with no ACL sends, the error codes it must read)
MATRIX: dict[int, tuple[Callable[[Conn], list[int]], list[int]]] = {
    0: (lambda c: [produce(c, "t"), produce(c, "ghost"),
                   produce(c, "t", "tx", kafka_batch.ATTR_TRANSACTIONAL)],
        [TOPIC_DENIED, TOPIC_DENIED, TXN_DENIED]),
    1: (_fetch, [TOPIC_DENIED]),
    2: (_list_offsets, [TOPIC_DENIED]),
    3: (_metadata, [TOPIC_DENIED, TOPIC_DENIED]),
    8: (_offset_commit, [GROUP_DENIED]),
    9: (_offset_fetch, [GROUP_DENIED, GROUP_DENIED]),
    10: (_find_coordinator, [GROUP_DENIED, GROUP_DENIED, TXN_DENIED]),
    11: (_join, [GROUP_DENIED]),
    12: (_heartbeat, [GROUP_DENIED]),
    13: (_leave, [GROUP_DENIED]),
    14: (_sync, [GROUP_DENIED]),
    15: (_describe_groups, [GROUP_DENIED]),
    16: (_list_groups, []),
    19: (_create_topics, [TOPIC_DENIED]),
    20: (_delete_topics, [TOPIC_DENIED, TOPIC_DENIED]),
    21: (_delete_records, [TOPIC_DENIED]),
    22: (_init_producer_id, [CLUSTER_DENIED, TXN_DENIED]),
    24: (_add_partitions, [TXN_DENIED]),
    25: (_add_offsets, [TXN_DENIED]),
    26: (_end_txn, [TXN_DENIED]),
    28: (_txn_offset_commit, [TXN_DENIED]),
    29: (_describe_acls, [CLUSTER_DENIED]),
    30: (_create_acls, [CLUSTER_DENIED]),
    31: (_delete_acls, [CLUSTER_DENIED]),
    32: (_describe_configs, [TOPIC_DENIED, CLUSTER_DENIED]),
    33: (_alter_configs, [TOPIC_DENIED, CLUSTER_DENIED]),
    37: (_create_partitions, [TOPIC_DENIED]),
    42: (_delete_groups, [GROUP_DENIED, GROUP_DENIED]),
    44: (_incremental_alter_configs, [TOPIC_DENIED, CLUSTER_DENIED]),
    47: (_offset_delete, [GROUP_DENIED]),
    50: (_describe_scram, [CLUSTER_DENIED]),
    51: (_alter_scram, [CLUSTER_DENIED]),
    60: (_describe_cluster, []),
    61: (_describe_producers, [TOPIC_DENIED, TOPIC_DENIED]),
    65: (_describe_transactions, [TXN_DENIED, TXN_DENIED]),
    66: (_list_transactions, [0]),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """Topics ``t`` (one record) and ``other``, group ``g`` (an offset of t), transactional id
    ``tx`` (no transaction open), made before any ACL exists (authorization off)."""
    d = str(tmp_path_factory.mktemp("authz") / "data")
    run_rivven(d, "topic", "create", "t", check=True)
    run_rivven(d, "topic", "create", "other", check=True)
    s = start_server(d)
    try:
        c = Conn(s.bootstrap)
        assert produce(c, "t") == 0
        assert _offset_commit(c) == [0]
        r = c.call(22, 5, transactional_id="tx", transaction_timeout_ms=600000,
                   producer_id=-1, producer_epoch=-1)
        assert r.error_code == 0
        c.close()
        yield s
    finally:
        s.kill()


@pytest.fixture
def conn(served) -> Iterator[Conn]:
    c = Conn(served.bootstrap)
    yield c
    c.close()
    set_acls(served.data_dir)


def test_the_matrix_names_every_api_served():
    """A new API without its row (or its place among those needing no authorization) fails
    here."""
    load_handlers()
    missing = set(APIS) - MATRIX.keys() - NO_AUTHORIZATION.keys()
    assert not missing, f"APIs without a row in the authorization matrix: {sorted(missing)}"


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_a_principal_without_the_acl_is_refused_and_nothing_changes(served, conn, key):
    load_handlers()
    if key not in APIS:
        pytest.skip(f"API {key} is not served on this branch")
    set_acls(served.data_dir, NOTHING)
    before = state(served.data_dir)
    send, expected = MATRIX[key]
    assert send(conn) == expected
    assert state(served.data_dir) == before


def test_the_apis_without_authorization_answer_anyone(served, conn):
    set_acls(served.data_dir, NOTHING)
    r = conn.call(18, 3, client_software_name="t", client_software_version="1")
    assert r.error_code == 0 and {k.api_key for k in r.api_keys} >= {29, 30, 31}


def test_with_no_acl_in_the_data_dir_authorization_is_off(served, conn):
    assert topic_code(conn, "t") == 0
    assert {t.name for t in metadata(conn).topics} == {"t", "other"}
    r = metadata(conn, "t", version=10)
    assert r.authorized_operations == {OPERATIONS[o] for o in (
        "Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
        "Alter", "Describe")}  # (every operation, as Kafka answers without an authorizer)
    assert len(r.topics[0].authorized_operations) == 8


# ---------------------------------------------------------------- the ACL model
def test_allow_on_a_literal_name_grants_that_topic_only(served, conn):
    set_acls(served.data_dir, acl("Topic", "t", "Describe"))
    assert topic_code(conn, "t") == 0
    assert topic_code(conn, "other") == TOPIC_DENIED
    assert [t.name for t in metadata(conn).topics] == ["t"]
    assert metadata(conn, "t").topics[0].authorized_operations == {OPERATIONS["Describe"]}


def test_deny_beats_allow(served, conn):
    set_acls(served.data_dir, acl("Topic", "*", "All", principal="User:*"),
             acl("Topic", "t", "Describe", "Deny"))
    assert topic_code(conn, "t") == TOPIC_DENIED
    assert topic_code(conn, "other") == 0
    assert produce(conn, "t") == 0  # (Write is not denied; Describe alone is)
    set_acls(served.data_dir, acl("Topic", "*", "All"), acl("Topic", "t", "All", "Deny"))
    assert produce(conn, "t") == TOPIC_DENIED and produce(conn, "other") == 0


def test_prefixed_and_wildcard_patterns(served, conn):
    set_acls(served.data_dir, acl("Topic", "ot", "Describe", pattern="Prefixed"))
    assert topic_code(conn, "other") == 0 and topic_code(conn, "t") == TOPIC_DENIED
    set_acls(served.data_dir, acl("Topic", "*", "Describe"))
    assert topic_code(conn, "other") == 0 and topic_code(conn, "t") == 0
    assert {t.name for t in metadata(conn).topics} == {"t", "other"}
    set_acls(served.data_dir, acl("Topic", "othe", "Describe"))  # (a literal is exact)
    assert topic_code(conn, "other") == TOPIC_DENIED


def test_implied_operations(served, conn):
    # Read implies Describe (Metadata, ListOffsets), not Write
    set_acls(served.data_dir, acl("Topic", "t", "Read"))
    assert topic_code(conn, "t") == 0 and _list_offsets(conn) == [0] and _fetch(conn) == [0]
    assert produce(conn, "t") == TOPIC_DENIED
    # AlterConfigs implies DescribeConfigs, not the other way round
    set_acls(served.data_dir, acl("Topic", "t", "AlterConfigs"))
    assert describe_configs(conn, 2, "t").error_code == 0
    set_acls(served.data_dir, acl("Topic", "t", "DescribeConfigs"))
    assert describe_configs(conn, 2, "t").error_code == 0
    assert _alter_configs(conn)[0] == TOPIC_DENIED
    # Write on a topic lets an idempotent producer have an id (Kafka's authorizeByResourceType)
    set_acls(served.data_dir, acl("Topic", "t", "Write"))
    r = conn.call(22, 5, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                  producer_epoch=-1)
    assert r.error_code == 0 and r.producer_id >= 0 and produce(conn, "t") == 0


def test_host_specific_acls(served, conn):
    set_acls(served.data_dir, acl("Topic", "t", "Describe", host="127.0.0.1"))
    assert topic_code(conn, "t") == 0
    set_acls(served.data_dir, acl("Topic", "t", "Describe", host="10.0.0.1"))
    assert topic_code(conn, "t") == TOPIC_DENIED
    set_acls(served.data_dir, acl("Topic", "t", "Describe"),
             acl("Topic", "t", "Describe", "Deny", host="127.0.0.1"))
    assert topic_code(conn, "t") == TOPIC_DENIED


def test_existence_is_hidden(served, conn):
    set_acls(served.data_dir, acl("Topic", "*", "Describe"))
    assert topic_code(conn, "ghost") == 3  # (may Describe: told it does not exist)
    set_acls(served.data_dir, NOTHING)
    assert [t.error_code for t in metadata(conn, "t", "ghost").topics] == [TOPIC_DENIED] * 2


def test_groups_listed_and_committed_with_their_acls(served, conn):
    set_acls(served.data_dir, acl("Group", "g", "Describe"))
    assert [g.group_id for g in conn.call(16, 5, states_filter=[], types_filter=[]).groups] \
        == ["g"]
    r = conn.call(9, 9, groups=[Q[9].OffsetFetchRequestGroup(group_id="g", topics=None)],
                  require_stable=False)
    assert r.groups[0].error_code == 0 and r.groups[0].topics == []  # (t: not Describe)
    set_acls(served.data_dir, acl("Cluster", "kafka-cluster", "Describe"))
    assert [g.group_id for g in conn.call(16, 5, states_filter=[], types_filter=[]).groups] \
        == ["g"]
    # Read on the group, not the topic: the group may commit, that topic not
    set_acls(served.data_dir, acl("Group", "g", "Read"))
    before = state(served.data_dir)
    assert _offset_commit(conn) == [TOPIC_DENIED]
    assert state(served.data_dir) == before
    r = conn.call(15, 5, groups=["g"], include_authorized_operations=True)
    assert r.groups[0].error_code == 0
    assert r.groups[0].authorized_operations == {OPERATIONS["Read"], OPERATIONS["Describe"]}


def test_a_transactional_produce_needs_write_on_its_transactional_id(served, conn):
    set_acls(served.data_dir, acl("Topic", "t", "Write"))
    before = state(served.data_dir)
    assert produce(conn, "t", "tx", kafka_batch.ATTR_TRANSACTIONAL) == TXN_DENIED
    assert state(served.data_dir) == before


# ---------------------------------------------------------------- changes and other settings
def test_an_open_connection_sees_another_process_change_the_acls(served, conn):
    set_acls(served.data_dir, acl("Topic", "t", "Describe"))
    assert topic_code(conn, "t") == 0
    code = ("import sys; from engine import Engine; from engine.security.acl import Acl\n"
            "with Engine.open(sys.argv[1]) as eng:\n"
            "    eng.acls.add([Acl.make('Topic', 't', 'Literal', 'User:ANONYMOUS', '*', "
            "'Describe', 'Deny')])\n")
    subprocess.run([sys.executable, "-c", code, served.data_dir], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert topic_code(conn, "t") == TOPIC_DENIED  # (the same connection, its next request)
    set_acls(served.data_dir, acl("Topic", "t", "Describe"))
    assert topic_code(conn, "t") == 0


@pytest.fixture(scope="module")
def super_served(tmp_path_factory) -> Iterator[Served]:
    """User:ANONYMOUS a super user; the data dir denies it everything."""
    d = str(tmp_path_factory.mktemp("super") / "data")
    run_rivven(d, "topic", "create", "t", check=True)
    set_acls(d, acl("Topic", "*", "All", "Deny"), acl("Cluster", "kafka-cluster", "All", "Deny"))
    s = start_server(d, settings=FAST + ("super.users=User:bob;User:ANONYMOUS",))
    yield s
    s.kill()


def test_a_super_user_may_do_anything_whatever_the_acls(super_served):
    c = Conn(super_served.bootstrap)
    try:
        assert topic_code(c, "t") == 0 and produce(c, "t") == 0
        assert _describe_acls(c) == [0]
    finally:
        c.close()


def test_kafka_admin_clients_manage_acls(super_served):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.error import KafkaException

    a = AdminClient({"bootstrap.servers": super_served.bootstrap})
    b = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice",
                   "*", AclOperation.READ, AclPermissionType.ALLOW)
    bad = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    fs = a.create_acls([b, bad], request_timeout=30)
    assert fs[b].result() is None
    with pytest.raises(KafkaException) as e:
        fs[bad].result()
    assert e.value.args[0].code() == 42 and "Read does not apply" in e.value.args[0].str()
    with Engine.open(super_served.data_dir, read_only=True) as eng:
        assert Acl.make("Topic", "orders", "Prefixed", "User:alice", "*", "Read", "Allow") \
            in eng.acls.bindings()
    alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert a.describe_acls(alice, request_timeout=30).result() == [b]
    from kafka.admin import ACLFilter, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLOperation as KOp
    from kafka.admin import ACLPermissionType as KPerm
    from kafka.admin import ACLResourcePatternType as KPat
    from kafka.admin import ResourceType as KType

    k = KafkaAdminClient(bootstrap_servers=super_served.bootstrap)
    try:
        got, err = k.describe_acls(ACLFilter(principal="User:alice", host=None,
                                             operation=KOp.ANY, permission_type=KPerm.ANY,
                                             resource_pattern=ResourcePatternFilter(
                                                 KType.ANY, None, KPat.ANY)))
        assert [(x.principal, x.resource_pattern.resource_name) for x in got] == \
            [("User:alice", "orders")]
    finally:
        k.close()
    (deleted,) = a.delete_acls([alice], request_timeout=30).values()
    assert deleted.result() == [b]
    with Engine.open(super_served.data_dir, read_only=True) as eng:
        assert not [x for x in eng.acls.bindings() if x.principal == "User:alice"]


@pytest.fixture(scope="module")
def open_served(tmp_path_factory) -> Iterator[Served]:
    d = str(tmp_path_factory.mktemp("open") / "data")
    for t in ("t", "other"):
        run_rivven(d, "topic", "create", t, check=True)
    set_acls(d, acl("Topic", "t", "Read", principal="User:bob"),
             acl("Cluster", "kafka-cluster", "Create", principal="User:bob"),
             acl("Topic", "auto", "Describe", pattern="Prefixed"))
    s = start_server(d, settings=FAST + ("allow.everyone.if.no.acl.found=true",
                                         "auto.create.topics.enable=true"))
    yield s
    s.kill()


def test_allow_everyone_if_no_acl_found(open_served):
    """A resource no ACL names is open to everyone; one an ACL names only to those it
    allows."""
    c = Conn(open_served.bootstrap)
    try:
        assert topic_code(c, "other") == 0 and produce(c, "other") == 0
        assert topic_code(c, "t") == TOPIC_DENIED
    finally:
        c.close()


def test_auto_creation_needs_create_on_the_cluster_or_the_topic(open_served):
    c = Conn(open_served.bootstrap)
    try:
        before = state(open_served.data_dir)
        assert metadata(c, "auto1", auto=True).topics[0].error_code == TOPIC_DENIED
        assert state(open_served.data_dir) == before
        with Engine.open(open_served.data_dir) as eng:
            eng.acls.add([acl("Topic", "auto", "Create", pattern="Prefixed")])
        assert metadata(c, "auto1", auto=True).topics[0].error_code == 5  # (created)
        assert "auto1" in state(open_served.data_dir)["topics"]
    finally:
        c.close()


def test_a_confluent_producer_is_refused_with_topic_authorization_failed(served):
    from confluent_kafka import KafkaError, Producer

    set_acls(served.data_dir, acl("Topic", "other", "Write"))
    before = state(served.data_dir)
    try:
        reports: list[Any] = []
        p = Producer({"bootstrap.servers": served.bootstrap, "message.timeout.ms": 20000})
        p.produce("t", b"x", on_delivery=lambda err, m: reports.append(err))
        p.flush(30)
        assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert state(served.data_dir) == before
    finally:
        set_acls(served.data_dir)
