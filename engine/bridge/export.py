"""``rivven kafka export``: data-dir topics copied into a Kafka-protocol cluster, exactly once
and resumable.

The protocol (Kafka's own consume-transform-produce, with the data dir as the source):
1. each destination topic is created with its source's partition count and configs, or
   checked to have at least as many partitions, before anything is copied (a record keeps
   its partition);
2. a transactional producer (``transactional.id`` = ``rivven-mirror-<name>``) is started:
   ``init_transactions`` fences a copy of the same name still running and aborts the
   transaction it left open (a copy killed with -9);
3. only then the mirror group's (``rivven-mirror-<name>``, on the destination) committed
   offsets are read, require_stable: per destination partition, the next *source* offset to
   copy (a partition without one starts at ``start``, default the log start);
4. each transaction copies records read read_committed from the data dir (aborted
   transactions and markers left out) to the same partition, with key, value, headers and
   CreateTime timestamp, and ends with ``send_offsets_to_transaction`` of the next source
   offsets: the records and the positions commit together or not at all.

``at_least_once`` (a cluster without transactions): an idempotent producer, and the
positions committed as plain group offsets after each step's records are acknowledged; a
copy stopped between the two copies that step's records again.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, plural
from ..storage.reader import Reach
from . import cluster
from .copy import TP, TXN_SECONDS, Copy, Lane

if TYPE_CHECKING:
    from ..engine import Engine

COMMITTED = "read_committed"
READ_RECORDS = 10_000  # records read from a partition per call (one step reads more calls)
PRODUCER_DEFAULTS = {"linger.ms": 20, "queue.buffering.max.messages": 500_000,
                     "queue.buffering.max.kbytes": 1 << 20}
NO_TRANSACTIONS = (
    "; if the cluster does not support transactions, --at-least-once copies with an "
    "idempotent producer instead (a copy stopped midway may then copy some records twice)")


def send_chunk(eng: Engine, lane: Lane, pos: int, want: int, producer: Any, cb: Any
               ) -> tuple[int, int, int]:
    """Up to ``want`` committed records of ``lane``'s partition from ``pos``, each produced
    to the destination's same partition as it is read (no list of them is built): how many,
    the next source offset after them (past the markers and aborted batches that follow the
    last one, when the scan stepped over them: a copy at the end of a partition stands at its
    last stable offset), and their key and value bytes."""
    # (positional arguments: confluent-kafka parses them a third faster than keywords;
    # its order: topic, value, key, partition, on_delivery, callback, timestamp, headers)
    produce = producer.produce
    dest, part = lane.dest, lane.partition
    reach = Reach(pos)
    n = nbytes = 0
    nxt = pos
    for offs, tss, keys, values, hs in eng.read_columns(lane.topic, part, pos, want,
                                                        isolation_level=COMMITTED, reach=reach):
        skip = bisect.bisect_left(offs, pos) if offs[0] < pos else 0  # (a batch begun before)
        take = min(len(offs) - skip, want - n)
        if take <= 0:
            break
        stop = skip + take
        ks, vs, hl = keys[skip:stop], values[skip:stop], list(islice(hs, skip, stop))
        tl = islice(tss, skip, stop)
        if any(hl):
            for k, v, h, ts in zip(ks, vs, hl, tl):
                hh = list(h) if h else None
                try:
                    produce(dest, v, k, part, cb, None, ts, hh)
                except BufferError:  # (the local queue full: let it drain)
                    _again(producer, (dest, v, k, part, cb, None, ts, hh))
        else:  # (no headers in the batch: the shorter call)
            for k, v, ts in zip(ks, vs, tl):
                try:
                    produce(dest, v, k, part, cb, None, ts)
                except BufferError:
                    _again(producer, (dest, v, k, part, cb, None, ts))
        n += take
        nbytes += sum(map(len, filter(None, ks))) + sum(map(len, filter(None, vs)))
        nxt = offs[stop - 1] + 1
        if n >= want:
            return n, nxt, nbytes
    if nxt == reach.start and reach.end > nxt:
        nxt = reach.end
    elif n == 0 and reach.end > pos:
        nxt = reach.end
    return n, nxt, nbytes


def _again(producer: Any, args: tuple[Any, ...]) -> None:
    """Produce once the local queue has room (it drains as the broker acknowledges)."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(*args)
            return
        except BufferError:
            continue


