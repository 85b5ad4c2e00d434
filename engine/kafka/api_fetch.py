"""Fetch and ListOffsets.

Fetch sends each partition's batches as Kafka's magic-2 batches (uncompressed), whole, from
the one holding the fetch offset, markers and aborted transactions' batches included with
the aborted transactions list (read_committed clients leave them out, as against Kafka),
up to the high watermark or (read_committed) the last stable offset. It long-polls: with
fewer than ``min_bytes`` it waits up to ``max_wait_ms``, woken by this process's appends at
once and looking again every 20 ms for other processes'. No fetch sessions (KIP-227): the
session id answered is 0, so clients send full requests, which is what a client does when a
broker keeps no session."""

from __future__ import annotations

import time
from typing import Any

from ..errors import OffsetOutOfRange, RivvenError, UnknownPartition, UnknownTopic
from ..security.acl import TOPIC
from . import codes
from .registry import Request, api

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def to_kafka(fb: Any) -> bytes:
    """One rivven batch (``engine.fetch.wire.FetchedBatch``) as a Kafka magic-2 batch (the
    engine's fetch made it, in C)."""
    return fb.kafka


def fetch_once(req: Request, refused: frozenset[str] = frozenset()) -> tuple[Any, int, bool]:
    """The response as things stand, its record bytes, and whether a partition erred; the
    topics in ``refused`` (no Read) are answered TOPIC_AUTHORIZATION_FAILED, not read."""
    b, body, R = req.broker, req.body, req.R
    eng = b.engine
    level = "read_committed" if body.isolation_level == 1 else "read_uncommitted"
    left = min(body.max_bytes if req.version >= 3 else 1 << 31, b.config.fetch_max_bytes)
    T, P = R.FetchableTopicResponse, R.FetchableTopicResponse.PartitionData
    A = P.AbortedTransaction
    total, erred = 0, False
    out = []
    for t in body.topics:
        parts = []
        for fp in t.partitions:
            err, hw, lso, start = codes.NONE, -1, -1, -1
            aborted: list | None = None
            records = b""
            if t.topic in refused:
                parts.append(P(partition_index=fp.partition,
                               error_code=codes.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1,
                               last_stable_offset=-1, log_start_offset=-1,
                               aborted_transactions=None, preferred_read_replica=-1,
                               records=b""))
                continue
            try:
                limit = max(0, min(fp.partition_max_bytes, left))
                f = eng.fetch(t.topic, fp.partition, fp.fetch_offset, limit or 1, level)
                hw, lso, start = f.high_watermark, f.last_stable_offset, f.log_start_offset
                if f.batches and (limit or total == 0):
                    chunks = []
                    for fb in f.batches:
                        chunks.append(to_kafka(fb))
                        if sum(map(len, chunks)) >= limit:
                            break
                    records = b"".join(chunks)
                if body.isolation_level == 1:
                    aborted = [A(producer_id=p, first_offset=o) for p, o in f.aborted]
            except (UnknownTopic, UnknownPartition):
                err = codes.UNKNOWN_TOPIC_OR_PARTITION
            except OffsetOutOfRange:
                err = codes.OFFSET_OUT_OF_RANGE
                try:
                    start, hw = eng.offsets.of_partition(t.topic, fp.partition)
                except RivvenError:
                    pass
            except RivvenError as e:
                err = codes.code_of(e)
                b.log.warning("fetch of %s-%d at %d for %s failed: %s", t.topic, fp.partition,
                              fp.fetch_offset, req.peer, e)
            erred = erred or err != codes.NONE
            total += len(records)
            left -= len(records)
            parts.append(P(partition_index=fp.partition, error_code=err, high_watermark=hw,
                           last_stable_offset=lso, log_start_offset=start,
                           aborted_transactions=aborted, preferred_read_replica=-1,
                           records=records))
        out.append(T(topic=t.topic, partitions=parts))
    resp = req.respond(throttle_time_ms=0, error_code=0, session_id=0, responses=out)
    return resp, total, erred


