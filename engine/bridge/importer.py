"""``rivven kafka import``: topics of a Kafka-protocol cluster copied into the data dir,
exactly once and resumable.

The protocol (the mirror image of export.py, the data dir now the destination):
1. each destination topic is created in the data dir with its source's partition count and
   the configs the cluster reports set on it, or checked to have at least as many partitions;
2. rivven's transactional producer (``transactional_id`` = ``rivven-mirror-<name>``) is made
   first: it fences a copy of the same name in any process and aborts what it left open;
3. only then the data dir's group ``rivven-mirror-<name>`` is read: per destination
   partition, the next *source* offset to copy (none: ``start``, default the beginning);
4. a read_committed consumer of the cluster, assigned at those offsets, fills each
   transaction; the records go to the same partition with key, value, headers and timestamp,
   and the transaction's ``send_offsets`` stores the next source offsets in that group: the
   records and the positions commit together or not at all.

The end of a partition is where the consumer's fetches reach the end the cluster shows
(librdkafka's partition EOF: the last stable offset, read_committed), never a ListOffsets
answer (a broker may answer "latest" wrongly: tansu does).
"""

from __future__ import annotations

import bisect
import gc
import time
from collections.abc import Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, UnknownTopic
from ..fetch.positions import Position
from . import cluster
from .copy import TP, TXN_SECONDS, Copy, Lane

if TYPE_CHECKING:
    from ..engine import Engine

