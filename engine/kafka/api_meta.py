"""ApiVersions, Metadata, DescribeCluster and FindCoordinator: one node that leads every
partition (replication factor 1, the ISR itself) and coordinates every group and
transactional id."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import InvalidTopicName, RivvenError, TopicExists, UnknownTopic
from . import codes
from .registry import APIS, Request, api

ZERO_UUID = uuid.UUID(int=0)


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
    b, R, body = req.broker, req.R, req.body
    eng = b.engine
    wanted = body.topics
    if wanted is None or (req.version == 0 and not wanted):
        names = [m.name for m in eng.topics()]
        auto = False
    else:
        names = [t.name for t in wanted if t.name is not None]
        auto = body.allow_auto_topic_creation if req.version >= 4 else True
    T, P = R.MetadataResponseTopic, R.MetadataResponseTopic.MetadataResponsePartition
    topics = []
    for name in names:
        try:
            meta = eng.topic(name)
        except UnknownTopic:
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
    host, port = b.endpoint(req.session.listener)
    return req.respond(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(
        node_id=b.node_id, host=host, port=port, rack=None)], cluster_id=b.cluster_id,
        controller_id=b.node_id, topics=topics)


@api(60, "DescribeCluster", 0, 1)
def describe_cluster(req: Request) -> Any:
    b = req.broker
    host, port = b.endpoint(req.session.listener)
    return req.respond(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                       cluster_id=b.cluster_id, controller_id=b.node_id,
                       brokers=[req.R.DescribeClusterBroker(broker_id=b.node_id, host=host,
                                                            port=port, rack=None,
                                                            is_fenced=False)])


@api(10, "FindCoordinator", 0, 4)
def find_coordinator(req: Request) -> Any:
    b, body = req.broker, req.body
    host, port = b.endpoint(req.session.listener)
    if req.version >= 4:
        keys = body.coordinator_keys or []
        return req.respond(throttle_time_ms=0, coordinators=[
            req.R.Coordinator(key=k, node_id=b.node_id, host=host, port=port,
                              error_code=0, error_message=None) for k in keys])
    return req.respond(throttle_time_ms=0, error_code=0, error_message=None,
                       node_id=b.node_id, host=host, port=port)
