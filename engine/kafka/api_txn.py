"""Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, the check of a transactional Produce, the abort of
timed-out transactions, and what ``kafka-transactions.sh`` asks (ListTransactions,
DescribeTransactions, DescribeProducers).

An idempotent producer gets a new producer id at epoch 0, from a block the broker takes from
the data dir's producer ids at a time (durable before any is handed out), as Kafka's
brokers take blocks from the controller.

A transactional id is the engine's (``eng.txn``: its state durable in the data dir, shared
with every process). Kafka clients that do not speak EndTxn v5 keep their epoch across
transactions, so a Kafka client's instance follows Kafka's classic epoch rule
(``eng.txn.init_producer``; docs/TRANSACTIONS.md, "Kafka's classic epochs"). Every call is
answered once what it did is durable; EndTxn writes the markers before it answers (Kafka
writes them after), so a read_committed consumer sees a commit as soon as its producer does.
A transactional batch is written only into a partition added to its producer's ongoing
transaction, with the id's lock held across the append (KIP-890's verification)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import (
    InvalidArgument,
    InvalidProducerIdMapping,
    InvalidTxnState,
    LockTimeout,
    ProducerFenced,
    RivvenError,
    StorageError,
    UnknownPartition,
    UnknownTopic,
)
from ..security.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID
from . import codes
from .registry import Request, api

BLOCK = 1000
# Kafka's TransactionState names (ListTransactions' state filters)
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "PrepareEpochFence", "Dead")


class ProducerIds:
    """Producer ids handed out from blocks taken from the data dir."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._next = self._end = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._next = self._engine.txn.allocate_producer_ids(BLOCK)
                self._end = self._next + BLOCK
            pid = self._next
            self._next += 1
            return pid


def txn_code(e: BaseException, version: int = 99, fenced_since: int = 0) -> int:
    """The Kafka error code of a transaction coordinator's refusal. ``fenced_since``: the
    first version of the API that knows PRODUCER_FENCED (older ones get
    INVALID_PRODUCER_EPOCH, as Kafka answers them)."""
    if isinstance(e, InvalidProducerIdMapping):
        return codes.INVALID_PRODUCER_ID_MAPPING
    if isinstance(e, ProducerFenced):
        return codes.PRODUCER_FENCED if version >= fenced_since else codes.INVALID_PRODUCER_EPOCH
    if isinstance(e, InvalidTxnState):
        return codes.INVALID_TXN_STATE
    if isinstance(e, LockTimeout):  # another request of the id holds it: retriable
        return codes.CONCURRENT_TRANSACTIONS
    if isinstance(e, (UnknownTopic, UnknownPartition)):
        return codes.UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(e, StorageError):  # retriable for a transactional client
        return codes.COORDINATOR_NOT_AVAILABLE
    if isinstance(e, InvalidArgument):
        return codes.INVALID_REQUEST
    return codes.UNKNOWN_SERVER_ERROR


