"""The Kafka-protocol cluster side of a copy, through confluent-kafka (imported here, on
first use): client settings, the destination topic (created or checked), the mirror
group's committed positions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument, RivvenError


class ClusterError(RivvenError):
    """The cluster refused or could not be reached (librdkafka's message)."""


def mirror_group(name: str) -> str:
    """The consumer group on the destination holding a mirror's copied positions."""
    return f"rivven-mirror-{name}"


def transactional_id(name: str) -> str:
    """The mirror's producer: one name, one transactional id, so that a restarted copy fences
    (and aborts the open transaction of) the one it replaces."""
    return f"rivven-mirror-{name}"


def settings(bootstrap: str, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """librdkafka's settings: the bootstrap servers, then ``extra`` (``-X key=value``:
    security and the like, librdkafka's names) over them."""
    if not bootstrap:
        raise InvalidArgument("no bootstrap server: pass --bootstrap-server HOST:PORT")
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    conf.update(extra or {})
    return conf


def kafka_error(what: str, e: BaseException) -> ClusterError:
    """``e`` (a KafkaException or librdkafka's ValueError on a bad setting) as one line."""
    err = e.args[0] if e.args else e
    text = err.str() if hasattr(err, "str") else str(err)
    return ClusterError(f"{what}: {text}")


def partition_count(conf: Mapping[str, Any], topic: str, timeout: float) -> int | None:
    """The partitions of ``topic`` on the cluster, None when it has no such topic (a listing
    of all topics: a Metadata request naming it could create it on a broker that
    auto-creates)."""
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient(dict(conf)).list_topics(timeout=timeout)
    except Exception as e:  # (KafkaException: the cluster unreachable within timeout)
        raise kafka_error(f"cannot list the topics of {conf['bootstrap.servers']}", e) from None
    t = md.topics.get(topic)
    if t is None:
        return None
    if t.error is not None:
        raise ClusterError(f"topic {topic!r} on the cluster: {t.error.str()}")
    return len(t.partitions)


def ensure_topic(conf: Mapping[str, Any], topic: str, partitions: int, timeout: float) -> bool:
    """Create ``topic`` with ``partitions`` (the broker's replication factor), or check that
    it has at least as many (a record keeps its partition): True when created."""
    from confluent_kafka.admin import AdminClient, NewTopic

    have = partition_count(conf, topic, timeout)
    if have is not None:
        if have < partitions:
            raise InvalidArgument(
                f"the destination topic {topic!r} has {have} partition(s), the source "
                f"{partitions}: add partitions to it (kafka-topics --alter --partitions "
                f"{partitions}) or copy to another topic")
        return False
    admin = AdminClient(dict(conf))  # (held until the future resolves: its handle answers it)
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor=-1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except Exception as e:
        raise kafka_error(f"cannot create the topic {topic!r}", e) from None
    return True


def committed(consumer: Any, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    """The group's committed offset per partition of ``topic`` (none: absent), read
    require_stable (``isolation.level=read_committed``: an offset commit still in a
    transaction is waited for)."""
    from confluent_kafka import TopicPartition

    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                 timeout=timeout)
    except Exception as e:
        raise kafka_error("cannot read the mirror group's offsets", e) from None
    out = {}
    for tp in got:
        if tp.error is not None:
            raise ClusterError(f"the mirror group's offset of {topic}[{tp.partition}]: "
                               f"{tp.error.str()}")
        if tp.offset >= 0:
            out[tp.partition] = tp.offset
    return out
