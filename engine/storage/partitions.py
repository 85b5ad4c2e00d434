"""The partitions an engine has open: one PartitionLog per (topic, partition) of a topic id.

A log is opened on first use and kept; a topic deleted and created again under the same name
(a new topic id) gets a new log. ``on_open(log, meta)`` runs when a writer opens one (the
engine applies retention there); ``producers(log)`` makes its producer state (the engine hands
in engine.txn.hook.PartitionProducers: storage never imports engine.txn).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..crypto.topic import Vault
from ..errors import InvalidArgument, UnknownPartition, UnknownTopic
from ..fs.locks import DEFAULT_WAIT, LockWait
from ..progress import Progress
from ..segments import filenames
from . import summary
from .budget import FileBudget
from .catalog import TopicMeta
from .holds import FlockHolds
from .log import PartitionLog
from .ports import PartitionCounts, ProducerHook


@contextlib.contextmanager
def peek(data_dir: str, meta: TopicMeta, partition: int) -> Iterator[PartitionLog]:
    """A read-only look at a partition that no engine keeps open: its files are closed after
    the block (a scrape of a thousand partitions holds the descriptors of one at a time).
    UnknownTopic when it is gone."""
    d = filenames.partition_dir(data_dir, meta.name, partition)
    log = PartitionLog(d, meta.name, partition, meta.typed, writable=False,
                       topic_id=bytes.fromhex(meta.id))
    try:
        yield log
    finally:
        log.close()


def check_partition(meta: TopicMeta, partition: Any) -> None:
    if not isinstance(partition, int) or not 0 <= partition < meta.partitions:
        raise UnknownPartition(f"partition {partition} does not exist in topic {meta.name!r} "
                               f"(it has partitions 0..{meta.partitions - 1})")


class Partitions:
    def __init__(self, data_dir: str, writable: bool, wal_sync: str,
                 progress: Progress | None = None,
                 cold: Any = None, hot: Any = None,
                 on_open: Callable[[PartitionLog, TopicMeta], None] | None = None,
                 lock_wait: LockWait = DEFAULT_WAIT,
                 producers: Callable[[PartitionLog], ProducerHook] | None = None,
                 vault: Vault | None = None,
                 counts: Callable[[str, int], PartitionCounts] | None = None,
                 budget: FileBudget | None = None, direct_bytes: int = -1) -> None:
        self.data_dir = data_dir
        self.direct_bytes = direct_bytes  # append.direct.bytes (engine.storage.pipeline)
        self.budget = budget  # open descriptors bounded (files.max.open): engine.storage.budget
        self.counts = counts  # a log's counters (engine.counters), by topic and partition
        self.vault = vault if vault is not None else Vault(None)  # the topics' data keys
        self.lock_wait = lock_wait
        self.writable = writable
        self.wal_sync = wal_sync
        self.progress = progress
        self.cold = cold
        self.hot = hot
        self.on_open = on_open
        self.producers = producers  # makes each log's producer state (engine.txn.hook)
        self.holds = FlockHolds()  # partition flocks kept between appends
        self.cuts: list[dict[str, Any]] = []  # damaged tails cut while opening (repairs())
        self._logs: dict[tuple[str, int], tuple[str, PartitionLog]] = {}
        self._mutex = threading.Lock()
        self._closing = False

    def get(self, meta: TopicMeta, partition: int, retain: bool = True) -> PartitionLog:
        """The log of a partition (opened when needed); ``retain=False`` skips ``on_open``."""
        if not isinstance(partition, int) or not 0 <= partition < meta.partitions:
            check_partition(meta, partition)  # (inline first: this runs on every produce)
        key = (meta.name, partition)
        entry = self._logs.get(key)
        if entry is not None and entry[0] == meta.id:
            log = entry[1]
            log.config = meta.typed
            if log.keys is not None and log.keys.keyset is not meta.keys:
                log.keys.update(meta.keys)
            if self.budget is not None:
                self.budget.touch(log)
            return log
        with self._mutex:
            if self._closing:
                raise InvalidArgument("this engine is closed; open it again")
            entry = self._logs.get(key)
            if entry is not None and entry[0] == meta.id:
                return entry[1]
            if entry is not None:
                self._close(entry[1])
            d = filenames.partition_dir(self.data_dir, meta.name, partition)
            if not os.path.isdir(d):  # create/add-partitions make dirs before the catalog names them
                raise UnknownTopic(f"topic {meta.name!r} has no files for partition {partition} "
                                   "(deleted meanwhile?)")
            # the WAL stream comes with the first append: a process that only consumes or
            # administers leaves no stream behind when it is killed
            n_cuts = len(self.cuts)
            log = PartitionLog(d, meta.name, partition, meta.typed, writable=self.writable,
                               topic_id=bytes.fromhex(meta.id), wal_sync=self.wal_sync,
                               cuts=self.cuts, progress=self.progress, holds=self.holds,
                               cold=self.cold, hot=self.hot, lock_wait=self.lock_wait,
                               producers=self.producers, keys=self.vault.topic(meta),
                               counts=self.counts(meta.name, partition)
                               if self.counts is not None else None,
                               direct_bytes=self.direct_bytes)
            self._logs[key] = (meta.id, log)
            if self.budget is not None:
                log.budget = self.budget
                self.budget.touch(log)
            for cut in self.cuts[n_cuts:]:  # (what the loader cut as it opened the log)
                if cut.get("action") == "cut":
                    log.counts.cut(cut.get("bytes", 0))
        if retain and self.writable and self.on_open is not None:
            self.on_open(log, meta)
        return log

    def offsets(self, meta: TopicMeta) -> dict[int, tuple[int, int]]:
        """Per partition (log start, log end): an open log's, else read from the files
        without opening the partition (engine.storage.summary; a full read-only look when
        that cannot tell)."""
        out = {}
        topic_dir = os.path.dirname(filenames.partition_dir(self.data_dir, meta.name, 0))
        for p in range(meta.partitions):
            entry = self._logs.get((meta.name, p))
            if entry is not None and entry[0] == meta.id:
                out[p] = entry[1].offsets()
                continue
            q = summary.quick_offsets(f"{topic_dir}/partition-{p}")
            if q is None:
                with peek(self.data_dir, meta, p) as log:
                    q = log.offsets()
            out[p] = q
        return out

    def open_logs(self) -> list[tuple[str, int, PartitionLog]]:
        """(topic, partition, log) of every open log, at this moment."""
        return [(name, p, log) for (name, p), (_, log) in list(self._logs.items())]

    def forget(self, topic: str) -> None:
        """Close the logs of a topic (deleted)."""
        with self._mutex:
            for key in [k for k in self._logs if k[0] == topic]:
                self._close(self._logs.pop(key)[1])

    def forget_all(self) -> None:
        """Close every log (files were mended behind their back); they reopen on next use."""
        with self._mutex:
            for _, log in self._logs.values():
                self._close(log)
            self._logs.clear()

    def _close(self, log: PartitionLog) -> None:
        if self.budget is not None:
            self.budget.forget(log)
        log.close()

    def stop(self) -> None:
        """Open no more logs and refuse appends to the open ones (those logged still finish)."""
        with self._mutex:
            self._closing = True
            logs = [log for _, log in self._logs.values()]
        for log in logs:
            log.stop_appends()