class KafkaTransactions:
    """``broker.txns``: the check of a transactional Produce and the abort of timed-out
    transactions (Kafka's ``transaction.abort.timed.out.transaction.cleanup.interval.ms``)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    @contextlib.contextmanager
    def check_produce(self, transactional_id: str | None, topic: str, partition: int,
                      kb: Any) -> Iterator[None]:
        """Around the append of a transactional batch: its partition must be in the ongoing
        transaction of its producer id and epoch (PartitionError with Kafka's code)."""
        from .api_produce import PartitionError

        if transactional_id is None:
            raise PartitionError(codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                 "a transactional batch in a Produce request without a "
                                 "transactional id")
        txn = self.broker.engine.txn
        try:
            guard = txn.writing(transactional_id, kb.producer_id, kb.producer_epoch, topic,
                                partition)
            guard.__enter__()
        except InvalidProducerIdMapping as e:
            raise PartitionError(codes.INVALID_PRODUCER_ID_MAPPING, str(e)) from None
        except ProducerFenced as e:  # (Produce's answer to an old epoch)
            raise PartitionError(codes.INVALID_PRODUCER_EPOCH, str(e)) from None
        except InvalidTxnState as e:
            raise PartitionError(codes.INVALID_TXN_STATE, str(e)) from None
        except LockTimeout as e:  # (Kafka's answer when it cannot verify: retriable)
            raise PartitionError(codes.NOT_ENOUGH_REPLICAS, str(e)) from None
        with contextlib.ExitStack() as stack:
            stack.push(guard)
            yield

    def expire(self) -> int:
        """Abort the transactions past their timeout (and finish prepared ones): how many."""
        rows = self.broker.engine.txn.recover()
        done = 0
        for r in rows:
            if r.get("action") in ("aborted", "committed"):
                done += 1
                self.broker.log.info("transaction of %r %s by the server (%s)",
                                     r["transactional_id"], r["action"],
                                     "timed out" if r.get("state") == "Ongoing"
                                     else f"was {r.get('state')}")
            elif r.get("action") == "failed":
                self.broker.log.warning("transaction of %r not finished: %s",
                                        r["transactional_id"], r.get("error"))
        if done:
            self.broker.appends.appended()  # (markers: the last stable offset moved)
        return done

    async def expire_every(self, interval_s: float) -> None:
        b = self.broker
        while not b.stopping:
            await asyncio.sleep(interval_s)
            if b.stopping:
                return
            try:
                await b.call(self.expire)
            except Exception as e:  # (an OSError too: tried again next time, logged)
                b.log.warning("the abort of timed-out transactions failed: %s", e)


def install(broker: Any) -> asyncio.Task:
    """Set ``broker.txns``; start the periodic abort of timed-out transactions (cancel the
    task returned when stopping)."""
    broker.txns = KafkaTransactions(broker)
    interval = broker.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
    return broker.loop.create_task(broker.txns.expire_every(interval / 1000))


def _ended(req: Request) -> None:
    req.broker.appends.appended()  # markers move the last stable offset: wake fetches


def _refused(req: Request, what: str, tid: str | None, code: int, e: BaseException) -> None:
    log = req.broker.log
    if code in (codes.UNKNOWN_SERVER_ERROR, codes.COORDINATOR_NOT_AVAILABLE):
        log.warning("%s of transactional id %r from %s failed (%d): %s", what, tid, req.peer,
                    code, e)
    else:
        log.info("%s of transactional id %r from %s refused (%d): %s", what, tid, req.peer,
                 code, e)


# ---------------------------------------------------------------- the producer's calls
@api(22, "InitProducerId", 0, 5)
def init_producer_id(req: Request) -> Any:
    b, body = req.broker, req.body
    tid = body.transactional_id
    # Kafka's: Write on the transactional id; an idempotent producer IdempotentWrite on the
    # cluster or Write on some topic
    if tid is not None and not req.allowed("Write", TRANSACTIONAL_ID, tid):
        return _pid_error(req, codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if tid is None and not req.allowed("IdempotentWrite", CLUSTER, CLUSTER_NAME, log=False) \
            and not req.allowed_any("Write", TOPIC):
        b.denied(req, "IdempotentWrite", CLUSTER, CLUSTER_NAME)
        return _pid_error(req, codes.CLUSTER_AUTHORIZATION_FAILED)
    expected = None
    if req.version >= 3 and (body.producer_id, body.producer_epoch) != (-1, -1):
        if body.producer_id < 0 or body.producer_epoch < 0:
            return _pid_error(req, codes.INVALID_REQUEST)
        expected = (body.producer_id, body.producer_epoch)
    if tid is None:  # idempotent: a new producer id every time (Kafka's, KIP-360 too)
        if b.producer_ids is None:
            b.producer_ids = ProducerIds(b.engine)
        return req.respond(throttle_time_ms=0, error_code=0,
                           producer_id=b.producer_ids.next(), producer_epoch=0)
    if not tid:
        return _pid_error(req, codes.INVALID_REQUEST)
    timeout = body.transaction_timeout_ms
    if not 0 < timeout <= b.config.transaction_max_timeout_ms:
        b.log.info("InitProducerId of %r from %s: transaction.timeout.ms %d is not in 1 .. "
                   "transaction.max.timeout.ms (%d)", tid, req.peer, timeout,
                   b.config.transaction_max_timeout_ms)
        return _pid_error(req, codes.INVALID_TRANSACTION_TIMEOUT)
    try:
        pid, epoch = b.engine.txn.init_producer(tid, timeout, expected)
    except RivvenError as e:
        # (Kafka answers a producer id it does not know with PRODUCER_FENCED here)
        code = codes.PRODUCER_FENCED if isinstance(e, ProducerFenced) else txn_code(e)
        if code == codes.PRODUCER_FENCED and req.version < 4:
            code = codes.INVALID_PRODUCER_EPOCH
        _refused(req, "InitProducerId", tid, code, e)
        return _pid_error(req, code)
    finally:
        _ended(req)  # (a new instance aborts its id's open transaction: markers)
    return req.respond(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


def _pid_error(req: Request, code: int) -> Any:
    return req.respond(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)


@api(24, "AddPartitionsToTxn", 0, 3)
def add_partitions_to_txn(req: Request) -> Any:
    """Versions 0-3 (a client's; 4+ are brokers' batches of transactions)."""
    body, R = req.body, req.R
    eng = req.broker.engine
    tid = body.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in body.v3_and_below_topics or [] for p in t.partitions or []]
    errors: dict[tuple[str, int], int] = {}
    if not req.allowed("Write", TRANSACTIONAL_ID, tid or ""):
        wanted = []  # (every partition refused, below)
        errors = {(t.name, p): codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                  for t in body.v3_and_below_topics or [] for p in t.partitions or []}
    writable = {name: req.allowed("Write", TOPIC, name) for name in dict.fromkeys(
        n for n, _ in wanted)}
    for name, p in wanted:  # any unknown partition: none is added (Kafka's rule)
        if not writable[name]:
            errors[(name, p)] = codes.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            meta = eng.topic(name)
            if not 0 <= p < meta.partitions:
                errors[(name, p)] = codes.UNKNOWN_TOPIC_OR_PARTITION
        except (UnknownTopic, InvalidArgument):
            errors[(name, p)] = codes.UNKNOWN_TOPIC_OR_PARTITION
    if errors:
        for tp in wanted:
            errors.setdefault(tp, codes.OPERATION_NOT_ATTEMPTED)
    elif not wanted:
        pass
    elif not tid:
        errors = dict.fromkeys(wanted, codes.INVALID_REQUEST)
    else:
        code = codes.NONE
        try:
            eng.txn.add_partitions(tid, body.v3_and_below_producer_id,
                                   body.v3_and_below_producer_epoch, wanted)
        except RivvenError as e:
            code = txn_code(e, req.version, fenced_since=2)
            _refused(req, "AddPartitionsToTxn", tid, code, e)
        errors = dict.fromkeys(wanted, code)
    T = R.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list] = {}
    for (name, p), code in errors.items():
        by_topic.setdefault(name, []).append(P(partition_index=p, partition_error_code=code))
    return req.respond(throttle_time_ms=0, results_by_topic_v3_and_below=[
        T(name=name, results_by_partition=parts) for name, parts in by_topic.items()])


@api(25, "AddOffsetsToTxn", 0, 4)
def add_offsets_to_txn(req: Request) -> Any:
    body = req.body
    if not req.allowed("Write", TRANSACTIONAL_ID, body.transactional_id):
        return req.respond(throttle_time_ms=0,
                           error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not req.allowed("Read", GROUP, body.group_id):
        return req.respond(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED)
    code = codes.NONE
    try:
        if not body.transactional_id:
            raise InvalidArgument("no transactional id")
        req.broker.engine.txn.add_group(body.transactional_id, body.producer_id,
                                        body.producer_epoch, body.group_id)
    except RivvenError as e:
        # (an id rivven cannot store has no state: InvalidProducerIdMapping; so an
        # InvalidArgument here is the group's name)
        code = codes.INVALID_GROUP_ID if isinstance(e, InvalidArgument) and \
            body.transactional_id else txn_code(e, req.version, fenced_since=2)
        _refused(req, "AddOffsetsToTxn", body.transactional_id, code, e)
    return req.respond(throttle_time_ms=0, error_code=code)


@api(28, "TxnOffsetCommit", 0, 4)
def txn_offset_commit(req: Request) -> Any:
    """Versions 0-4 (5: with KIP-890's implicit AddOffsetsToTxn). The member, generation and
    instance id (v3+, KIP-447) are the group coordinator's to check (``broker.groups``)."""
    b, body, R = req.broker, req.body, req.R
    eng = b.engine
    group = body.group_id
    codes_of: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], int] = {}
    # Kafka's: Write on the transactional id, then Read on the group (every partition refused
    # without either), then Read on each topic
    refused = codes.NONE
    if not req.allowed("Write", TRANSACTIONAL_ID, body.transactional_id):
        refused = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not req.allowed("Read", GROUP, group):
        refused = codes.GROUP_AUTHORIZATION_FAILED
    for t in body.topics or []:
        if refused or not req.allowed("Read", TOPIC, t.name):
            for p in t.partitions or []:
                codes_of[(t.name, p.partition_index)] = \
                    refused or codes.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            meta = eng.topic(t.name)
            count = meta.partitions
        except (UnknownTopic, InvalidArgument):
            count = 0
        for p in t.partitions or []:
            tp = (t.name, p.partition_index)
            if not 0 <= p.partition_index < count:
                codes_of[tp] = codes.UNKNOWN_TOPIC_OR_PARTITION
            elif p.committed_offset < 0:
                codes_of[tp] = codes.INVALID_REQUEST  # (-1: nothing a reader could use)
            else:
                offsets[tp] = p.committed_offset
    code = codes.NONE
    if offsets:
        code = _group_check(req, group)
    if offsets and code == codes.NONE:
        try:
            if not body.transactional_id:
                raise InvalidArgument("no transactional id")
            eng.txn.commit_offsets(body.transactional_id, body.producer_id,
                                   body.producer_epoch, group, offsets,
                                   body.member_id if req.version >= 3 else None)
        except RivvenError as e:
            code = txn_code(e, req.version, fenced_since=2)
            _refused(req, "TxnOffsetCommit", body.transactional_id, code, e)
    codes_of.update(dict.fromkeys(offsets, code))
    T = R.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    by_topic: dict[str, list] = {}
    for (name, p), c in codes_of.items():
        by_topic.setdefault(name, []).append(P(partition_index=p, error_code=c))
    return req.respond(throttle_time_ms=0, topics=[T(name=name, partitions=parts)
                                                   for name, parts in by_topic.items()])