CONSUME_BATCH = 10_000
# librdkafka's partition EOF; transport errors librdkafka recovers from by itself
_EOF, _TRANSIENT = -191, (-195, -187, -185)  # _PARTITION_EOF; _TRANSPORT, _ALL_BROKERS_DOWN, _TIMED_OUT
# (fetches kept coming while the copy writes: no backoff, a deep local queue; a short
# fetch wait, so that the end of a partition is seen soon)
CONSUMER_DEFAULTS = {"fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                     "queued.max.messages.kbytes": 256 << 10, "queued.min.messages": 1_000_000,
                     "fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 100}


class _Offsets:
    """The messages' offsets as a sequence bisect can search (looked up only where it looks)."""

    def __init__(self, ms: list[Any]) -> None:
        self.ms = ms

    def __len__(self) -> int:
        return len(self.ms)

    def __getitem__(self, i: int) -> int:
        return int(self.ms[i].offset())


class Import(Copy):
    """Cluster topics into a data dir (see the module); the options as Export's."""

    direction = "import"

    # ---------------------------------------------------------------- open
    def open(self) -> None:
        src = cluster.Cluster(self.conf, self.timeout)
        counts = src.partitions(list(self.routes))
        for topic, n in counts.items():
            if n is None:
                raise UnknownTopic(f"topic {topic!r} does not exist on {src.where}: "
                                   "check its name (kafka-topics --list)")
            for p in self.only.get(topic, []):
                if not 0 <= p < n:
                    raise InvalidArgument(f"topic {topic!r} on {src.where} has no partition "
                                          f"{p} (it has {n})")
        for topic, n in counts.items():
            self._destination(src, topic, self.routes[topic], n or 0)
        assert self.txn_id is not None
        self.producer = self.eng.producer(transactional_id=self.txn_id)  # (fences first)
        done = self._committed()
        self.consumer = cluster.client("Consumer", {
            **CONSUMER_DEFAULTS, **self.conf, "group.id": self.group,
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        for topic, n in counts.items():
            for p in range(n or 0):
                if self.wanted(topic, p):
                    lane = Lane(topic, p, self.routes[topic])
                    lane.pos = done.get((lane.dest, p), -1)
                    self.lanes[(topic, p)] = lane
        self._positions()

    def _destination(self, src: cluster.Cluster, topic: str, to: str, parts: int) -> None:
        try:
            have = self.eng.topic(to).partitions
        except UnknownTopic:
            configs = src.configs(topic)
            try:
                self.eng.create_topic(to, parts, configs or None)
            except InvalidArgument as e:  # (a value Kafka takes and rivven does not)
                if not configs:
                    raise
                self.warnings.append(f"{to}: the source's configs {', '.join(sorted(configs))} "
                                     f"not taken ({e}); created without")
                self.eng.create_topic(to, parts)
            self.created.append(to)
            return
        if have < parts:
            raise InvalidArgument(
                f"the data dir's topic {to!r} has {have} partition(s), the source {topic!r} "
                f"{parts}: add partitions (rivven topic alter {to} --partitions {parts}) or "
                "copy to another topic (--to-topic, --prefix); nothing was copied")

    def _committed(self) -> dict[TP, int]:
        from ..errors import GroupNotFound

        try:
            return self.eng.groups.committed(self.group)
        except GroupNotFound:
            return {}

    def _positions(self) -> None:
        """Where each lane without a stored position starts (``start``), where each ends
        (``stop``), then the consumer assigned."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        fresh = [lane for lane in self.lanes.values() if lane.pos < 0]
        start = self.start or Position("beginning")
        where: dict[TP, int] = {}  # (what the consumer is assigned at, librdkafka's words too)
        if fresh:
            if start.kind == "timestamp":
                found = self._for_time(fresh, start.value)
                for lane in fresh:
                    tp = (lane.topic, lane.partition)
                    lane.pos = found.get(tp, 0)
                    where[tp] = found.get(tp, OFFSET_END)
            elif start.kind in ("beginning", "end"):  # (the consumer resolves them: no
                for lane in fresh:                   # ListOffsets answer is trusted)
                    lane.pos = 0
                    where[(lane.topic, lane.partition)] = (OFFSET_BEGINNING if start.kind ==
                                                           "beginning" else OFFSET_END)
            else:
                for lane in fresh:
                    low, high = self._watermarks(lane)
                    lane.pos = {"offset": min(max(start.value, low), high),
                                "from_end": max(low, high - start.value),
                                "from_start": min(high, low + start.value)}[start.kind]
        if self.stop_at is not None:
            stop = self.stop_at
            if stop.kind == "timestamp":
                found = self._for_time(list(self.lanes.values()), stop.value)
            for lane in self.lanes.values():
                if stop.kind == "timestamp":
                    lane.end = found.get((lane.topic, lane.partition))
                    if lane.end is None:
                        lane.end = self._watermarks(lane)[1]
                elif stop.kind == "offset":
                    lane.end = stop.value
                else:
                    low, high = self._watermarks(lane)
                    lane.end = {"beginning": low, "end": high,
                                "from_end": max(low, high - stop.value),
                                "from_start": low + stop.value}[stop.kind]
        self.consumer.assign([TopicPartition(lane.topic, lane.partition,
                                             where.get((lane.topic, lane.partition), lane.pos))
                              for lane in self.lanes.values()])

    def _watermarks(self, lane: Lane) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        try:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(lane.topic, lane.partition), timeout=self.timeout, cached=False)
        except Exception as e:
            raise cluster.kafka_error(f"cannot read the offsets of {lane.topic}"
                                      f"[{lane.partition}]", e) from None
        return int(low), int(high)

    def _for_time(self, lanes: list[Lane], ms: int) -> dict[TP, int]:
        from confluent_kafka import TopicPartition

        try:
            got = self.consumer.offsets_for_times(
                [TopicPartition(lane.topic, lane.partition, ms) for lane in lanes],
                timeout=self.timeout)
        except Exception as e:
            raise cluster.kafka_error("cannot look up offsets by time", e) from None
        return {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset >= 0}

    # ---------------------------------------------------------------- a step
    def step(self) -> int:
        paused = gc.isenabled()  # (tens of thousands of messages held, no cycle made)
        if paused:
            gc.disable()
        try:
            return self._step()
        finally:
            if paused:
                gc.enable()

    def _step(self) -> int:
        runs, cols, nbytes = self._gather()
        if not runs:
            return 0
        keys, values, hs, stamps = cols
        txn = self.producer
        txn.begin()
        moved: dict[TP, tuple[int, int]] = {}
        try:
            for tp, i, j, nxt in runs:
                txn.produce_batch(self.lanes[tp].dest, values[i:j], keys[i:j],
                                  hs[i:j] if hs is not None else None, stamps[i:j],
                                  partition=tp[1])
                n, _ = moved.get(tp, (0, 0))
                moved[tp] = (n + j - i, nxt)
            txn.send_offsets(self.group, {(self.lanes[tp].dest, tp[1]): nxt
                                          for tp, (_, nxt) in moved.items()})
            txn.commit()
        except BaseException:
            try:
                txn.abort()
            except Exception:  # noqa: BLE001 (the next producer of the id aborts it)
                pass
            raise
        self.counted(moved, nbytes)
        if self.stop_at is None:
            self._seen_ends(moved)
        return sum(n for n, _ in moved.values())

    def _gather(self) -> tuple[list[tuple[TP, int, int, int]], tuple[list, list, Any, list],
                               int]:
        """Messages from the consumer until a transaction's worth, a second, or nothing more
        comes, as columns (keys, values, headers or None, timestamps: one C-level pass each,
        no Python step per message) and runs ``(partition, first index, end index, next
        source offset)`` of consecutive messages of one partition; their key and value bytes.
        """
        from confluent_kafka import Message

        batches: list[list[Any]] = []
        n = 0
        deadline = time.monotonic() + TXN_SECONDS
        while n < self.txn_records:
            msgs = self.consumer.consume(min(CONSUME_BATCH, self.txn_records - n),
                                         0.05 if n else 0.2)
            if not msgs:
                break
            batches.append(msgs)
            n += len(msgs)
            if time.monotonic() > deadline:
                break
        ms = batches[0] if len(batches) == 1 else [m for b in batches for m in b]
        if not ms:
            return [], ([], [], None, []), 0
        ended: set[TP] = set()
        errs = list(map(Message.error, ms))
        if any(errs):
            ms, ended = self._events(ms, errs)
        runs = self._runs(ms)
        for tp, *_ in runs:
            if tp not in ended:
                self.lanes[tp].at_end = False
        if not runs:
            return [], ([], [], None, []), 0
        keys = list(map(Message.key, ms))
        values = list(map(Message.value, ms))
        hs = list(map(Message.headers, ms))
        stamps = list(map(itemgetter(1), map(Message.timestamp, ms)))
        if min(stamps) < 0:  # (TIMESTAMP_NOT_AVAILABLE: the time of the produce)
            stamps = [t if t >= 0 else None for t in stamps]
        nbytes = sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
        return runs, (keys, values, [h or () for h in hs] if any(hs) else None, stamps), nbytes

    def _runs(self, ms: list[Any]) -> list[tuple[TP, int, int, int]]:
        """Runs of consecutive messages of one partition (a fetch's worth each): ``(partition,
        first index, end index, next source offset)``, cut to the lane's position and (with
        ``stop``) its end."""
        from confluent_kafka import Message

        parts = list(map(Message.partition, ms))
        keyed: Any = parts if len(self.routes) == 1 else \
            list(zip(map(Message.topic, ms), parts))
        topic = next(iter(self.routes))
        runs = []
        i = 0
        for key, group in groupby(keyed):
            j = i + len(list(group))
            tp = (topic, key) if len(self.routes) == 1 else key
            lane = self.lanes.get(tp)
            if lane is not None:
                a, b = i, j
                if ms[a].offset() < lane.pos:  # (before the position: fetched twice)
                    a = bisect.bisect_left(_Offsets(ms), lane.pos, a, b)
                if self.stop_at is not None and lane.end is not None and a < b and \
                        ms[b - 1].offset() >= lane.end:
                    b = bisect.bisect_left(_Offsets(ms), lane.end, a, b)
                    lane.done = True
                if a < b:
                    runs.append((tp, a, b, ms[b - 1].offset() + 1))
            i = j
        return runs

    def _events(self, ms: list[Any], errs: list[Any]) -> tuple[list[Any], set[TP]]:
        """The messages that are records, and the partitions whose last word was "end of
        partition" (their lanes marked at their end); the other events handled."""
        eof_at: dict[TP, int] = {}
        last_at: dict[TP, int] = {}
        for i, (m, err) in enumerate(zip(ms, errs)):
            tp = (m.topic(), m.partition())
            if err is None:
                last_at[tp] = i
            elif self._error(err, self.lanes.get(tp)):
                eof_at[tp] = i
        ended = set()
        for tp, i in eof_at.items():
            if i > last_at.get(tp, -1):
                ended.add(tp)
                lane = self.lanes[tp]
                with self.lock:
                    lane.at_end = True
                    lane.done = lane.done or not self.follow
        return [m for m, err in zip(ms, errs) if err is None], ended

    def _seen_ends(self, moved: Mapping[TP, tuple[int, int]]) -> None:
        """The cached high watermarks (what the last fetches said): the lag shown."""
        from confluent_kafka import TopicPartition

        for tp, (_, nxt) in moved.items():
            _, high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            if high >= 0:
                self.lanes[tp].end = max(high, nxt)

    def _error(self, err: Any, lane: Lane | None) -> bool:
        """A consumer's error event: True for the end of a partition, False for what
        librdkafka recovers from by itself; anything else stops the copy."""
        code = err.code()
        if code == _EOF:
            return lane is not None
        if code in _TRANSIENT and not err.fatal():
            return False  # (librdkafka reconnects; a cluster gone for good times the run out)
        raise cluster.ClusterError(f"reading {lane.topic if lane else 'a topic'} from "
                                   f"{self.conf['bootstrap.servers']}: {err.str()}")

    # ---------------------------------------------------------------- close
    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        if self.producer is not None:
            self.producer.close()
            self.producer = None


def import_topics(eng: Engine, topics: Sequence[str], bootstrap: str,
                  name: str | None = None, config: Mapping[str, str] | None = None,
                  follow: bool = False, **options: Any) -> Any:
    """Copy ``topics`` of the cluster at ``bootstrap`` into ``eng`` until the ends their
    partitions show (with ``follow``, for ever: a ``stop_event`` ends it); the ``Copied``
    result. ``options``: Import's and run's, as export.export's."""
    from .copy import default_name, run

    event = options.pop("stop_event", None)
    on_step = options.pop("on_step", None)
    copy = Import(eng, topics, cluster.settings(bootstrap, config),
                  name or default_name("import", topics), **options)
    return run(copy, follow, event, on_step=on_step)
