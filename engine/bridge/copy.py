"""What both directions of a copy share: the routes (source topic and partition to the
destination's), where each stands, its ends, the counts, and the run loop.

A copy is a sequence of *steps*; each step is one transaction on the destination that writes
some records and, in the same transaction, the next source position of every partition it
moved. A copy killed at any moment leaves either the whole step or none of it: the restart
reads the positions back and goes on from there (see export.py and importer.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, plural
from ..fetch.positions import Position
from . import cluster
from .results import Copied, PartitionCopied

if TYPE_CHECKING:
    from ..engine import Engine

TP = tuple[str, int]
TXN_RECORDS = 200_000  # records per transaction at most (fewer when the source has fewer)
TXN_BYTES = 64 << 20  # bytes of keys and values per transaction at most
TXN_SECONDS = 1.0  # a transaction of a following copy ends within this, full or not
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_name(name: str) -> str:
    """A mirror name: it names a consumer group and a transactional id (``rivven-mirror-``
    and the name), so Kafka's legal characters and at most 200 of them."""
    if not name or len(name) > 200 or not set(name) <= NAME_CHARS:
        raise InvalidArgument(f"mirror name {name!r}: use 1 to 200 of a-z A-Z 0-9 . _ -")
    return name


def default_name(direction: str, topics: Sequence[str]) -> str:
    """The name a copy gets when none is given: the direction and its topics, so that the
    same command resumes the same copy."""
    import hashlib

    joined = "+".join(sorted(topics))
    name = f"{direction}-{joined}"
    if len(name) <= 120 and set(name) <= NAME_CHARS:
        return name
    return f"{direction}-{hashlib.sha256(joined.encode()).hexdigest()[:16]}"


def destinations(topics: Sequence[str], to_topic: str | None, prefix: str | None
                 ) -> dict[str, str]:
    """Source topic to destination topic: the same name, ``--to-topic`` (one topic only) or
    ``--prefix`` before each."""
    if not topics:
        raise InvalidArgument("no topic to copy: name at least one")
    if len(set(topics)) != len(topics):
        raise InvalidArgument("a topic is named twice: name each once")
    if to_topic is not None and prefix is not None:
        raise InvalidArgument("--to-topic and --prefix both given: give one")
    if to_topic is not None and len(topics) > 1:
        raise InvalidArgument(f"--to-topic names one destination for {plural(len(topics), 'topic')}"
                              ": use --prefix, or copy one topic at a time")
    return {t: to_topic or f"{prefix or ''}{t}" for t in topics}


@dataclass
class Lane:
    """One partition of the copy: ``pos`` the next source offset to copy (what the mirror
    group holds once committed), ``end`` where it stops (None: not known yet)."""

    topic: str
    partition: int
    dest: str
    pos: int = 0
    end: int | None = None
    records: int = 0
    done: bool = False  # (an import not following: caught up with the end the source showed)
    at_end: bool = False  # (an import: its consumer reached the end the source shows now)


