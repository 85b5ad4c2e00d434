"""Produce: each partition's record batch checked (magic 2, CRC32C, counts, size), transcoded
to a rivven batch body in C (``engine.format.native.kafka_body``) and stored with its producer
fields (``Engine.produce_wire_body``: the partition's producer state checks sequence and epoch,
a duplicate gets its first offset);
answered once durable for acks=1 and acks=all (one node: the ISR is itself), not at all for
acks=0."""

from __future__ import annotations

import contextlib
from typing import Any

from .. import clock
from ..errors import CorruptRecordError, RivvenError, UnknownPartition, UnknownTopic, plural
from ..format import kafka_batch
from ..format.records import HEADER_SIZE as RIVVEN_HEADER_SIZE
from ..security.acl import TOPIC, TRANSACTIONAL_ID
from . import codes
from .registry import Request, api


class PartitionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def prepare(req: Request, topic: str, partition: int, records: Any,
            metas: dict[str, Any] | None = None
            ) -> list[tuple[kafka_batch.KafkaBatch, tuple[int, int, int] | None]]:
    """One partition's batch(es) checked and transcoded, each with its producer fields
    (PartitionError); ``metas`` caches the topics' metadata for one request."""
    b = req.broker
    eng = b.engine
    if records is None or not len(records):
        raise PartitionError(codes.CORRUPT_MESSAGE, "no record batch")
    meta = metas.get(topic) if metas is not None else None
    if meta is None:
        try:
            meta = eng.topic(topic)
        except UnknownTopic:
            raise PartitionError(codes.UNKNOWN_TOPIC_OR_PARTITION, "") from None
        if metas is not None:
            metas[topic] = meta
    if not 0 <= partition < meta.partitions:
        raise PartitionError(codes.UNKNOWN_TOPIC_OR_PARTITION, "")
    limit = min(meta.typed.max_message_bytes, b.config.message_max_bytes)
    mv = memoryview(records)
    try:
        spans = kafka_batch.split(mv)
    except CorruptRecordError as e:
        raise PartitionError(codes.CORRUPT_MESSAGE, str(e)) from None
    out = []
    for pos, size in spans:
        if size > limit + kafka_batch.LOG_OVERHEAD:
            raise PartitionError(codes.MESSAGE_TOO_LARGE,
                                 f"a record batch of {plural(size, 'byte')} is over max.message.bytes "
                                 f"({limit}) of topic {topic}")
        try:
            # (the bodies made as checked, cut as the engine stores an uncompressed topic's)
            kb = kafka_batch.decode(mv[pos:pos + size], max(limit, 1 << 20) * 64,
                                    meta.typed.max_message_bytes - RIVVEN_HEADER_SIZE)
        except CorruptRecordError as e:
            raise PartitionError(codes.CORRUPT_MESSAGE, str(e)) from None
        if kb.control:
            raise PartitionError(codes.INVALID_RECORD, "a client may not write control batches")
        if kb.attributes & kafka_batch.ATTR_LOG_APPEND_TIME:  # (as Kafka refuses it)
            raise PartitionError(codes.INVALID_TIMESTAMP, "a producer may not set the timestamp "
                                 "type to LogAppendTime: the topic's message.timestamp.type does")
        if not kb.count:  # (a batch of no records)
            continue
        producer = None
        if kb.producer_id >= 0:
            producer = (kb.producer_id, kb.producer_epoch, kb.base_sequence)
        if kb.transactional:
            if producer is None:
                raise PartitionError(codes.INVALID_RECORD,
                                     "a transactional batch without a producer id")
        out.append((kb, producer))
    return out


def append_time_of(meta: Any) -> int | None:
    """The time a LogAppendTime topic stamps on a request's records (None: CreateTime)."""
    return clock.now_ms() if meta.typed.log_append_time else None


def store(req: Request, topic: str, partition: int, records: Any) -> int:
    """One partition's batch(es) stored (no transaction); the base offset of the first
    (PartitionError)."""
    items = prepare(req, topic, partition, records)
    got = req.broker.engine.produce_wire_bodies(
        [(topic, partition, kb, producer, kb.transactional, kb.codec) for kb, producer in items])
    for r in got:
        if isinstance(r, Exception):
            raise r
    return got[0] if got else -1


@api(0, "Produce", 3, 9)
def produce(req: Request) -> Any:
    return produce_group([req])[0]


def produce_group(reqs: list[Request]) -> list[Any]:
    """Produce requests (one, or several a client pipelined on one connection) handled as
    one: every partition's batches checked and transcoded, then the plain and idempotent
    ones stored at once, one WAL fsync for all (engine.storage.log.append_each), and each
    transactional one under its transaction's check (its id's lock held across the append:
    the transaction cannot end in between); each partition answered on its own, each
    request's response in order (None for acks=0)."""
    b = reqs[0].broker
    items: list[tuple] = []
    owner: list[list[Any]] = []  # the answer each item belongs to
    txn_items: list[tuple[Request, tuple, list[Any]]] = []
    metas: dict[str, Any] = {}
    answers: list[list[list[Any]]] = []  # per request, per partition: [topic, index, error,
    for req in reqs:                     # base, message, append time]
        answers.append(_prepare_request(req, items, owner, txn_items, metas))
    got: list[Any] = b.engine.produce_wire_bodies(items) if items else []
    for a, r in zip(owner, got):
        _answer(a, r)
    for req, item, a in txn_items:
        if a[2] != codes.NONE:
            continue
        _answer(a, _store_transactional(req, item))
    if items or txn_items:
        b.appends.appended()
    return [_response(req, ans) for req, ans in zip(reqs, answers)]


