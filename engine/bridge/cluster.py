"""The Kafka-protocol cluster side of a copy, through confluent-kafka (imported here, on
first use): client settings, topics (listed, created with the source's partitions and
configs, or checked), their configs, and the mirror group's committed positions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument, RivvenError

# Kafka topic configs a copy carries over (both ways): the ones Kafka and rivven mean alike.
# rivven's own (encryption.*, remote.storage.*, local.retention.*) stay with the data dir.
COPIED_CONFIGS = (
    "cleanup.policy", "compression.type", "delete.retention.ms", "index.interval.bytes",
    "max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.ms")
DEFAULT_TIMEOUT = 30.0  # (s: Kafka's request.timeout.ms)


class ClusterError(RivvenError):
    """The cluster refused or could not be reached (librdkafka's message)."""


def mirror_group(name: str) -> str:
    """The consumer group holding a mirror's copied positions (on the destination)."""
    return f"rivven-mirror-{name}"


def transactional_id(name: str) -> str:
    """The mirror's producer: one name, one transactional id, so that a restarted copy fences
    (and aborts the open transaction of) the one it replaces."""
    return f"rivven-mirror-{name}"


def settings(bootstrap: str, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """librdkafka's settings: the bootstrap servers, then ``extra`` (``--config FILE`` and
    ``-X key=value``: security and the like, librdkafka's names) over them."""
    if not bootstrap or not bootstrap.strip():
        raise InvalidArgument("no bootstrap server: pass --bootstrap-server HOST:PORT")
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    conf.update(extra or {})
    return conf


def message(e: BaseException) -> str:
    """librdkafka's words for ``e`` (a KafkaException, or the ValueError or TypeError a bad
    setting raises)."""
    err = e.args[0] if e.args else e
    text = err.str() if hasattr(err, "str") else str(err)
    return " ".join(text.split()) or type(e).__name__


def code(e: BaseException) -> int | None:
    """The KafkaError code of ``e`` (None when it carries none)."""
    err: Any = e.args[0] if e.args else None
    return err.code() if hasattr(err, "code") else None


def kafka_error(what: str, e: BaseException) -> ClusterError:
    """``e`` as one line after ``what``."""
    return ClusterError(f"{what}: {message(e)}")


def client(kind: str, conf: Mapping[str, Any]) -> Any:
    """A confluent-kafka ``Producer``, ``Consumer`` or ``AdminClient``; a setting librdkafka
    refuses is an InvalidArgument with its message."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    make = AdminClient if kind == "admin" else getattr(confluent_kafka, kind)
    try:
        return make(dict(conf))
    except (confluent_kafka.KafkaException, ValueError, TypeError) as e:
        raise InvalidArgument(f"bad client setting: {message(e)}") from None


class Cluster:
    """One cluster's admin side: an AdminClient made once, its calls bounded by
    ``timeout``."""

    def __init__(self, conf: Mapping[str, Any], timeout: float = DEFAULT_TIMEOUT) -> None:
        self.conf = dict(conf)
        self.timeout = timeout
        self.admin = client("admin", self.conf)

    @property
    def where(self) -> str:
        return str(self.conf["bootstrap.servers"])

    def partitions(self, names: Sequence[str]) -> dict[str, int | None]:
        """Per topic its partition count, None where the cluster has no such topic (from a
        listing of all topics: a Metadata request naming one could create it on a broker
        that auto-creates)."""
        try:
            md = self.admin.list_topics(timeout=self.timeout)
        except Exception as e:  # (KafkaException: not reachable within the timeout)
            raise ClusterError(f"cannot reach the cluster at {self.where} within "
                               f"{self.timeout:g} s: {message(e)}") from None
        out: dict[str, int | None] = {}
        for name in names:
            t = md.topics.get(name)
            if t is not None and t.error is not None:
                if t.error.code() == 3:  # UNKNOWN_TOPIC_OR_PARTITION
                    t = None
                else:
                    raise ClusterError(f"topic {name!r} on {self.where}: {t.error.str()}")
            out[name] = None if t is None else len(t.partitions)
        return out

    def configs(self, name: str) -> dict[str, str]:
        """The topic's configs set on it (not the cluster's defaults) that a copy carries
        (``COPIED_CONFIGS``); empty where the cluster cannot describe them."""
        from confluent_kafka.admin import ConfigResource, ConfigSource

        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        try:
            got = self.admin.describe_configs([res], request_timeout=self.timeout)[res].result(
                self.timeout)
        except Exception:  # (a cluster without DescribeConfigs: nothing to carry)
            return {}
        return {k: e.value for k, e in got.items()
                if k in COPIED_CONFIGS and e.value is not None
                and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}

    def create(self, name: str, partitions: int, configs: Mapping[str, str]) -> list[str]:
        """Create ``name`` (the cluster's replication factor) with ``configs``; where the
        cluster refuses them, without, and the warning says which were left out."""
        from confluent_kafka.admin import NewTopic

        warnings: list[str] = []
        for conf in ([dict(configs), {}] if configs else [{}]):
            futures = self.admin.create_topics(
                [NewTopic(name, partitions, replication_factor=-1, config=conf)],
                operation_timeout=self.timeout, request_timeout=self.timeout)
            try:
                futures[name].result(self.timeout)
                return warnings
            except Exception as e:
                if code(e) == 36:  # TOPIC_ALREADY_EXISTS: made meanwhile (another copy)
                    return warnings
                if not conf:
                    raise kafka_error(f"cannot create the topic {name!r} on {self.where}",
                                      e) from None
                warnings.append(f"{name}: the cluster refused the configs "
                                f"{', '.join(sorted(conf))} ({message(e)}); created without")
        return warnings


def committed(consumer: Any, tps: Sequence[tuple[str, int]], timeout: float
              ) -> dict[tuple[str, int], int]:
    """The consumer's group's committed offsets of ``tps`` (those with one), read
    require_stable (``isolation.level=read_committed``: an offset commit still in a
    transaction is waited for)."""
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    try:
        got = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=timeout)
    except Exception as e:
        raise kafka_error("cannot read the mirror group's offsets", e) from None
    out = {}
    for tp in got:
        if tp.error is not None:
            raise ClusterError(f"the mirror group's offset of {tp.topic}[{tp.partition}]: "
                               f"{tp.error.str()}")
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
    return out
