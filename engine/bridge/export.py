"""``rivven kafka export``: one data-dir topic copied into a Kafka-protocol cluster, exactly
once and resumable.

The protocol (Kafka's own consume-transform-produce, with the data dir as the source):
1. the destination topic is created with the source's partition count, or checked to have at
   least as many, before anything is copied (a record keeps its partition);
2. a transactional producer (``transactional.id`` = ``rivven-mirror-<name>``) is started:
   ``init_transactions`` fences a copy of the same name still running and aborts the
   transaction it left open (a copy killed with -9);
3. only then the mirror group's (``rivven-mirror-<name>``) committed offsets are read,
   require_stable: per destination partition, the next *source* offset to copy;
4. each transaction copies up to ``txn_records`` records read read_committed from the data
   dir (aborted transactions and markers left out) to the same partition, with key, value,
   headers and CreateTime timestamp, and ends with ``send_offsets_to_transaction`` of the
   next source offsets: the records and the positions commit together or not at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..storage.reader import Reach
from . import cluster
from .results import Exported

if TYPE_CHECKING:
    from ..engine import Engine

COMMITTED = "read_committed"


def read_chunk(eng: Engine, topic: str, partition: int, pos: int, want: int
               ) -> tuple[list[tuple[Any, Any, Any, int]], int]:
    """Up to ``want`` committed records of one partition from ``pos``: ``(key, value,
    headers, timestamp)`` each, and the next source offset after them (past the markers and
    aborted batches that follow the last one, when the scan stepped over them: a copy at the
    end of a partition stands at its last stable offset)."""
    out: list[tuple[Any, Any, Any, int]] = []
    reach = Reach(pos)
    nxt = pos
    whole = True
    for offs, tss, keys, values, hs in eng.read_columns(topic, partition, pos, want,
                                                        isolation_level=COMMITTED, reach=reach):
        for off, ts, k, v, h in zip(offs, tss, keys, values, hs):
            if off < pos:  # (the first batch may start before pos)
                continue
            if len(out) == want:
                whole = False
                break
            out.append((k, v, list(h) if h else None, ts))
            nxt = off + 1
        if not whole:
            break
    if whole and nxt == reach.start and reach.end > nxt:
        nxt = reach.end
    return out, nxt


def export_topic(eng: Engine, topic: str, bootstrap: str, name: str,
                 to_topic: str | None = None, config: dict[str, str] | None = None,
                 max_records: int | None = None, txn_records: int = 10_000,
                 timeout: float = 30.0) -> Exported:
    """Copy the committed records of ``topic`` (up to each partition's last stable offset at
    the call, at most ``max_records`` in all) to ``to_topic`` (default: the same name) on the
    cluster at ``bootstrap``, resuming where the mirror ``name`` stopped (see the module)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    if txn_records <= 0:
        raise InvalidArgument(f"txn_records must be positive, not {txn_records}")
    if max_records is not None and max_records < 0:
        raise InvalidArgument(f"max_records must be 0 or more, not {max_records}")
    dest = to_topic or topic
    group = cluster.mirror_group(name)
    rows = eng.offsets.list_offsets(topic, None, COMMITTED)  # (UnknownTopic when absent)
    starts = {r["partition"]: r["start_offset"] for r in rows}
    ends = {r["partition"]: r["end_offset"] for r in rows}
    conf = cluster.settings(bootstrap, config)
    created = cluster.ensure_topic(conf, dest, len(rows), timeout)
    try:
        producer = Producer({**conf, "transactional.id": cluster.transactional_id(name),
                             "enable.idempotence": True, "linger.ms": 5})
        consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                             "isolation.level": COMMITTED})
    except (KafkaException, ValueError) as e:  # (a bad -X setting: librdkafka's message)
        raise cluster.kafka_error("bad client setting", e) from None
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    records = transactions = 0
    try:
        try:
            producer.init_transactions(timeout)
        except KafkaException as e:
            raise cluster.kafka_error(f"cannot start the transactional producer of {name!r}",
                                      e) from None
        done = cluster.committed(consumer, dest, len(rows), timeout)
        # a committed position below the log start: those records were deleted since
        pos = {p: max(done.get(p, starts[p]), starts[p]) for p in starts}
        meta = consumer.consumer_group_metadata()
        left = max_records if max_records is not None else -1
        while left != 0 and any(pos[p] < ends[p] for p in pos):
            budget = txn_records if left < 0 else min(txn_records, left)
            producer.begin_transaction()
            moved: dict[int, int] = {}
            n = 0
            for p in sorted(pos):
                if n >= budget or pos[p] >= ends[p]:
                    continue
                chunk, nxt = read_chunk(eng, topic, p, pos[p], min(budget - n, ends[p] - pos[p]))
                for k, v, h, ts in chunk:
                    while True:
                        try:
                            producer.produce(dest, v, k, partition=p, timestamp=ts, headers=h,
                                             on_delivery=delivered)
                            break
                        except BufferError:  # (the local queue full: let it drain)
                            producer.poll(0.1)
                producer.poll(0)
                n += len(chunk)
                if nxt > pos[p]:
                    moved[p] = nxt
            if not moved:  # (nothing readable below the ends: a partition's end moved back)
                producer.abort_transaction(timeout)
                break
            producer.send_offsets_to_transaction(
                [TopicPartition(dest, p, o) for p, o in sorted(moved.items())], meta, timeout)
            producer.commit_transaction(timeout)
            if errors:  # (commit_transaction raises first; kept as a guard)
                raise cluster.ClusterError(f"records not delivered: {errors[0]}")
            pos.update(moved)
            records += n
            transactions += 1
            if left > 0:
                left -= n
    except KafkaException as e:
        try:
            producer.abort_transaction(timeout)
        except KafkaException:
            pass  # (not in a transaction, or fenced: the next copy's init aborts it)
        raise cluster.kafka_error(f"copy of {topic!r} to {dest!r} stopped", e) from None
    finally:
        consumer.close()
    return Exported(topic=topic, to_topic=dest, group=group, created=created, records=records,
                    transactions=transactions, positions=dict(sorted(pos.items())))
