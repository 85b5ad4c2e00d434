"""The produce path: a request's records are checked, partitioned, encoded into batches (split
at ``max.message.bytes``) and appended, each batch once, through its partition's pipeline.

Keyed records go where a Kafka client puts them (murmur2); keyless records of one call stick
to one partition and the next call moves on. The topic's metadata comes from the catalog at
most every CATALOG_RECHECK_S; what changes meanwhile is still noticed: a deleted (or
recreated) topic by its partition's unlinked lock file, added partitions by UnknownPartition —
then the request is tried once more with fresh metadata, unless a batch of it was stored.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from .. import clock
from ..errors import (
    InvalidArgument,
    InvalidTimestamp,
    RivvenError,
    UnknownPartition,
    UnknownTopic,
    plural,
)
from ..format import codecs, native
from ..format.encode import BodySource, EncodedBody, encode_batch, finish_batch
from ..format.records import (
    ATTR_CODEC,
    ATTR_KEY_NULLS,
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    SEQ_MASK,
    EncodedBatch,
)
from ..storage.catalog import TopicMeta
from ..storage.config import TopicConfig
from ..storage.log import PartitionLog, append_each
from ..storage.partitions import check_partition
from ..storage.topics import Topics
from .partitioner import StickyPartitioner, partition_for_key
from .request import ProduceRequest, distinct_partitions, split_batches, too_large

CATALOG_RECHECK_S = 0.01  # a produce stats topics.json at most this often


class ProducePath:
    """The produce path of one engine (thread-safe). ``counters`` counts the engine's own
    produce calls per topic (``call``); ``after_call()`` runs after each that succeeded (the
    WAL's checkpoint check)."""

    def __init__(self, topics: Topics, log_for: Callable[[TopicMeta, int], PartitionLog],
                 attach_wal: Callable[[PartitionLog], None], counters: Any = None,
                 after_call: Callable[[], None] | None = None) -> None:
        self.topics = topics
        self.log_for = log_for
        self.attach_wal = attach_wal
        self.counters = counters
        self.after_call = after_call
        self._calls: dict[str, tuple[Any, Any]] = {}
        self._sticky: dict[str, StickyPartitioner] = defaultdict(StickyPartitioner)
        self._checked = -1e9  # monotonic time of the last catalog look

    @contextlib.contextmanager
    def call(self, topic: str) -> Iterator[None]:
        """One produce call of the engine's: counted per topic (and its errors, made once),
        then ``after_call``."""
        counts = self._calls.get(topic)
        if counts is None and self.counters is not None:
            counts = self._calls[topic] = (
                self.counters.get("rivven_produce_requests_total", topic=topic),
                self.counters.get("rivven_produce_errors_total", topic=topic))
        if counts is not None:
            counts[0].inc()
        try:
            yield
        except RivvenError:
            if counts is not None:
                counts[1].inc()
            raise
        if self.after_call is not None:
            self.after_call()

    def produce(self, req: ProduceRequest) -> list[tuple[int, int]]:
        """Store the request's records; one ``(partition, offset)`` per record once durable."""
        meta, cached = self._meta(req.topic)
        try:
            return self._produce_to(meta, req)
        except (UnknownTopic, UnknownPartition):
            if not cached or req.stored:
                raise
            # the cached catalog entry may be stale: another process deleted and recreated
            # the topic (its partition lock is gone) or added partitions; look again
            fresh = self._fresh(req.topic)
            if fresh is meta:
                raise
            return self._produce_to(fresh, req)

    def produce_arrow(self, topic: str, table: Any, partition: int | None,
                      compression: str | None, stamp: Any = None) -> list[tuple[int, int, int]]:
        """A pyarrow Table's rows (engine.produce.from_arrow); ``(partition, base offset,
        records)`` per batch stored, each partition's in row order. ``stamp``: a
        transactional producer's (its batches are format 2, its partitions join first)."""
        from . import from_arrow

        key, value, ts, headers, part_col = from_arrow.columns(table)
        if not len(value):
            return []
        meta, _ = self._meta(topic)
        cfg = meta.typed
        codec = _codec(cfg, compression)
        if cfg.compacted and (key is None or key.null_count):
            raise InvalidArgument(
                f"topic {meta.name!r} is compacted (cleanup.policy={cfg.cleanup_policy}): "
                "every row needs a key")
        stamped, bounds = 0, cfg.timestamp_bounds
        if cfg.log_append_time:  # (no column: each batch gets its append time)
            ts, stamped = None, ATTR_LOG_APPEND_TIME
        elif bounds is not None and ts is not None:
            check_timestamps(meta.name, bounds, *from_arrow.min_max(ts))
        parts = from_arrow.assign(meta, key, part_col, partition, self._sticky[meta.name])
        grouped = from_arrow.groups(parts)
        if stamp is not None:
            stamp.joining(meta, [p for p, _ in grouped])
        planned = []  # every batch encoded before the first is stored
        for p, idx in grouped:
            log = self.log_for(meta, p)
            cols = [c.take(idx) if c is not None and idx is not None else c
                    for c in (key, value, ts, headers)]
            fields = (-1, -1, -1, stamped) if stamped else None
            if stamp is not None:
                f = stamp.fields(log)
                fields = (f["producer_id"], f["producer_epoch"], f["base_sequence"],
                          f["flags"] | stamped)
            planned.append((p, log, from_arrow.batches(
                cols[0], cols[1], cols[2], cols[3], codec, cfg.max_message_bytes, topic,
                fields)))
        out: list[tuple[int, int, int]] = []
        for p, log, encoded in planned:
            if log.wal is None:
                self.attach_wal(log)
            if stamp is not None:
                for enc in encoded:
                    stamp.appending(log, enc.count)
            bases = log.append_all(encoded)  # (one WAL fsync for the partition's batches)
            out.extend((p, base, enc.count) for base, enc in zip(bases, encoded))
        return out

    def topic_meta(self, topic: str, fresh: bool = False) -> tuple[TopicMeta, bool]:
        """The topic's metadata (from the cache when recent, unless ``fresh``); ``True``
        when it came from the cache."""
        return (self._fresh(topic), False) if fresh else self._meta(topic)

    def _meta(self, topic: str) -> tuple[TopicMeta, bool]:
        """The topic's metadata; ``True`` when it came from the cache."""
        if time.monotonic() - self._checked < CATALOG_RECHECK_S:
            meta = self.topics.cached(topic)
            if meta is not None:
                return meta, True
        return self._fresh(topic), False

    def _fresh(self, topic: str) -> TopicMeta:
        checked = time.monotonic()
        meta = self.topics.get(topic, create_hint=True)
        self._checked = checked
        return meta

    def _produce_to(self, meta: TopicMeta, req: ProduceRequest) -> list[tuple[int, int]]:
        codec, cfg, groups = self.plan(meta, req)
        if req.stamp is not None:
            req.stamp.joining(meta, list(groups))
        n = len(req.values)
        acks: list[tuple[int, int]] = [None] * n if len(groups) > 1 else []  # type: ignore[list-item]
        for p, idx in groups.items():
            log = self.log_for(meta, p)
            if idx is None:
                stored = self._append(log, req, req.keys, req.values, req.headers,
                                      req.timestamps, codec, cfg)
                if len(stored) == 1 and not acks:  # (one batch: the list made in C)
                    acks = native.acks(p, stored[0][0], stored[0][1])
                    continue
                for base, count in stored:
                    acks.extend(native.acks(p, base, count))
                continue
            keys, values, headers, ts = subset(req, idx)
            bases = self._append(log, req, keys, values, headers, ts, codec, cfg)
            it = iter(idx)
            for base, count in bases:
                for off in range(base, base + count):
                    acks[next(it)] = (p, off)
        return acks

    def plan(self, meta: TopicMeta, req: ProduceRequest
             ) -> tuple[int, TopicConfig, dict[int, list[int] | None]]:
        """``(codec, topic config, partition -> record indexes)`` of a request (indexes None:
        every record); raises what the topic refuses."""
        cfg = meta.typed
        codec = _codec(cfg, req.compression)
        if cfg.compacted and None in req.keys:
            raise InvalidArgument(
                f"topic {meta.name!r} is compacted (cleanup.policy={cfg.cleanup_policy}): "
                "every record needs a key")
        return codec, cfg, self._assign(meta, req.keys, req.partition, req.partitions)

    def _assign(self, meta: TopicMeta, keys: Sequence[bytes | None], partition: int | None,
                partitions: Sequence[int | None] | None) -> dict[int, list[int] | None]:
        """Partition -> record indexes (None: every record)."""
        count = meta.partitions
        if partition is not None:
            check_partition(meta, partition)
            return {partition: None}
        distinct = distinct_partitions(partitions) if partitions is not None else None
        if distinct is not None and partitions is not None:  # (all given: no key hashed)
            for d in distinct:
                check_partition(meta, d)
            if len(distinct) == 1:
                return {next(iter(distinct)): None}
            given: dict[int, list[int]] = defaultdict(list)
            for i, g in enumerate(cast("Sequence[int]", partitions)):
                given[g].append(i)
            return dict(given)
        if partitions is not None and partitions.count(None) != len(partitions):
            per = list(partitions)
        elif count == 1:
            return {0: None}
        else:
            per = native.key_partitions(keys, count)
            if per is not None and None not in per:
                by_key: dict[int, list[int]] = defaultdict(list)
                for i, p in enumerate(per):
                    by_key[p].append(i)
                return {next(iter(by_key)): None} if len(by_key) == 1 else dict(by_key)
            per = [None] * len(keys)
        sticky = None
        groups: dict[int, list[int]] = defaultdict(list)
        for i, (k, p) in enumerate(zip(keys, per)):
            if p is None:
                if k is not None:
                    p = partition_for_key(k, count)
                else:
                    if sticky is None:
                        sticky = self._sticky[meta.name].next(count)
                    p = sticky
            else:
                check_partition(meta, p)
            groups[p].append(i)
        if len(groups) == 1:
            return {next(iter(groups)): None}
        return dict(groups)

    def _append(self, log: PartitionLog, req: ProduceRequest, keys: Sequence,
                values: Sequence, headers: Sequence | None, ts: int | list[int], codec: int,
                cfg: TopicConfig) -> list[tuple[int, int]]:
        """Encode (splitting at max.message.bytes) and append; ``[(base_offset, count)]``."""
        if log.wal is None:
            self.attach_wal(log)
        stamp = req.stamp
        producer, flags = None, 0
        if stamp is not None:  # (a transactional producer's batches: format 2)
            f = stamp.fields(log)
            producer = (f["producer_id"], f["producer_epoch"], f["base_sequence"])
            flags = f["flags"]
        encoded = encode(log.topic, keys, values, headers, ts, codec, cfg, producer, flags)
        if stamp is None:  # every batch logged, then one WAL fsync for all
            batches = [enc for _, enc in encoded]
            bases: list[int] = []
            try:
                log.append_all(batches, bases)
            finally:
                req.stored += len(bases)
            return [(base, enc.count) for base, enc in zip(bases, batches)]
        out = []
        for _, enc in encoded:
            stamp.appending(log, enc.count)
            out.append((log.append(enc), enc.count))
            req.stored += 1
        return out

    def append_wire(self, topic: str, partition: int, keys: Sequence[bytes | None],
                    values: Sequence[bytes | None], headers: Sequence | None,
                    timestamps: list[int], producer: tuple[int, int, int] | None, flags: int,
                    codec: int, append_time: int | None = None) -> int:
        """A batch a Kafka client sent, as it sent it: one partition, its producer fields
        (None: a plain batch) and transaction flag kept, stored with the producer's ``codec``
        where the topic's compression.type is ``producer``; its base offset once durable (a
        duplicate's original one). ``append_time``: what a LogAppendTime topic stamps (now
        when None)."""
        log, cfg, codec = self._wire_log(topic, partition, codec)
        _refuse_null_keys(cfg, topic, None in keys)
        batches = [enc for _, enc in encode(topic, keys, values, headers, timestamps, codec,
                                            cfg, producer, flags, append_time)]
        return self._append_wire(log, batches, producer)

    def append_wire_body(self, topic: str, partition: int, records: BodySource,
                         producer: tuple[int, int, int] | None, flags: int, codec: int) -> int:
        """``append_wire`` of records that lay themselves out as batch bodies (a Kafka
        batch's, transcoded in C): each batch is finished around its body, without a Python
        object per record; records larger as one batch than max.message.bytes are cut into
        bodies that fit (each batch's sequence its first record's)."""
        log, batches = self._wire_batches(topic, partition, records, producer, flags, codec)
        return self._append_wire(log, batches, producer)

    def append_wire_bodies(self, items: Sequence[tuple]) -> list[int | RivvenError]:
        """``append_wire_body`` of several (topic, partition, records, producer, flags,
        codec[, append_time]) at once, one WAL fsync for all (a Produce request's
        partitions); each item's base offset or its error. ``append_time``: what a
        LogAppendTime topic stamps (now when None or left out)."""
        out: list[Any] = [None] * len(items)
        pairs: list[tuple[PartitionLog, EncodedBatch, int]] = []
        for i, item in enumerate(items):
            topic, partition, records, producer, flags, codec = item[:6]
            try:
                log, batches = self._wire_batches(topic, partition, records, producer, flags,
                                                  codec, item[6] if len(item) > 6 else None)
            except RivvenError as e:
                out[i] = e
                continue
            pairs.extend((log, b, i) for b in batches)
        errors: list[Exception | None] = [None] * len(pairs)
        bases = append_each([(log, b) for log, b, _ in pairs], errors=errors)
        for (_, _, i), base, err in zip(pairs, bases, errors):
            if err is not None and not isinstance(err, RivvenError):
                raise err
            if out[i] is None or (err is not None and not isinstance(out[i], Exception)):
                out[i] = err if err is not None else base
        return out

    def _wire_batches(self, topic: str, partition: int, records: BodySource,
                      producer: tuple[int, int, int] | None, flags: int, codec: int,
                      append_time: int | None = None
                      ) -> tuple[PartitionLog, list[EncodedBatch]]:
        log, cfg, codec = self._wire_log(topic, partition, codec)
        if cfg.log_append_time or cfg.timestamp_bounds is not None:
            # timestamps stamped or checked (message.timestamp.*): through the columns, as
            # append_wire (the records as Python objects: a topic that asks for it pays it)
            cols = cast(Any, records)
            _refuse_null_keys(cfg, topic, None in cols.keys)
            return log, [enc for _, enc in encode(topic, cols.keys, cols.values, cols.headers,
                                                  cols.timestamps, codec, cfg, producer, flags,
                                                  append_time)]
        limit = cfg.max_message_bytes
        # uncompressed, bodies cut to fit at once; compressed, one body first (it may fit)
        max_body = 0 if codec else limit - HEADER_SIZE
        parts = records.bodies(max_body)
        if not parts:
            raise InvalidArgument("a batch of no records")
        _refuse_null_keys(cfg, topic, any(p.attributes & ATTR_KEY_NULLS for p in parts))
        max_body = max_body or limit - HEADER_SIZE
        while True:
            batches = [_finish(b, codec, flags, producer) for b in parts]
            over = [(b, e) for b, e in zip(parts, batches) if len(e) > limit]
            if not over:
                return log, batches
            if over[0][0].record_count == 1 or max_body < 64:
                b, e = over[0]
                raise too_large(b.first, f"record {b.first} is {plural(len(e), 'byte')} as a "
                                 f"batch, over max.message.bytes={limit} of topic {topic!r}; "
                                 f"raise it with 'rivven topic alter-config {topic} --set "
                                 "max.message.bytes=N'")
            if len(parts) > 1:  # (compressed, a body that fit came out larger: cut finer)
                max_body //= 2
            parts = records.bodies(max_body)

    def _wire_log(self, topic: str, partition: int, codec: int
                  ) -> tuple[PartitionLog, TopicConfig, int]:
        """The partition a Kafka client's batch goes to, the topic's config, the codec to
        store it with."""
        meta, cached = self._meta(topic)
        if cached and partition >= meta.partitions:
            meta = self._fresh(topic)
        check_partition(meta, partition)
        cfg = meta.typed
        if cfg.compression_type != "producer":
            codec = _codec(cfg, None)
        log = self.log_for(meta, partition)
        if log.wal is None:
            self.attach_wal(log)
        return log, cfg, codec

    @staticmethod
    def _append_wire(log: PartitionLog, batches: list[EncodedBatch],
                     producer: tuple[int, int, int] | None) -> int:
        if producer is None:
            bases: list[int] = []
            log.append_all(batches, bases)
            return bases[0]
        return [log.append(enc) for enc in batches][0]

    def append_encoded(self, log: PartitionLog, batch: EncodedBatch) -> int:
        """Append a batch encoded elsewhere (an idempotent producer's, a marker); its base
        offset (the original one when the partition's producer state finds it a duplicate)."""
        if log.wal is None:
            self.attach_wal(log)
        return log.append(batch)


def subset(req: ProduceRequest, idx: list[int]
           ) -> tuple[list, list, list | None, int | list[int]]:
    """``(keys, values, headers, timestamps)`` of the records at ``idx``."""
    ts = req.timestamps
    hs = req.headers
    return ([req.keys[i] for i in idx], [req.values[i] for i in idx],
            [hs[i] for i in idx] if hs is not None else None,
            ts if isinstance(ts, int) else [ts[i] for i in idx])


def encode(topic: str, keys: Sequence, values: Sequence, headers: Sequence | None,
           ts: int | list[int], codec: int, cfg: TopicConfig,
           producer: tuple[int, int, int] | None = None, flags: int = 0,
           append_time: int | None = None) -> list[tuple[int, EncodedBatch]]:
    """One partition's records as batches split at max.message.bytes, in record order:
    ``(index of the batch's first record, batch)``. With ``producer`` = (producer id, epoch,
    first sequence) they are format 2, each batch's sequence its first record's, with the
    attribute ``flags`` (ATTR_TRANSACTIONAL: a transaction's). The topic's
    message.timestamp.type applies (``stored_timestamps``)."""
    ts, stamped = stored_timestamps(topic, cfg, ts, append_time)
    flags |= stamped
    limit = cfg.max_message_bytes
    pid, epoch, seq = producer or (-1, -1, -1)  # (-1: format 1)
    batch = encode_batch(keys, values, ts, headers, codec, producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, flags=flags)
    if len(batch) <= limit:
        return [(0, batch)]
    chunks = split_batches(keys, values, headers, limit, topic)
    batches = []
    for a, b in chunks:
        t = ts if isinstance(ts, int) else ts[a:b]
        h = headers[a:b] if headers is not None else None
        enc = encode_batch(keys[a:b], values[a:b], t, h, codec, producer_id=pid,
                           producer_epoch=epoch,
                           base_sequence=(seq + a) & SEQ_MASK if pid >= 0 else -1, flags=flags)
        if len(enc) > limit:
            if b - a == 1:
                raise too_large(
                    a, f"record {a} is {plural(len(enc), 'byte')} as a batch, over max.message.bytes="
                    f"{limit} of topic {topic!r}; raise it with 'rivven topic "
                    f"alter-config {topic} --set max.message.bytes=N'")
            mid = (a + b) // 2
            chunks.extend([(a, mid), (mid, b)])
            continue
        batches.append((a, enc))
    batches.sort(key=lambda x: x[0])
    return batches


def stored_timestamps(topic: str, cfg: TopicConfig, ts: int | list[int],
                      append_time: int | None = None) -> tuple[int | list[int], int]:
    """The timestamps a batch of ``topic`` is stored with, and its timestamp flag. With
    message.timestamp.type=LogAppendTime every record gets the append time (``append_time``,
    else now) and the batch ATTR_LOG_APPEND_TIME, whoever produced it (as Kafka's broker
    does); with CreateTime the producer's, checked against message.timestamp.before.max.ms
    and .after.max.ms (InvalidTimestamp: the whole call is refused)."""
    if cfg.log_append_time:
        return (clock.now_ms() if append_time is None else append_time), ATTR_LOG_APPEND_TIME
    bounds = cfg.timestamp_bounds
    if bounds is not None:
        if isinstance(ts, int):
            check_timestamps(topic, bounds, ts, ts)
        elif ts:
            lo = min(ts)
            if lo < 0:  # (-1: no timestamp, which Kafka does not check)
                lo = min((t for t in ts if t >= 0), default=0)
            check_timestamps(topic, bounds, lo, max(ts))
    return ts, 0


def check_timestamps(topic: str, bounds: tuple[int, int], lo: int, hi: int,
                     now: int | None = None) -> None:
    """InvalidTimestamp unless the timestamps ``lo..hi`` are within ``bounds`` = (before,
    after) of ``now`` (Kafka's message.timestamp.before.max.ms / after.max.ms)."""
    now = clock.now_ms() if now is None else now
    before, after = bounds
    if now - lo > before:
        bad, key, limit = lo, "message.timestamp.before.max.ms", before
    elif hi - now > after:
        bad, key, limit = hi, "message.timestamp.after.max.ms", after
    else:
        return
    raise InvalidTimestamp(
        f"record timestamp {bad} is out of range for topic {topic!r}: {key}={limit} allows "
        f"[{now - before}, {now + after}] at {now}; send current timestamps or change {key} "
        "(or set message.timestamp.type=LogAppendTime)")


def _refuse_null_keys(cfg: TopicConfig, topic: str, null_keys: bool) -> None:
    if cfg.compacted and null_keys:
        raise InvalidArgument(
            f"topic {topic!r} is compacted (cleanup.policy={cfg.cleanup_policy}): "
            "every record needs a key")


def _finish(body: EncodedBody, codec: int, flags: int, producer: tuple[int, int, int] | None
            ) -> EncodedBatch:
    pid, epoch, seq = producer or (-1, -1, -1)
    if pid >= 0:
        seq = (seq + body.first) & SEQ_MASK
    n = body.record_count
    return finish_batch(body.buf, memoryview(body.buf)[HEADER_SIZE:],
                        body.attributes | (codec & ATTR_CODEC) | flags, n, n - 1,
                        body.first_timestamp, body.max_timestamp, codec, pid,
                        epoch, seq)


def _codec(cfg: TopicConfig, compression: str | None) -> int:
    if compression is not None:
        return codecs.codec_id(compression)
    if cfg.compression_type in ("producer", "none"):
        return codecs.NONE
    return codecs.codec_id(cfg.compression_type)
