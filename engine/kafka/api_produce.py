"""Produce: each partition's record batch checked (magic 2, CRC32C, counts, size), transcoded
to a rivven batch body in C (``engine.format.native.kafka_body``) and stored with its producer
fields (``Engine.produce_wire_body``: the partition's producer state checks sequence and epoch,
a duplicate gets its first offset);
answered once durable for acks=1 and acks=all (one node: the ISR is itself), not at all for
acks=0."""

from __future__ import annotations

from typing import Any

from ..errors import CorruptRecordError, RivvenError, UnknownPartition, UnknownTopic, plural
from ..format import kafka_batch
from . import codes
from .registry import Request, api


class PartitionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def store(req: Request, topic: str, partition: int, records: Any, txn_check: Any) -> int:
    """One partition's batch(es) stored; the base offset of the first (PartitionError)."""
    b = req.broker
    eng = b.engine
    if records is None or not len(records):
        raise PartitionError(codes.CORRUPT_MESSAGE, "no record batch")
    try:
        meta = eng.topic(topic)
    except UnknownTopic:
        raise PartitionError(codes.UNKNOWN_TOPIC_OR_PARTITION, "") from None
    if not 0 <= partition < meta.partitions:
        raise PartitionError(codes.UNKNOWN_TOPIC_OR_PARTITION, "")
    limit = min(meta.typed.max_message_bytes, b.config.message_max_bytes)
    mv = memoryview(records)
    try:
        spans = kafka_batch.split(mv)
    except CorruptRecordError as e:
        raise PartitionError(codes.CORRUPT_MESSAGE, str(e)) from None
    first = -1
    for pos, size in spans:
        if size > limit + kafka_batch.LOG_OVERHEAD:
            raise PartitionError(codes.MESSAGE_TOO_LARGE,
                                 f"a record batch of {plural(size, 'byte')} is over max.message.bytes "
                                 f"({limit}) of topic {topic}")
        try:
            kb = kafka_batch.decode(mv[pos:pos + size], max(limit, 1 << 20) * 64)
        except CorruptRecordError as e:
            raise PartitionError(codes.CORRUPT_MESSAGE, str(e)) from None
        if kb.control:
            raise PartitionError(codes.INVALID_RECORD, "a client may not write control batches")
        if kb.body is None:  # (a batch of no records)
            continue
        producer = None
        if kb.producer_id >= 0:
            producer = (kb.producer_id, kb.producer_epoch, kb.base_sequence)
        if kb.transactional:
            if producer is None:
                raise PartitionError(codes.INVALID_RECORD,
                                     "a transactional batch without a producer id")
            txn_check(topic, partition, kb)
        base = eng.produce_wire_body(topic, partition, kb, producer, kb.transactional,
                                     kb.codec)
        if first < 0:
            first = base
    return first


@api(0, "Produce", 3, 9)
def produce(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    acks = body.acks
    T, P = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
    txns = b.txns
    out = []
    appended = False
    for t in body.topic_data:
        parts = []
        for pd in t.partition_data:
            err, base, msg = codes.NONE, -1, None
            if acks not in (-1, 0, 1):
                err, msg = codes.INVALID_REQUIRED_ACKS, f"acks={acks}: use -1 (all), 0 or 1"
            else:
                try:
                    base = store(req, t.name, pd.index, pd.records,
                                 lambda tp, p, kb: txns.check_produce(body.transactional_id,
                                                                      tp, p, kb)
                                 if txns is not None else None)
                    appended = True
                except PartitionError as e:
                    err, msg = e.code, str(e) or None
                except (UnknownTopic, UnknownPartition):
                    err = codes.UNKNOWN_TOPIC_OR_PARTITION
                except RivvenError as e:
                    err, msg = produce_code(e), str(e)
            if err and err != codes.UNKNOWN_TOPIC_OR_PARTITION:
                b.log.info("produce to %s-%d from %s refused (%d): %s", t.name, pd.index,
                           req.peer, err, msg)
            parts.append(P(index=pd.index, error_code=err, base_offset=base,
                           log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                           error_message=msg))
        out.append(T(name=t.name, partition_responses=parts))
    if appended:
        b.appends.appended()
    if acks == 0:
        return None
    return req.respond(responses=out, throttle_time_ms=0)


def produce_code(e: RivvenError) -> int:
    from ..errors import ProducerFenced

    if isinstance(e, ProducerFenced):  # an older epoch: the producer is told to stop
        return codes.INVALID_PRODUCER_EPOCH
    return codes.code_of(e)