@api(1, "Fetch", 4, 12)
async def fetch(req: Request) -> Any:
    b, body = req.broker, req.body
    deadline = time.monotonic() + max(0, body.max_wait_ms) / 1000
    # Read on each topic (Kafka's): the others answered TOPIC_AUTHORIZATION_FAILED, not waited
    # for; the ACLs looked at once (not at every look again)
    refused = frozenset(t.topic for t in body.topics if not req.allowed("Read", TOPIC, t.topic))
    # a fetch of no partition is answered at once, as Kafka's broker does: the Java client
    # sends one to close its fetch session (epoch -1) when it closes, and would otherwise
    # wait max.wait.ms for it
    empty = not any(t.partitions for t in body.topics if t.topic not in refused)
    while True:
        resp, nbytes, erred = await b.call(fetch_once, req, refused)
        left = deadline - time.monotonic()
        if nbytes >= max(1, body.min_bytes) or erred or left <= 0 or b.stopping or empty:
            return resp
        await b.appends.wait(left)


@api(2, "ListOffsets", 1, 7)
def list_offsets(req: Request) -> Any:
    b, body, R = req.broker, req.body, req.R
    eng = b.engine
    level = "read_committed" if req.version >= 2 and body.isolation_level == 1 \
        else "read_uncommitted"
    T, P = R.ListOffsetsTopicResponse, R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    out = []
    for t in body.topics:
        parts = []
        described = req.allowed("Describe", TOPIC, t.name)
        for p in t.partitions:
            err, ts, off = codes.NONE, -1, -1
            if not described:  # (whether the topic exists or not)
                parts.append(P(partition_index=p.partition_index,
                               error_code=codes.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                               offset=-1, leader_epoch=-1))
                continue
            try:
                ts, off = _offset(eng, t.name, p.partition_index, p.timestamp, level)
            except (UnknownTopic, UnknownPartition):
                err = codes.UNKNOWN_TOPIC_OR_PARTITION
            except RivvenError as e:
                err = codes.code_of(e)
            parts.append(P(partition_index=p.partition_index, error_code=err, timestamp=ts,
                           offset=off, leader_epoch=0))
        out.append(T(name=t.name, partitions=parts))
    return req.respond(throttle_time_ms=0, topics=out)


def _offset(eng: Any, topic: str, partition: int, at: int, level: str) -> tuple[int, int]:
    """``(timestamp, offset)`` Kafka answers for ``at``: the log end (read_committed: the last
    stable offset), the log start, the record with the largest timestamp, or the first
    record at or after a time (-1, -1 when none is)."""
    start, end = eng.offsets.of_partition(topic, partition, level)
    if at == LATEST:
        return -1, end
    if at == EARLIEST:
        return -1, start
    if at == MAX_TIMESTAMP:
        return _max_timestamp(eng, topic, partition, start, end, level)
    if at < 0:
        raise InvalidTimestamp(at)
    off = eng.offsets.for_time(topic, partition, at, level)
    if off is None:
        return -1, -1
    recs = eng.read(topic, partition, off, 1, level)
    return (recs[0].timestamp if recs else at), off


def _max_timestamp(eng: Any, topic: str, partition: int, start: int, end: int, level: str
                   ) -> tuple[int, int]:
    best_ts, best_off = -1, -1
    offset = start
    while offset < end:
        f = eng.fetch(topic, partition, offset, 1 << 20, level)
        if not f.batches:
            break
        for fb in f.batches:
            h = fb.header
            cols = fb.columns if fb.marker is None and h.max_timestamp > best_ts else None
            if cols is not None:
                offs, ts = cols[0], cols[1]
                for o, t in zip(offs, ts):
                    if t > best_ts and o >= start:
                        best_ts, best_off = t, o
            offset = h.next_offset
    return best_ts, best_off


class InvalidTimestamp(RivvenError):
    def __init__(self, at: int) -> None:
        super().__init__(f"ListOffsets timestamp {at}: use -1 (latest), -2 (earliest), -3 (max "
                         "timestamp) or a time in ms")
