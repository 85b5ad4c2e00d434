"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs
and IncrementalAlterConfigs: Kafka's admin APIs over the engine's topic services
(``eng.topic_admin``, ``eng.maintenance.delete_records``), with Kafka's field semantics.

One node: a replication factor is 1 (or -1, the default), a replica assignment may name node
0 only. Topic ids are zero (as Metadata answers), so a topic is deleted by name; by id it is
UNKNOWN_TOPIC_ID. Configs are the engine's topic configs (engine.storage.config); the broker
resource ``"0"`` shows the server's settings and the engine's, read-only (they are set when
``rivven serve`` starts). Each resource, topic or partition gets its own error code and the
engine's one-line message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import (
    InvalidArgument,
    InvalidConfig,
    InvalidTopicName,
    KeyringError,
    KeyUnavailable,
    OffsetOutOfRange,
    RivvenError,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
    plural,
)
from ..security.acl import CLUSTER, CLUSTER_NAME, TOPIC
from . import codes
from .api_meta import ZERO_UUID
from .config import ServeConfig, described
from .registry import Request, api

# ConfigResource.Type
TOPIC_RESOURCE, BROKER, BROKER_LOGGER = 2, 4, 8
# DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# DescribeConfigsResponse.ConfigType
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                "list": 7, "class": 8, "password": 9}
# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
HIGH_WATERMARK = -1  # DeleteRecords: every record below the high watermark