class Export(Copy):
    """Data-dir topics into a cluster (see the module). ``partitions`` limits the copy to
    some partitions per topic (a Spark task's one); ``start`` is where a partition the
    mirror group has no position for begins, ``stop`` where every partition ends (else each
    partition's last stable offset when opened, or with ``follow`` whatever comes)."""

    direction = "export"

    def __init__(self, eng: Engine, topics: Sequence[str], conf: Mapping[str, Any],
                 name: str, *, at_least_once: bool = False, **options: Any) -> None:
        super().__init__(eng, topics, conf, name, exactly_once=not at_least_once, **options)
        self.errors: list[str] = []

    # ---------------------------------------------------------------- open
    def open(self) -> None:
        src_rows = {t: self._source_rows(t) for t in self.routes}
        dest = cluster.Cluster(self.conf, self.timeout)
        have = dest.partitions(list(self.routes.values()))
        for topic, rows in src_rows.items():
            self._destination(dest, topic, self.routes[topic], len(rows), have)
        self._clients()
        tps = [(self.routes[t], r["partition"]) for t, rows in src_rows.items() for r in rows]
        done = cluster.committed(self.consumer, tps, self.timeout)
        for topic, rows in src_rows.items():
            for r in rows:
                p = r["partition"]
                if not self.wanted(topic, p):
                    continue
                first = r["offset"] if self.start is not None else r["start_offset"]
                # a committed position below the log start: those records were deleted since
                pos = max(done.get((self.routes[topic], p), first), r["start_offset"])
                self.lanes[(topic, p)] = Lane(topic, p, self.routes[topic], pos)
        self._ends(src_rows)

    def _source_rows(self, topic: str) -> list[Any]:
        rows = self.eng.offsets.list_offsets(topic, self.start, COMMITTED)  # (UnknownTopic)
        for p in self.only.get(topic, []):
            if not 0 <= p < len(rows):
                raise InvalidArgument(f"topic {topic!r} has no partition {p} (it has "
                                      f"{len(rows)})")
        return rows

    def _destination(self, dest: cluster.Cluster, topic: str, to: str, parts: int,
                     have: Mapping[str, int | None]) -> None:
        n = have.get(to)
        if n is None:
            configs = {k: v for k, v in self.eng.topic(topic).config.items()
                       if k in cluster.COPIED_CONFIGS}
            self.warnings += dest.create(to, parts, configs)
            self.created.append(to)
        elif n < parts:
            raise InvalidArgument(
                f"the destination topic {to!r} has {n} partition(s), the source {topic!r} "
                f"{parts}: add partitions to it (kafka-topics --alter --partitions {parts}) "
                "or copy to another topic (--to-topic, --prefix); nothing was copied")

    def _clients(self) -> None:
        from confluent_kafka import KafkaException

        conf = {**PRODUCER_DEFAULTS, **self.conf, "enable.idempotence": True}
        if self.txn_id is not None:
            conf["transactional.id"] = self.txn_id
        self.producer = cluster.client("Producer", conf)
        self.consumer = cluster.client("Consumer", {
            **self.conf, "group.id": self.group, "enable.auto.commit": False,
            "isolation.level": COMMITTED})
        if self.txn_id is None:
            return
        try:
            self.producer.init_transactions(self.timeout)
        except KafkaException as e:
            raise cluster.ClusterError(
                f"cannot start the transactional producer {self.txn_id!r} on "
                f"{self.conf['bootstrap.servers']}: {cluster.message(e)}{NO_TRANSACTIONS}"
            ) from None

    def _ends(self, rows: Mapping[str, list[Any]] | None = None) -> None:
        """Each lane's end: the source's last stable offset now, or ``stop``'s offset."""
        for topic in self.routes:
            got = rows[topic] if rows is not None and self.stop_at is None else \
                self.eng.offsets.list_offsets(topic, self.stop_at, COMMITTED)
            for r in got:
                lane = self.lanes.get((topic, r["partition"]))
                if lane is None:
                    continue
                end = r["end_offset"] if self.stop_at is None else min(r["offset"],
                                                                         r["end_offset"])
                with self.lock:
                    lane.end = end

    def refresh(self) -> None:
        if self.stop_at is None:
            self._ends()

    # ---------------------------------------------------------------- a step
    def step(self) -> int:
        lanes = [lane for lane in self.lanes.values()
                 if lane.end is not None and lane.pos < lane.end]
        if not lanes:
            return 0
        for attempt in range(3):
            try:
                return self._step(lanes)
            except _Retry as e:
                if attempt == 2:
                    raise cluster.ClusterError(f"a transaction failed three times: {e}") from None
        return 0

    def _step(self, lanes: list[Lane]) -> int:
        from confluent_kafka import KafkaException, TopicPartition

        poll = self.producer.poll
        cb = self._delivered if self.txn_id is None else None
        if self.txn_id is not None:
            self.producer.begin_transaction()
        moved: dict[TP, tuple[int, int]] = {}
        n = nbytes = 0
        deadline = time.monotonic() + TXN_SECONDS
        try:
            for lane in lanes:  # (round robin would be fairer; a step is short)
                pos = lane.pos
                copied = 0
                while (pos < (lane.end or 0) and n < self.txn_records
                       and nbytes < self.txn_bytes):
                    want = min(READ_RECORDS, self.txn_records - n, (lane.end or 0) - pos)
                    got, nxt, size = send_chunk(self.eng, lane, pos, want, self.producer, cb)
                    poll(0)
                    n += got
                    copied += got
                    nbytes += size
                    if nxt <= pos:  # (nothing readable below the end: it moved back)
                        with self.lock:
                            lane.end = pos
                        break
                    pos = nxt
                    if time.monotonic() > deadline:
                        break
                if pos > lane.pos:
                    moved[(lane.topic, lane.partition)] = (copied, pos)
                if n >= self.txn_records or nbytes >= self.txn_bytes or \
                        time.monotonic() > deadline:
                    break
            if not moved:
                if self.txn_id is not None:
                    self.producer.abort_transaction(self.timeout)
                return 0
            offsets = [TopicPartition(self.lanes[tp].dest, tp[1], nxt)
                       for tp, (_, nxt) in moved.items()]
            if self.txn_id is not None:
                self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata(), self.timeout)
                self._commit()
            else:
                self._acknowledged()
                self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self._failed(e)
        self.counted(moved, nbytes)
        return n

    def _commit(self) -> None:
        from confluent_kafka import KafkaException

        for _ in range(5):
            try:
                self.producer.commit_transaction(self.timeout)
                return
            except KafkaException as e:
                if not e.args[0].retriable():
                    raise
        self.producer.commit_transaction(self.timeout)

    def _failed(self, e: Any) -> None:
        err = e.args[0]
        if self.txn_id is not None and err.txn_requires_abort():
            try:
                self.producer.abort_transaction(self.timeout)
            except Exception:  # noqa: BLE001 (the next init_transactions aborts it)
                pass
            raise _Retry(cluster.message(e)) from None
        if err.fatal() and err.code() in (-144, 90):  # _FENCED, PRODUCER_FENCED
            raise cluster.ClusterError(
                f"another copy named {self.name!r} started and took over (its producer fenced "
                "this one): run one copy of a name at a time") from None
        raise cluster.kafka_error(f"the copy {self.name!r} stopped", e) from None

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    def _acknowledged(self) -> None:
        left = self.producer.flush(self.timeout)
        if self.errors or left:
            what = self.errors[0] if self.errors else f"{plural(left, 'record')} unacknowledged"
            raise cluster.ClusterError(f"records not delivered ({what}); their positions "
                                       "were not committed: the next run copies them again")

    # ---------------------------------------------------------------- close
    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        if self.producer is not None:
            try:
                self.producer.flush(0)
            except Exception:  # noqa: BLE001 (fenced or failed: what it held is aborted)
                pass
            self.producer = None


class _Retry(Exception):
    """A transaction aborted on an abortable error: the step is tried again."""


def export(eng: Engine, topics: Sequence[str], bootstrap: str, name: str | None = None,
           config: Mapping[str, str] | None = None, follow: bool = False,
           **options: Any) -> Any:
    """Copy ``topics`` from ``eng`` to the cluster at ``bootstrap`` until their ends (with
    ``follow``, for ever: a ``stop`` event in ``options`` ends it); the ``Copied`` result.
    ``options``: Export's (``to_topic``, ``prefix``, ``start``, ``stop``, ``at_least_once``,
    ``partitions``, ``txn_records``, ``timeout``) and run's (``stop_event``, ``on_step``)."""
    from .copy import default_name, run

    event = options.pop("stop_event", None)
    on_step = options.pop("on_step", None)
    copy = Export(eng, topics, cluster.settings(bootstrap, config),
                  name or default_name("export", topics), **options)
    return run(copy, follow, event, on_step=on_step)
