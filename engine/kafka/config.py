"""``rivven serve``'s settings, under Kafka's broker config names where Kafka has one; every
value checked with its bounds (a bad one: InvalidConfig naming the key and the fix)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..errors import InvalidConfig
from ..maintenance import scheduler
from ..maintenance.scheduler import NAMES as MAINTENANCE
from ..maintenance.scheduler import MaintenanceConfig

# name: (default, minimum, what it is)
INTS: dict[str, tuple[int, int, str]] = {
    "socket.request.max.bytes": (104857600, 1024, "largest request frame a client may send"),
    "connections.max.idle.ms": (600000, 1000, "a connection idle this long is closed"),
    "max.connections": (10000, 1, "most client connections at once; past it new ones close"),
    "max.connections.per.ip": (2147483647, 1, "most client connections from one IP address "
                                              "at once; past it new ones from it close"),
    "num.partitions": (1, 1, "partitions of a topic created by a metadata request "
                             "(auto.create.topics.enable) or by CreateTopics with "
                             "num_partitions -1"),
    "group.initial.rebalance.delay.ms": (3000, 0, "how long the first member of an empty "
                                                  "group waits for others to join"),
    "group.min.session.timeout.ms": (6000, 1, "shortest session a consumer may ask for"),
    "group.max.session.timeout.ms": (1800000, 1, "longest session a consumer may ask for"),
    "group.max.size": (1000, 1, "most members of one group"),
    "transaction.max.timeout.ms": (900000, 1, "longest transaction timeout a producer may ask "
                                              "for"),
    "message.max.bytes": (1048588, 64, "largest record batch (a topic's max.message.bytes "
                                       "applies after it)"),
    "fetch.max.bytes": (57671680, 1024, "most bytes of one Fetch response"),
    "num.io.threads": (8, 1, "threads that run requests against the data dir"),
    "queued.max.request.bytes": (-1, -1, "bytes of requests read but not answered, all "
                                         "connections together (-1: 2 x socket.request.max."
                                         "bytes x num.io.threads)"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        10000, 100, "how often transactions past their transaction.timeout.ms are aborted"),
    "offsets.retention.minutes": (10080, 1, "committed offsets of a group with no member "
                                            "kept this long (reported, not yet expired)"),
}
BOOLS: dict[str, tuple[bool, str]] = {
    "auto.create.topics.enable": (False, "create a topic a client names but which does not "
                                         "exist (off: UNKNOWN_TOPIC_OR_PARTITION)"),
    "delete.topic.enable": (True, "DeleteTopics deletes (off: TOPIC_DELETION_DISABLED)"),
}


@dataclass(frozen=True)
class ServeConfig:
    socket_request_max_bytes: int = 104857600
    connections_max_idle_ms: int = 600000
    max_connections: int = 10000
    max_connections_per_ip: int = 2147483647
    num_partitions: int = 1
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 1000
    transaction_max_timeout_ms: int = 900000
    message_max_bytes: int = 1048588
    fetch_max_bytes: int = 57671680
    num_io_threads: int = 8
    queued_max_request_bytes: int = -1
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    offsets_retention_minutes: int = 10080
    auto_create_topics_enable: bool = False
    delete_topic_enable: bool = True
    # the background maintenance (log.retention.check.interval.ms, log.cleaner.*, ...)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)

    @classmethod
    def parse(cls, values: dict[str, str] | None) -> ServeConfig:
        """From ``{kafka name: text}``; unknown names and bad values refused."""
        out: dict[str, object] = {}
        maintenance: dict[str, str] = {}
        for k, text in (values or {}).items():
            attr = k.replace(".", "_")
            if k in MAINTENANCE:
                maintenance[k] = text
            elif k in INTS or k in BOOLS:
                out[attr] = scheduler.setting_value(k, text, INTS, BOOLS)
            else:
                raise InvalidConfig(f"unknown serve setting {k!r}; valid: "
                                    f"{', '.join(sorted([*INTS, *BOOLS, *MAINTENANCE]))}")
        cfg = cls(**out, maintenance=MaintenanceConfig.parse(maintenance))  # type: ignore[arg-type]
        if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
            raise InvalidConfig("group.min.session.timeout.ms is above "
                                "group.max.session.timeout.ms: lower the first or raise the "
                                "second")
        return cfg

    def request_budget(self) -> int:
        if self.queued_max_request_bytes > 0:
            return self.queued_max_request_bytes
        return 2 * self.socket_request_max_bytes * self.num_io_threads

    def as_kafka(self) -> dict[str, str]:
        """Every setting under its Kafka name (DescribeConfigs of the broker)."""
        return {**{f.name.replace("_", "."): str(getattr(self, f.name)).lower()
                   for f in fields(self) if f.name != "maintenance"},
                **self.maintenance.as_kafka()}


_LONGS = ("queued.max.request.bytes", "log.cleaner.spark.threshold.bytes")  # (past 2^31)


def described() -> dict[str, tuple[str, str]]:
    """Every setting's meaning and its type as Kafka's ConfigDef names it (boolean, string,
    int or long): DescribeConfigs of the broker."""
    out: dict[str, tuple[str, str]] = {}
    for ints, bools, strs in ((INTS, BOOLS, {}), (scheduler.INTS, scheduler.BOOLS,
                                                  scheduler.STRS)):
        out.update({k: (doc, "long" if k.endswith(".ms") or k in _LONGS else "int")
                    for k, (_, _, doc) in ints.items()})
        out.update({k: (doc, "boolean") for k, (_, doc) in bools.items()})
        out.update({k: (doc, "string") for k, (_, doc) in strs.items()})
    return out
