"""ApiVersions, Metadata, DescribeCluster and FindCoordinator: one node that leads every
partition (replication factor 1, the ISR itself) and coordinates every group and
transactional id."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import InvalidTopicName, RivvenError, TopicExists, UnknownTopic
from ..security.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, VALID_OPERATIONS
from . import codes
from .registry import APIS, Request, api

ZERO_UUID = uuid.UUID(int=0)
# FindCoordinator's key types
GROUP_KEY, TRANSACTION_KEY = 0, 1


def authorized_ops(req: Request, rtype: str, name: str) -> set[int]:
    """The ``*_authorized_operations`` bit field (kafka-python's set of bit numbers) of the
    operations Kafka supports on ``rtype`` that the principal may do on ``name``."""
    ops = tuple(op for op in VALID_OPERATIONS[rtype] if op != "All")
    bits = req.authorized_operations(rtype, name, ops)
    return {i for i in range(32) if bits >> i & 1}


def cluster_ops(req: Request) -> set[int]:
    """The cluster's authorized operations: none without Describe on it (as Kafka answers)."""
    return authorized_ops(req, CLUSTER, CLUSTER_NAME) \
        if req.allowed("Describe", CLUSTER, CLUSTER_NAME) else set()


def api_versions_body(cls: Any, version: int, error: int = codes.NONE) -> Any:
    keys = [cls.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in sorted(APIS.values(), key=lambda a: a.key)]
    fields: dict[str, Any] = {"error_code": error, "api_keys": keys, "throttle_time_ms": 0}
    if version >= 3:
        fields.update(supported_features=[], finalized_features_epoch=-1,
                      finalized_features=[])
    return cls(version=version, **fields)


@api(18, "ApiVersions", 0, 3)
def api_versions(req: Request) -> Any:
    return api_versions_body(req.R, req.version)


def topic_id(name: str) -> uuid.UUID:
    """A topic's id as Metadata v10+ carries it: zero (no id), as a broker without topic ids
    answers; clients then keep to topic names."""
    return ZERO_UUID


# unknown topics a client asked to create, by when the log last said why not (a client asks
# again every few hundred ms: one line per topic a minute; bounded)
_REFUSED: dict[str, float] = {}
REFUSED_LOG_S = 60.0


def auto_create(req: Request, name: str) -> int:
    """Create ``name`` if auto.create.topics.enable; the error code a client sees."""
    b = req.broker
    if not b.config.auto_create_topics_enable:
        now = time.monotonic()
        if now - _REFUSED.get(name, -REFUSED_LOG_S) >= REFUSED_LOG_S:
            if len(_REFUSED) >= 1000:
                _REFUSED.clear()
            _REFUSED[name] = now
            b.log.info("%s asks for topic %s, which does not exist: answered UNKNOWN_TOPIC_OR_"
                       "PARTITION (auto.create.topics.enable=false); create it with 'rivven "
                       "topic create %s' or serve with --set auto.create.topics.enable=true",
                       req.peer, name, name)
        return codes.UNKNOWN_TOPIC_OR_PARTITION
    try:
        b.engine.create_topic(name, b.config.num_partitions)
        b.log.info("created topic %s (%d partitions) for %s: auto.create.topics.enable", name,
                   b.config.num_partitions, req.peer)
    except TopicExists:
        pass
    except InvalidTopicName:
        return codes.INVALID_TOPIC_EXCEPTION
    except RivvenError as e:
        return codes.code_of(e)
    return codes.LEADER_NOT_AVAILABLE  # (as Kafka answers: ask again)


@api(3, "Metadata", 0, 12)
def metadata(req: Request) -> Any:
    """A topic the principal may not Describe is left out of a list of all topics and answered
    TOPIC_AUTHORIZATION_FAILED when named, whether it exists or not (Kafka hides it); one it
    may Describe but that does not exist is created (auto.create.topics.enable) only with
    Create on the cluster or on the topic."""
    b, R, body = req.broker, req.R, req.body
    eng = b.engine
    wanted = body.topics
    T, P = R.MetadataResponseTopic, R.MetadataResponseTopic.MetadataResponsePartition
    if wanted is None or (req.version == 0 and not wanted):
        names = [m.name for m in eng.topics() if req.allowed("Describe", TOPIC, m.name, log=False)]
        auto = False
    else:
        names = [t.name for t in wanted if t.name is not None]
        auto = body.allow_auto_topic_creation if req.version >= 4 else True
    topic_ops = req.version >= 8 and body.include_topic_authorized_operations
    topics = []
    refused = []
    for name in names:
        if not req.allowed("Describe", TOPIC, name):
            refused.append(T(error_code=codes.TOPIC_AUTHORIZATION_FAILED, name=name,
                             topic_id=ZERO_UUID, is_internal=False, partitions=[]))
            continue
        try:
            meta = eng.topic(name)
        except UnknownTopic:
            if auto and b.config.auto_create_topics_enable and \
                    not req.allowed("Create", CLUSTER, CLUSTER_NAME, log=False) and \
                    not req.allowed("Create", TOPIC, name):
                refused.append(T(error_code=codes.TOPIC_AUTHORIZATION_FAILED, name=name,
                                 topic_id=ZERO_UUID, is_internal=False, partitions=[]))
                continue
            err = auto_create(req, name) if auto else codes.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(T(error_code=err, name=name, topic_id=ZERO_UUID, is_internal=False,
                            partitions=[]))
            continue
        except InvalidTopicName:
            topics.append(T(error_code=codes.INVALID_TOPIC_EXCEPTION, name=name,
                            topic_id=ZERO_UUID, is_internal=False, partitions=[]))
            continue
        parts = [P(error_code=0, partition_index=p, leader_id=b.node_id, leader_epoch=0,
                   replica_nodes=[b.node_id], isr_nodes=[b.node_id], offline_replicas=[])
                 for p in range(meta.partitions)]
        topics.append(T(error_code=0, name=name, topic_id=topic_id(name), is_internal=False,
                        partitions=parts))
    if topic_ops:  # (the topics answered, not those refused: as Kafka fills them)
        for t in topics:
            t.authorized_operations = authorized_ops(req, TOPIC, t.name)
    cluster = None
    if 8 <= req.version <= 10 and body.include_cluster_authorized_operations:
        cluster = cluster_ops(req)
    host, port = b.endpoint(req.session.listener)
    return req.respond(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(
        node_id=b.node_id, host=host, port=port, rack=None)], cluster_id=b.cluster_id,
        controller_id=b.node_id, topics=topics + refused, authorized_operations=cluster)