def _group_check(req: Request, group: str) -> int:
    """The group coordinator's word on the member, generation and instance id (KIP-447;
    none before v3, or no coordinator: nothing to check)."""
    groups, body = req.broker.groups, req.body
    check = getattr(groups, "validate_txn_commit", None)
    if check is None or req.version < 3:
        return codes.NONE
    return int(check(group, body.member_id, body.generation_id, body.group_instance_id))


@api(26, "EndTxn", 0, 4)
def end_txn(req: Request) -> Any:
    """Versions 0-4 (5: KIP-890's epoch bump at every end, which these clients do not
    expect)."""
    body = req.body
    if not req.allowed("Write", TRANSACTIONAL_ID, body.transactional_id):
        return req.respond(throttle_time_ms=0,
                           error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    code = codes.NONE
    try:
        if not body.transactional_id:
            raise InvalidArgument("no transactional id")
        req.broker.engine.txn.end_transaction(body.transactional_id, body.producer_id,
                                              body.producer_epoch, bool(body.committed))
    except RivvenError as e:
        code = txn_code(e, req.version, fenced_since=2)
        _refused(req, "EndTxn", body.transactional_id, code, e)
    finally:
        _ended(req)
    return req.respond(throttle_time_ms=0, error_code=code)


# ---------------------------------------------------------------- kafka-transactions.sh
@api(66, "ListTransactions", 0, 1)
def list_transactions(req: Request) -> Any:
    body = req.body
    wanted = set(body.state_filters or [])
    unknown = sorted(s for s in wanted if s not in STATES)
    pids = set(body.producer_id_filters or [])
    duration = body.duration_filter if req.version >= 1 else -1
    rows = req.broker.engine.txn.list_transactions(all=True)
    from .. import clock

    now = clock.now_ms()
    T = req.R.TransactionState
    out = []
    for r in rows:
        if "error" in r:  # a damaged state (listed by rivven txn list)
            continue
        if wanted and r["state"] not in wanted or pids and r["producer_id"] not in pids:
            continue
        if duration >= 0 and now - r["started_ms"] <= duration:
            continue
        if not req.allowed("Describe", TRANSACTIONAL_ID, r["transactional_id"]):
            continue  # (only the ids the principal may Describe: Kafka's)
        out.append(T(transactional_id=r["transactional_id"], producer_id=r["producer_id"],
                     transaction_state=r["state"]))
    return req.respond(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                       transaction_states=out)


@api(65, "DescribeTransactions", 0, 0)
def describe_transactions(req: Request) -> Any:
    txn = req.broker.engine.txn
    T = req.R.TransactionState
    out = []
    for tid in req.body.transactional_ids or []:
        empty = dict(transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                     transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                     topics=[])
        if not req.allowed("Describe", TRANSACTIONAL_ID, tid):
            out.append(T(error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, **empty))
            continue
        if not tid:
            out.append(T(error_code=codes.INVALID_REQUEST, **empty))
            continue
        try:
            r = txn.describe(tid)
        except InvalidArgument:  # no state (or a name that cannot have one)
            out.append(T(error_code=codes.TRANSACTIONAL_ID_NOT_FOUND, **empty))
            continue
        except RivvenError as e:
            req.broker.log.warning("DescribeTransactions of %r: %s", tid, e)
            out.append(T(error_code=codes.UNKNOWN_SERVER_ERROR, **empty))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in r["partitions"]:  # (those of topics the principal may Describe)
            if req.allowed("Describe", TOPIC, topic):
                by_topic.setdefault(topic, []).append(p)
        out.append(T(error_code=0, transactional_id=tid, transaction_state=r["state"],
                     transaction_timeout_ms=r["timeout_ms"],
                     transaction_start_time_ms=r["started_ms"] or -1,
                     producer_id=r["producer_id"], producer_epoch=r["epoch"],
                     topics=[T.TopicData(topic=t, partitions=ps)
                             for t, ps in by_topic.items()]))
    return req.respond(throttle_time_ms=0, transaction_states=out)


@api(61, "DescribeProducers", 0, 0)
def describe_producers(req: Request) -> Any:
    eng = req.broker.engine
    R = req.R
    T = R.TopicResponse
    P, S = T.PartitionResponse, T.PartitionResponse.ProducerState
    out = []
    for t in req.body.topics or []:
        parts = []
        try:
            count = eng.topic(t.name).partitions
            topic_code = codes.NONE
        except UnknownTopic:
            count, topic_code = 0, codes.UNKNOWN_TOPIC_OR_PARTITION
        except InvalidArgument:
            count, topic_code = 0, codes.INVALID_TOPIC_EXCEPTION
        # Read on the topic (Kafka's), after the name's check, before its existence's
        if topic_code != codes.INVALID_TOPIC_EXCEPTION and not req.allowed("Read", TOPIC, t.name):
            count, topic_code = 0, codes.TOPIC_AUTHORIZATION_FAILED
        for p in t.partition_indexes or []:
            if topic_code or not 0 <= p < count:
                parts.append(P(partition_index=p, error_code=topic_code or
                               codes.UNKNOWN_TOPIC_OR_PARTITION, error_message=None,
                               active_producers=[]))
                continue
            try:
                rows = eng.txn.producers(t.name, [p])
            except RivvenError as e:
                parts.append(P(partition_index=p, error_code=codes.code_of(e),
                               error_message=str(e), active_producers=[]))
                continue
            parts.append(P(partition_index=p, error_code=0, error_message=None,
                           active_producers=[S(
                               producer_id=r["producer_id"], producer_epoch=r["epoch"],
                               last_sequence=-1 if r["last_sequence"] is None
                               else r["last_sequence"],
                               last_timestamp=-1 if r["last_timestamp"] is None
                               else r["last_timestamp"],
                               coordinator_epoch=-1,
                               current_txn_start_offset=-1 if r["txn_start_offset"] is None
                               else r["txn_start_offset"]) for r in rows]))
        out.append(T(name=t.name, partitions=parts))
    return req.respond(throttle_time_ms=0, topics=out)