class Copy:
    """A copy's state and counts; export.Export and importer.Import make the steps."""

    direction = ""

    def __init__(self, eng: Engine, topics: Sequence[str], conf: Mapping[str, Any],
                 name: str, *, exactly_once: bool = True, to_topic: str | None = None,
                 prefix: str | None = None, start: Position | None = None,
                 stop: Position | None = None,
                 partitions: Mapping[str, Sequence[int]] | None = None,
                 transactional_id: str | None = None, txn_records: int = TXN_RECORDS,
                 txn_bytes: int = TXN_BYTES, timeout: float = cluster.DEFAULT_TIMEOUT) -> None:
        """``topics`` of the source to ``to_topic`` or ``prefix``-named ones; ``partitions``
        limits the copy to some partitions per topic (a Spark task's one); ``start`` is where
        a partition without a stored position begins, ``stop`` where every partition ends;
        ``transactional_id`` replaces the name's (a Spark task's own)."""
        if txn_records <= 0 or txn_bytes <= 0:
            raise InvalidArgument("records and bytes per transaction must be positive")
        self.name = check_name(name)
        self.routes = destinations(topics, to_topic, prefix)
        self.eng = eng
        self.meter = eng.meter  # (rivven_mirror_* series)
        self.conf = dict(conf)
        self.start, self.stop_at = start, stop
        self.only = {t: sorted(set(ps)) for t, ps in (partitions or {}).items()}
        self.exactly_once = exactly_once
        self.timeout = timeout
        self.txn_records = txn_records
        self.txn_bytes = txn_bytes
        self.group = cluster.mirror_group(name)
        self.txn_id: str | None = None
        if exactly_once:
            self.txn_id = transactional_id or cluster.transactional_id(name)
        self.producer: Any = None
        self.consumer: Any = None
        self.follow = False  # (run sets it)
        self.lanes: dict[TP, Lane] = {}
        self.created: list[str] = []
        self.warnings: list[str] = []
        self.records = self.bytes = self.transactions = 0
        self.started = time.monotonic()
        self.lock = threading.Lock()  # (the counts and lanes, read by a progress view)

    def wanted(self, topic: str, partition: int) -> bool:
        """Whether the copy takes this source partition (``partitions`` limits it)."""
        only = self.only.get(topic)
        return only is None or partition in only

    # ---------------------------------------------------------------- the steps
    def open(self) -> None:
        raise NotImplementedError

    def step(self) -> int:
        """One transaction: the records it copied (0: nothing to copy now)."""
        raise NotImplementedError

    def refresh(self) -> None:
        """A following copy: learn the source's new ends."""

    def close(self) -> None:
        raise NotImplementedError

    @property
    def caught_up(self) -> bool:
        return all(lane.done or (lane.end is not None and lane.pos >= lane.end)
                   for lane in self.lanes.values())

    # ---------------------------------------------------------------- what it reports
    def lag(self) -> dict[TP, int]:
        """Per partition the committed records still to copy (as far as the source's end is
        known)."""
        with self.lock:
            return {tp: 0 if lane.at_end else
                    max(0, (lane.end if lane.end is not None else lane.pos) - lane.pos)
                    for tp, lane in self.lanes.items()}

    def result(self) -> Copied:
        lag = self.lag()
        with self.lock:
            parts = [PartitionCopied(
                topic=lane.topic, partition=lane.partition, to_topic=lane.dest,
                position=lane.pos, end=lane.pos + lag[tp], lag=lag[tp], records=lane.records)
                for tp, lane in sorted(self.lanes.items())]
        return Copied(direction=self.direction, name=self.name, group=self.group,
                      transactional_id=self.txn_id, exactly_once=self.exactly_once,
                      created=list(self.created), records=self.records, bytes=self.bytes,
                      transactions=self.transactions,
                      seconds=round(time.monotonic() - self.started, 3),
                      warnings=list(self.warnings), partitions=parts)

    def counted(self, moved: Mapping[TP, tuple[int, int]], nbytes: int) -> None:
        """A step committed: per partition ``(records, next position)``."""
        with self.lock:
            for tp, (n, nxt) in moved.items():
                lane = self.lanes[tp]
                lane.records += n
                lane.pos = nxt
                self.records += n
            self.bytes += nbytes
            self.transactions += 1
        self.metered(moved, nbytes)

    def metered(self, moved: Mapping[TP, tuple[int, int]], nbytes: int) -> None:
        """The step in the rivven_mirror_* series (once per step, never per record)."""
        m = self.meter
        if m is None:
            return
        d, name = self.direction, self.name
        per_topic: dict[str, int] = {}
        for (topic, _), (n, _) in moved.items():
            per_topic[topic] = per_topic.get(topic, 0) + n
        for topic, n in per_topic.items():
            m.get("rivven_mirror_records_total", direction=d, mirror=name, topic=topic).inc(n)
        m.get("rivven_mirror_bytes_total", direction=d, mirror=name).inc(nbytes)
        m.get("rivven_mirror_transactions_total", direction=d, mirror=name).inc()
        self.metered_lag()

    def metered_lag(self) -> None:
        if self.meter is None:
            return
        for (topic, p), lag in self.lag().items():
            self.meter.get("rivven_mirror_lag_records", direction=self.direction,
                           mirror=self.name, topic=topic, partition=p).set(lag)


def run(copy: Copy, follow: bool = False, stop: threading.Event | None = None,
        idle: float = 0.2, on_step: Callable[[Copy], Any] | None = None) -> Copied:
    """Open ``copy``, step it until it has copied to its ends (with ``follow``: until
    ``stop`` is set, looking for new records every ``idle`` s when caught up), close it."""
    stop = stop or threading.Event()
    copy.follow = follow
    copy.open()
    try:
        while not stop.is_set():
            n = copy.step()
            if on_step is not None:
                on_step(copy)
            if n:
                continue
            if not follow and copy.caught_up:
                break
            stop.wait(idle if follow else 0.01)
            copy.refresh()
            copy.metered_lag()
    finally:
        copy.close()
    return copy.result()