@api(60, "DescribeCluster", 0, 1)
def describe_cluster(req: Request) -> Any:
    """Answered to anyone, as by Kafka (the cluster's id and brokers are what a client needs to
    connect at all); the cluster's authorized operations, when asked, are none without
    Describe on the cluster."""
    b = req.broker
    ops = cluster_ops(req) if req.body.include_cluster_authorized_operations else None
    host, port = b.endpoint(req.session.listener)
    return req.respond(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                       cluster_id=b.cluster_id, controller_id=b.node_id,
                       brokers=[req.R.DescribeClusterBroker(broker_id=b.node_id, host=host,
                                                            port=port, rack=None,
                                                            is_fenced=False)],
                       authorized_operations=ops)


@api(10, "FindCoordinator", 0, 4)
def find_coordinator(req: Request) -> Any:
    """A group's coordinator needs Describe on the group, a transactional id's Describe on the
    id (GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED and no node, as Kafka answers)."""
    b, body = req.broker, req.body
    kind = body.key_type if req.version >= 1 else GROUP_KEY
    host, port = b.endpoint(req.session.listener)
    if req.version >= 4:
        out = []
        for k in body.coordinator_keys or []:
            err = _coordinator_refused(req, kind, k)
            out.append(req.R.Coordinator(key=k, node_id=-1 if err else b.node_id,
                                         host="" if err else host, port=-1 if err else port,
                                         error_code=err, error_message=None))
        return req.respond(throttle_time_ms=0, coordinators=out)
    err = _coordinator_refused(req, kind, body.key)
    if err:
        return req.respond(throttle_time_ms=0, error_code=err, error_message=None,
                           node_id=-1, host="", port=-1)
    return req.respond(throttle_time_ms=0, error_code=0, error_message=None,
                       node_id=b.node_id, host=host, port=port)


def _coordinator_refused(req: Request, kind: int, key: str) -> int:
    if kind == GROUP_KEY and not req.allowed("Describe", GROUP, key):
        return codes.GROUP_AUTHORIZATION_FAILED
    if kind == TRANSACTION_KEY and not req.allowed("Describe", TRANSACTIONAL_ID, key):
        return codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return codes.NONE