def _answer(a: list[Any], r: Any) -> None:
    if a[2] != codes.NONE:
        return
    if isinstance(r, PartitionError):
        a[2], a[3], a[4] = r.code, -1, str(r) or None
    elif isinstance(r, (UnknownTopic, UnknownPartition)):
        a[2], a[3] = codes.UNKNOWN_TOPIC_OR_PARTITION, -1
    elif isinstance(r, RivvenError):
        a[2], a[3], a[4] = produce_code(r), -1, str(r)
    elif a[3] < 0:
        a[3] = r


def _store_transactional(req: Request, item: tuple) -> Any:
    """A transactional batch: checked against its producer's ongoing transaction
    (engine.kafka.api_txn), stored while the check holds; its base offset or the error."""
    txns = req.broker.txns
    topic, partition, kb = item[0], item[1], item[2]
    guard: Any = contextlib.nullcontext()
    try:
        if txns is not None:
            guard = txns.check_produce(req.body.transactional_id, topic, partition, kb)
        with guard:
            (r,) = req.broker.engine.produce_wire_bodies([item])
        return r
    except (PartitionError, RivvenError) as e:
        return e


# a Kafka record batch's attributes (after base offset, length, leader epoch, magic, CRC) and
# its transactional bit
_ATTRIBUTES_AT, _TRANSACTIONAL = 21, 0x10


def _has_transactional(body: Any) -> bool:
    """Does a partition's first batch say it is transactional (Kafka's
    ``RequestUtils.hasTransactionalRecords``: what the authorization of the transactional id
    looks at, before anything is decoded)?"""
    for t in body.topic_data:
        for pd in t.partition_data:
            r = pd.records
            if r is not None and len(r) > _ATTRIBUTES_AT + 1 and \
                    r[_ATTRIBUTES_AT + 1] & _TRANSACTIONAL:
                return True
    return False


def _prepare_request(req: Request, items: list[tuple], owner: list[list[Any]],
                     txn_items: list[tuple[Request, tuple, list[Any]]],
                     metas: dict[str, Any]) -> list[list[Any]]:
    """Each partition's answer; its batches checked and queued for the append. Kafka's
    authorization first: a transactional request needs Write on its transactional id (every
    partition refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED without it), each topic Write
    (TOPIC_AUTHORIZATION_FAILED, whether it exists or not)."""
    body = req.body
    acks = body.acks
    answers = []
    txn_refused = _has_transactional(body) and (
        body.transactional_id is None or
        not req.allowed("Write", TRANSACTIONAL_ID, body.transactional_id))
    writable: dict[str, bool] = {}
    for t in body.topic_data:
        for pd in t.partition_data:
            a: list[Any] = [t.name, pd.index, codes.NONE, -1, None, -1]
            answers.append(a)
            if txn_refused:
                a[2] = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                continue
            if t.name not in writable:
                writable[t.name] = req.allowed("Write", TOPIC, t.name)
            if not writable[t.name]:
                a[2] = codes.TOPIC_AUTHORIZATION_FAILED
                continue
            if acks not in (-1, 0, 1):
                a[2], a[4] = codes.INVALID_REQUIRED_ACKS, f"acks={acks}: use -1 (all), 0 or 1"
                continue
            try:
                batches = prepare(req, t.name, pd.index, pd.records, metas)
                stamp = append_time_of(metas[t.name]) if batches else None
                if stamp is not None:
                    a[5] = stamp
                for kb, producer in batches:
                    item = (t.name, pd.index, kb, producer, kb.transactional, kb.codec, stamp)
                    if kb.transactional:
                        txn_items.append((req, item, a))
                    else:
                        items.append(item)
                        owner.append(a)
            except PartitionError as e:
                a[2], a[4] = e.code, str(e) or None
            except (UnknownTopic, UnknownPartition):
                a[2] = codes.UNKNOWN_TOPIC_OR_PARTITION
            except RivvenError as e:
                a[2], a[4] = produce_code(e), str(e)
    return answers


# (an unknown topic is the client's business; a refusal is logged rate-limited by the server)
_NOT_LOGGED = (codes.UNKNOWN_TOPIC_OR_PARTITION, codes.TOPIC_AUTHORIZATION_FAILED,
               codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _response(req: Request, answers: list[list[Any]]) -> Any:
    b, R = req.broker, req.R
    T, P = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
    out: dict[str, list] = {}
    for name, index, err, base, msg, append_time in answers:
        if err and err not in _NOT_LOGGED:
            b.log.info("produce to %s-%d from %s refused (%d): %s", name, index, req.peer, err,
                       msg)
        out.setdefault(name, []).append(P(index=index, error_code=err, base_offset=base,
                                          log_append_time_ms=append_time if not err else -1,
                                          log_start_offset=-1, record_errors=[],
                                          error_message=msg))
    if req.body.acks == 0:
        return None
    return req.respond(responses=[T(name=n, partition_responses=ps) for n, ps in out.items()],
                       throttle_time_ms=0)


def produce_code(e: RivvenError) -> int:
    from ..errors import ProducerFenced

    if isinstance(e, ProducerFenced):  # an older epoch: the producer is told to stop
        return codes.INVALID_PRODUCER_EPOCH
    return codes.code_of(e)
