"""``Meter``: the series one engine counts, and their handles.

A handle is made once (a partition's, when its log opens; a group's, when its consumer
starts) and its slots are taken on first use, so a process that counts nothing (``rivven
topic list``) leaves no file. Each update is one lock and one or two float adds in shared
memory, made once per call or per batch, never per record. With ``metrics.enabled=false``
every handle is the same do-nothing object.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
import weakref
from typing import Any

from .. import clock
from .names import FAILURES, LAST_DURATION, LAST_SUCCESS, RUNS, SERIES
from .slots import Labels, SlotFile

STATS_DIR = ".stats"
_METERS: weakref.WeakSet[Meter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for m in list(_METERS):
        m.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Handle:
    __slots__ = ("meter", "name", "labels", "view", "at")

    def __init__(self, meter: Meter, name: str, labels: Labels) -> None:
        self.meter = meter
        self.name = name
        self.labels = labels
        self.view: Any = None  # (a float64 view of its process slots)
        self.at = 0

    def _bound(self) -> Any:
        """(the meter's lock held) The view of this series' slots, taken on first use."""
        view = self.view
        if view is None:
            view, self.at = self.meter.slots.allocate(self.name, self.labels,
                                                      SERIES[self.name].slots)
            self.view = view
        return view


# Every update runs whole under the meter's lock (once per call or batch, never per record):
# a first use, a close or a fork in another thread never sees half of it. The lock is
# reentrant: a read generator's count may run from a finalizer while this thread holds it.
class Counter(_Handle):
    __slots__ = ()

    def inc(self, n: float = 1) -> None:
        with self.meter.lock:
            self._bound()[self.at] += n


class Gauge(_Handle):
    """A value of this live process (summed over live processes; a dead one's is dropped)."""

    __slots__ = ()

    def set(self, v: float) -> None:
        with self.meter.lock:
            self._bound()[self.at] = float(v)


class Histogram(_Handle):
    __slots__ = ("bounds",)

    def __init__(self, meter: Meter, name: str, labels: Labels) -> None:
        super().__init__(meter, name, labels)
        self.bounds = SERIES[name].buckets

    def observe(self, v: float) -> None:
        i = bisect.bisect_left(self.bounds, v)  # le: a value on a bound counts in it
        with self.meter.lock:
            view = self._bound()
            view[self.at + i] += 1
            view[self.at + len(self.bounds) + 1] += v


class Run(_Handle):
    """A job run now and then: ``with meter.run(...).timed():`` counts it, and a success
    records when it ended and how long it took."""

    __slots__ = ()

    def record(self, ok: bool, seconds: float) -> None:
        with self.meter.lock:
            view = self._bound()
            at = self.at
            view[at + RUNS] += 1
            if ok:
                view[at + LAST_SUCCESS] = clock.now_ms() / 1000
                view[at + LAST_DURATION] = seconds
            else:
                view[at + FAILURES] += 1

    def timed(self) -> _Timed:
        return _Timed(self)


class _Timed:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.t0 = 0.0

    def __enter__(self) -> _Timed:
        self.t0 = time.monotonic()
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        self.run.record(kind is None, time.monotonic() - self.t0)


class _Null:
    """Every handle of a disabled meter."""

    __slots__ = ()

    def inc(self, n: float = 1) -> None:
        pass

    def set(self, v: float) -> None:
        pass

    def observe(self, v: float) -> None:
        pass

    def record(self, ok: bool, seconds: float) -> None:
        pass

    def timed(self) -> _Timed:
        return _Timed(self)  # type: ignore[arg-type]


NULL: Any = _Null()
KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "run": Run}


class Meter:
    """The series of one engine (one process, one data dir); ``enabled=False``: none."""

    def __init__(self, data_dir: str | None, enabled: bool = True) -> None:
        self.enabled = enabled
        self.stats_dir = os.path.join(data_dir, STATS_DIR) if data_dir is not None else None
        self.lock = threading.RLock()
        self.slots = SlotFile(self.stats_dir)
        self.handles: dict[tuple[str, Labels], Any] = {}
        _METERS.add(self)

    def forked(self) -> None:
        """(in a forked child) Count in files of its own from zero: the parent's mapping is
        shared, and the parent merges what it holds (the child's copy of its flock goes
        with the child's copy of the fd; the parent's stays)."""
        self.lock = threading.RLock()
        old = self.slots
        self.slots = SlotFile(None if old.closed else self.stats_dir)
        for h in self.handles.values():
            h.view = None
        old.release()

    def detach(self) -> SlotFile:
        """Count in memory from now on (nobody reads it: the engine is closing) and hand back
        the files' slots, for their values to be merged and the files closed: nothing
        counted after the merge's snapshot can land in files about to be deleted."""
        with self.lock:
            for h in self.handles.values():
                h.view = None
            old, self.slots = self.slots, SlotFile(None)
            self.slots.closed = True
            return old

    @property
    def ident(self) -> str:
        return self.slots.ident

    def get(self, name: str, **labels: Any) -> Any:
        """The handle of series ``name`` with ``labels`` (made on first ask, then the same)."""
        if not self.enabled:
            return NULL
        s = SERIES[name]
        key = (name, tuple((k, str(labels[k])) for k in s.labels))
        h = self.handles.get(key)
        if h is None:
            with self.lock:
                h = self.handles.get(key)
                if h is None:
                    h = self.handles[key] = KINDS[s.kind](self, name, key[1])
        return h

    def values(self) -> list[tuple[str, Labels, list[float]]]:
        with self.lock:
            return self.slots.values()

    def partition(self, topic: str, partition: int) -> PartitionMeter:
        return PartitionMeter(self, topic, partition)


# a partition's handles: attribute -> (series, labelled by partition too?)
PARTITION_SERIES = {
    "appended_records": ("rivven_records_appended_total", True),
    "appended_bytes": ("rivven_bytes_appended_total", True),
    "read_records": ("rivven_records_read_total", True),
    "read_bytes": ("rivven_bytes_read_total", True),
    "rolls": ("rivven_segment_rolls_total", True),
    "crc_errors": ("rivven_crc_errors_total", True),
    "hot_hits": ("rivven_hot_cache_hits_total", False),
    "hot_misses": ("rivven_hot_cache_misses_total", False),
}


class PartitionMeter:
    """A partition's handles (storage is handed this), each made on first use: a reader
    that opens a thousand partitions to look at them makes none."""

    def __init__(self, meter: Meter, topic: str, partition: int) -> None:
        self.meter = meter
        self.topic = topic
        self.partition = partition

    def __getattr__(self, attr: str) -> Any:  # (only for a handle not made yet)
        if attr not in PARTITION_SERIES:
            raise AttributeError(attr)
        name, per_partition = PARTITION_SERIES[attr]
        labels: dict[str, Any] = {"topic": self.topic}
        if per_partition:
            labels["partition"] = self.partition
        handle = self.meter.get(name, **labels)
        setattr(self, attr, handle)
        return handle

    def appended(self, records: int, nbytes: int) -> None:
        self.appended_records.inc(records)
        self.appended_bytes.inc(nbytes)

    def read(self, records: int, nbytes: int) -> None:
        self.read_records.inc(records)
        self.read_bytes.inc(nbytes)

    def cut(self, nbytes: int) -> None:
        """A torn or damaged tail cut from the partition's segments when it opened."""
        self.meter.get("rivven_recovery_bytes_cut_total").inc(nbytes)