class Refused(Exception):
    """This topic, partition or resource gets ``code`` and ``message``; the others go on."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _answer(fn: Callable[..., Any], *args: Any) -> tuple[Any, int, str | None]:
    """``(result, error code, error message)`` of ``fn(*args)``: rivven's errors as Kafka's."""
    try:
        return fn(*args), codes.NONE, None
    except Refused as e:
        return None, e.code, e.message
    except (UnknownTopic, UnknownPartition) as e:
        return None, codes.UNKNOWN_TOPIC_OR_PARTITION, str(e)
    except RivvenError as e:
        return None, codes.code_of(e), str(e)


def _duplicates(names: list) -> set:
    seen: set = set()
    return {n for n in names if n in seen or seen.add(n)}  # type: ignore[func-returns-value]


def _one_node(broker_ids: Any, what: str) -> None:
    ids = list(broker_ids or ())
    if ids != [0]:
        raise Refused(codes.INVALID_REPLICA_ASSIGNMENT,
                      f"{what} is assigned to brokers {ids}: this server is one node (id 0); "
                      "assign [0] or leave the assignment to the server")


# ---------------------------------------------------------------- topics
@api(19, "CreateTopics", 0, 7)
def create_topics(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    validate_only = bool(req.version >= 1 and body.validate_only)
    dups = _duplicates([t.name for t in body.topics])
    # Kafka's: Create on the cluster, or on each topic; its configs shown only with
    # DescribeConfigs on it
    on_cluster = req.allowed("Create", CLUSTER, CLUSTER_NAME, log=False)
    out = []
    for t in body.topics:
        meta: Any = None
        err: int = codes.INVALID_REQUEST
        msg: str | None = f"topic {t.name!r} is named twice"
        if t.name in dups:
            pass
        elif not on_cluster and not req.allowed("Create", TOPIC, t.name):
            err, msg = codes.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        else:
            meta, err, msg = _answer(_create, req, t, validate_only)
        if meta is not None and not validate_only:
            b.log.info("created topic %s (%d partitions) for %s", meta.name, meta.partitions,
                       req.peer)
        config_err = codes.NONE
        if not req.allowed("DescribeConfigs", TOPIC, t.name, log=False):
            config_err, meta = codes.TOPIC_AUTHORIZATION_FAILED, None  # (nothing shown)
        out.append(R.CreatableTopicResult(
            name=t.name, topic_id=ZERO_UUID, error_code=err, error_message=msg,
            topic_config_error_code=config_err,
            num_partitions=meta.partitions if meta is not None else -1,
            replication_factor=1 if meta is not None else -1,
            configs=[R.CreatableTopicResult.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=src, is_sensitive=False)
                for k, v, src in _topic_values(b.engine, meta.config)] if meta is not None
            else []))
    return req.respond(throttle_time_ms=0, topics=out)


def _create(req: Request, t: Any, validate_only: bool) -> Any:
    b = req.broker
    count, factor, assignments = t.num_partitions, t.replication_factor, t.assignments or []
    if assignments:
        if count != -1 or factor != -1:
            raise Refused(codes.INVALID_REQUEST,
                          "num_partitions and replication_factor must be -1 with a replica "
                          "assignment (both cannot be used at once)")
        if sorted(a.partition_index for a in assignments) != list(range(len(assignments))):
            raise Refused(codes.INVALID_REPLICA_ASSIGNMENT,
                          "the assigned partitions must be 0, 1, 2, ... with none missing")
        for a in assignments:
            _one_node(a.broker_ids, f"partition {a.partition_index}")
        count = len(assignments)
    else:
        if count == -1:
            count = b.config.num_partitions
        elif count <= 0:
            raise Refused(codes.INVALID_PARTITIONS,
                          f"num_partitions {count}: use a positive count, or -1 for "
                          f"num.partitions ({b.config.num_partitions})")
        if factor not in (-1, 1):
            raise Refused(codes.INVALID_REPLICATION_FACTOR,
                          f"replication factor {factor} cannot be reached: this server is one "
                          "node; use 1 (or -1, the default)")
    config: dict[str, str] = {}
    for c in t.configs or ():
        if c.value is None:
            raise Refused(codes.INVALID_CONFIG, f"config {c.name} has no value (null): give "
                                                "one, or leave it out for its default")
        config[c.name] = c.value
    admin = b.engine.topic_admin
    try:
        if validate_only:
            return admin.check_create(t.name, count, config)
        return admin.create(t.name, count, config)["topic"]
    except TopicExists:
        raise Refused(codes.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.") from None
    except (InvalidTopicName, InvalidConfig):
        raise
    except InvalidArgument as e:  # (the partition count: engine.storage.topics' bounds)
        raise Refused(codes.INVALID_PARTITIONS, str(e)) from None
    except (KeyUnavailable, KeyringError) as e:  # (encryption.enable: no master key here)
        raise Refused(codes.INVALID_CONFIG, str(e)) from None


@api(20, "DeleteTopics", 0, 6)
def delete_topics(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    if req.version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    dups = _duplicates([n for n, _ in wanted if n is not None])
    out = []
    for name, tid in wanted:
        msg: str | None
        if name is None:
            err, msg = ((codes.INVALID_REQUEST, "neither a topic name nor a topic id")
                        if tid is None or tid == ZERO_UUID else
                        (codes.UNKNOWN_TOPIC_ID, f"topic id {tid}: this server has no topic "
                                                 "ids (they are zero); delete by name"))
        elif name in dups:
            err, msg = codes.INVALID_REQUEST, f"topic {name!r} is named twice"
        elif not b.config.delete_topic_enable:
            err, msg = codes.TOPIC_DELETION_DISABLED, (
                "topic deletion is disabled (delete.topic.enable=false)")
        elif not req.allowed("Delete", TOPIC, name):  # (whether it exists or not)
            err, msg = codes.TOPIC_AUTHORIZATION_FAILED, None
        else:
            _, err, msg = _answer(b.engine.topic_admin.delete, name)
            if not err:
                b.log.info("deleted topic %s for %s", name, req.peer)
        out.append(R.DeletableTopicResult(name=name, topic_id=tid or ZERO_UUID,
                                          error_code=err, error_message=msg))
    return req.respond(throttle_time_ms=0, responses=out)


@api(37, "CreatePartitions", 0, 3)
def create_partitions(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    dups = _duplicates([t.name for t in body.topics])
    out = []
    for t in body.topics:
        err: int = codes.INVALID_REQUEST
        msg: str | None = f"topic {t.name!r} is named twice"
        if t.name in dups:
            pass
        elif not req.allowed("Alter", TOPIC, t.name):
            err, msg = codes.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed."
        else:
            meta, err, msg = _answer(_add_partitions, req, t, body.validate_only)
            if meta is not None and not body.validate_only:
                b.log.info("topic %s now has %d partitions (for %s)", t.name, t.count, req.peer)
        out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=err,
                                                 error_message=msg))
    return req.respond(throttle_time_ms=0, results=out)


def _add_partitions(req: Request, t: Any, validate_only: bool) -> Any:
    eng = req.broker.engine
    have = eng.topic(t.name).partitions
    if t.count < have:
        raise Refused(codes.INVALID_PARTITIONS,
                      f"Topic currently has {plural(have, 'partition')}, which is higher "
                      f"than the requested {t.count}.")
    if t.count == have:
        raise Refused(codes.INVALID_PARTITIONS, f"Topic already has {plural(have, 'partition')}.")
    if t.assignments is not None:
        if len(t.assignments) != t.count - have:
            raise Refused(codes.INVALID_REPLICA_ASSIGNMENT,
                          f"Attempted to add {t.count - have} additional partition(s), but "
                          f"only {len(t.assignments)} assignment(s) were specified.")
        for i, a in enumerate(t.assignments):
            _one_node(a.broker_ids, f"new partition {have + i}")
    try:
        return eng.topic_admin.add_partitions(t.name, t.count, validate_only)
    except InvalidArgument as e:
        raise Refused(codes.INVALID_PARTITIONS, str(e)) from None


@api(21, "DeleteRecords", 0, 2)
def delete_records(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    T = R.DeleteRecordsTopicResult
    out = []
    for t in body.topics:
        parts = []
        deletable = req.allowed("Delete", TOPIC, t.name)
        for p in t.partitions:
            if not deletable:  # (whether it exists or not)
                parts.append(T.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index,
                    error_code=codes.TOPIC_AUTHORIZATION_FAILED, low_watermark=-1))
                continue
            low, err, _ = _answer(_delete_below, b.engine, t.name, p.partition_index, p.offset)
            if not err:
                b.log.info("%s-%d now starts at %d (DeleteRecords from %s)", t.name,
                           p.partition_index, low, req.peer)
            parts.append(T.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, error_code=err,
                low_watermark=low if low is not None else -1))
        out.append(T(name=t.name, partitions=parts))
    return req.respond(throttle_time_ms=0, topics=out)


def _delete_below(eng: Any, topic: str, partition: int, offset: int) -> int:
    """The partition's log start moved up to ``offset`` (-1: the high watermark); the new
    log start (Kafka's low watermark)."""
    if offset == HIGH_WATERMARK:
        offset = eng.offsets.of_partition(topic, partition)[1]
    elif offset < 0:
        raise OffsetOutOfRange(f"offset {offset}: use an offset up to the high watermark, or "
                               "-1 for the high watermark")
    rows = eng.maintenance.delete_records(topic, {partition: offset})
    return int(rows[0]["new_log_start_offset"])


# ---------------------------------------------------------------- configs
def _keys(eng: Any) -> dict[str, Any]:
    """The engine's topic config keys by name (``TopicAdmin.config_keys``)."""
    return {k["key"]: k for k in eng.topic_admin.config_keys()}


def _topic_values(eng: Any, config: dict[str, str]) -> list[tuple[str, str, int]]:
    """``(name, value, source)`` of every topic config: set on the topic, or its default."""
    return [(k, config.get(k, key["default"]), TOPIC_CONFIG if k in config else DEFAULT_CONFIG)
            for k, key in _keys(eng).items()]


class Entry:
    """One config as DescribeConfigs shows it. A broker setting (``read_only``) lists its
    default among its synonyms, under its own name, as Kafka's broker does; a topic config
    lists only its override: Kafka names a topic config's default by the broker setting
    that supplies it (log.retention.ms, ...), which rivven has not."""

    __slots__ = ("name", "value", "source", "default", "read_only", "kind", "doc")

    def __init__(self, name: str, value: str, source: int, default: str, read_only: bool,
                 kind: str, doc: str) -> None:
        self.name, self.value, self.source, self.default = name, value, source, default
        self.read_only, self.kind, self.doc = read_only, kind, doc

    def synonyms(self, S: Any) -> list:  # noqa: N803  (the synonym class)
        """In order of precedence, as Kafka lists them."""
        out = [S(name=self.name, value=self.value, source=self.source)] \
            if self.source != DEFAULT_CONFIG else []
        if self.read_only:
            out.append(S(name=self.name, value=self.default, source=DEFAULT_CONFIG))
        return out


def topic_entries(eng: Any, name: str) -> list[Entry]:
    config = eng.topic(name).config
    return [Entry(k, config.get(k, key["default"]), TOPIC_CONFIG if k in config
                  else DEFAULT_CONFIG, key["default"], False, key["kind"], key["doc"])
            for k, key in _keys(eng).items()]


def broker_entries(req: Request, name: str) -> list[Entry]:
    """The broker resource: ``""`` (cluster-wide dynamic defaults: none) or this node's id:
    the server's settings (ServeConfig) and the engine's, all read-only."""
    if name == "":
        return []
    try:
        node = int(name)
    except ValueError:
        raise Refused(codes.INVALID_REQUEST,
                      f"broker id must be an integer, but it is: {name}") from None
    b = req.broker
    if node != b.node_id:
        raise Refused(codes.INVALID_REQUEST,
                      f"unexpected broker id, expected {b.node_id} or empty string, but "
                      f"received {name}")
    defaults = ServeConfig().as_kafka()
    docs = described()
    out = []
    for k, v in b.config.as_kafka().items():
        doc, kind = docs.get(k.split(".", 3)[-1] if k.startswith("listener.name.") else k,
                             ("", "string"))
        default = defaults.get(k, "")
        out.append(Entry(k, v, STATIC_BROKER_CONFIG if v != default else DEFAULT_CONFIG,
                         default, True, kind, "rivven serve setting: " + doc))
    for k, v, default in b.engine.settings.describe():
        kind = ("string" if k == "wal.sync" else "boolean" if k == "metrics.enabled"
                else "long")
        out.append(Entry(k, v, STATIC_BROKER_CONFIG if v != default else DEFAULT_CONFIG,
                         default, True, kind, "rivven engine setting (README: engine "
                                              "settings)"))
    return out


@api(32, "DescribeConfigs", 0, 4)
def describe_configs(req: Request) -> Any:
    body, R = req.body, req.R
    Res = R.DescribeConfigsResult
    C = Res.DescribeConfigsResourceResult
    S = C.DescribeConfigsSynonym
    synonyms = bool(req.version >= 1 and body.include_synonyms)
    docs = bool(req.version >= 3 and body.include_documentation)
    out = []
    for r in body.resources:
        refused = _config_refused(req, "DescribeConfigs", r.resource_type, r.resource_name)
        if refused:
            out.append(Res(error_code=refused, error_message=REFUSED_TEXT[refused],
                           resource_type=r.resource_type, resource_name=r.resource_name,
                           configs=[]))
            continue
        entries, err, msg = _answer(_entries, req, r.resource_type, r.resource_name)
        configs = []
        wanted = set(r.configuration_keys) if r.configuration_keys else None
        for e in entries or ():
            if wanted is not None and e.name not in wanted:
                continue
            secret = e.kind == "password"  # (never shown, as Kafka's broker does)
            configs.append(C(name=e.name, value=None if secret else e.value,
                             read_only=e.read_only,
                             config_source=e.source, is_default=e.source == DEFAULT_CONFIG,
                             is_sensitive=secret,
                             synonyms=e.synonyms(S) if synonyms and not secret else [],
                             config_type=CONFIG_TYPES.get(e.kind, 0),
                             documentation=e.doc if docs else None))
        out.append(Res(error_code=err, error_message=msg, resource_type=r.resource_type,
                       resource_name=r.resource_name, configs=configs))
    return req.respond(throttle_time_ms=0, results=out)


# Kafka's texts of its errors (Errors.message), what DescribeConfigs answers with a refusal
REFUSED_TEXT = {codes.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                codes.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def _config_refused(req: Request, op: str, kind: int, name: str) -> int:
    """Kafka's check of a config resource: ``op`` (DescribeConfigs, AlterConfigs) on the topic,
    or on the cluster for the broker and its loggers; other kinds are refused later as
    unknown."""
    if kind == TOPIC_RESOURCE and not req.allowed(op, TOPIC, name):
        return codes.TOPIC_AUTHORIZATION_FAILED
    if kind in (BROKER, BROKER_LOGGER) and not req.allowed(op, CLUSTER, CLUSTER_NAME):
        return codes.CLUSTER_AUTHORIZATION_FAILED
    return codes.NONE


def _entries(req: Request, kind: int, name: str) -> list[Entry]:
    if kind == TOPIC_RESOURCE:
        return topic_entries(req.broker.engine, name)
    if kind == BROKER:
        return broker_entries(req, name)
    raise Refused(codes.INVALID_REQUEST, f"resource type {kind} is not served: rivven serve "
                                         f"describes topics ({TOPIC_RESOURCE}) and its broker ({BROKER})")


def _alter(req: Request, r: Any, validate_only: bool, incremental: bool) -> None:
    """One resource of an AlterConfigs (the whole set) or IncrementalAlterConfigs request."""
    names = [c.name for c in r.configs]
    if _duplicates(names):
        raise Refused(codes.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in r.configs
             if c.value is None and not (incremental and c.config_operation == DELETE)]
    if nulls:
        raise Refused(codes.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    if r.resource_type == BROKER:
        broker_entries(req, r.resource_name)  # (the name checked)
        if names:
            raise Refused(codes.INVALID_REQUEST,
                          f"Cannot update these configs dynamically: {', '.join(names)}; "
                          "rivven serve's settings are read-only while it runs: restart it "
                          "with --set KEY=VALUE")
        return
    if r.resource_type != TOPIC_RESOURCE:
        raise Refused(codes.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    try:
        _alter_topic(req.broker.engine.topic_admin, r, validate_only, incremental)
    except (KeyUnavailable, KeyringError) as e:  # (encryption.enable: no master key here)
        raise Refused(codes.INVALID_CONFIG, str(e)) from None


def _alter_topic(admin: Any, r: Any, validate_only: bool, incremental: bool) -> None:
    if not incremental:
        admin.alter_config(r.resource_name, {c.name: c.value for c in r.configs},
                           replace=True, validate_only=validate_only)
        return
    sets: dict[str, str] = {}
    deletes: list[str] = []
    lists: dict[int, dict[str, str]] = {APPEND: {}, SUBTRACT: {}}
    for c in r.configs:
        op = c.config_operation
        if op == SET:
            sets[c.name] = c.value
        elif op == DELETE:
            deletes.append(c.name)
        elif op in lists:
            lists[op][c.name] = c.value
        else:
            raise Refused(codes.INVALID_REQUEST, f"Unknown operations type {op}")
    admin.alter_config(r.resource_name, sets, deletes, validate_only=validate_only,
                       append=lists[APPEND], subtract=lists[SUBTRACT])


def _alter_configs(req: Request, incremental: bool) -> Any:
    b, body, R = req.broker, req.body, req.R
    dups = _duplicates([(r.resource_type, r.resource_name) for r in body.resources])
    out = []
    for r in body.resources:
        err: int = codes.INVALID_REQUEST
        msg: str | None = "Each resource must appear at most once."
        if (r.resource_type, r.resource_name) in dups:
            pass
        elif refused := _config_refused(req, "AlterConfigs", r.resource_type, r.resource_name):
            err, msg = refused, None
        else:
            _, err, msg = _answer(_alter, req, r, body.validate_only, incremental)
            if not err and not body.validate_only and r.configs:
                b.log.info("configs of topic %s altered for %s: %s", r.resource_name, req.peer,
                           ", ".join(f"{c.name}={c.value}" for c in r.configs))
        out.append(R.AlterConfigsResourceResponse(error_code=err, error_message=msg,
                                                  resource_type=r.resource_type,
                                                  resource_name=r.resource_name))
    return req.respond(throttle_time_ms=0, responses=out)


@api(33, "AlterConfigs", 0, 2)
def alter_configs(req: Request) -> Any:
    """The topic's configs become exactly those given (the rest back to their defaults)."""
    return _alter_configs(req, incremental=False)


@api(44, "IncrementalAlterConfigs", 0, 1)
def incremental_alter_configs(req: Request) -> Any:
    return _alter_configs(req, incremental=True)
