"""``LogFinder``: the partition logs of topics by name, what every service above storage is
handed (the groups, transactions, maintenance and segment tools look logs up through it and
never hold the engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .catalog import TopicMeta
from .log import PartitionLog
from .partitions import Partitions
from .topics import Topics


class LogFinder:
    """Topics from the catalog (``topics``), their logs from the open partitions
    (``partitions``, opening one on first use). ``attach(log)`` gives a log this process's
    WAL stream before a write that does not go through the produce path (markers)."""

    def __init__(self, topics: Topics, partitions: Partitions,
                 attach: Callable[[PartitionLog], None]) -> None:
        self.topics = topics
        self.partitions = partitions
        self.attach = attach

    def topic(self, name: str, create_hint: bool = False) -> TopicMeta:
        """An existing topic's metadata (UnknownTopic, saying how to list the topics, or with
        ``create_hint`` how to create it)."""
        return self.topics.get(name, create_hint)

    def all(self) -> list[TopicMeta]:
        return self.topics.all()

    def log(self, meta: TopicMeta, partition: int, retain: bool = True) -> PartitionLog:
        """A partition's log (``retain=False``: a writer opening it skips retention)."""
        return self.partitions.get(meta, partition, retain)

    def partition(self, topic: str, partition: int) -> PartitionLog:
        return self.partitions.get(self.topics.get(topic), partition)

    def logs(self, topic: str | None, partitions: Iterable[int] | None = None,
             retain: bool = True) -> list[PartitionLog]:
        """The logs of ``topic`` (every topic when None), or of its ``partitions``."""
        metas = [self.topics.get(topic)] if topic is not None else self.topics.all()
        return [self.partitions.get(m, p, retain) for m in metas
                for p in (partitions if partitions is not None else range(m.partitions))]

    def txn_log(self, topic: str, topic_id: str, partition: int) -> PartitionLog | None:
        """The writable log of a transaction's partition (``topic_id``: of the topic the
        transaction wrote to), or None when that topic is gone (deleted, or created again
        under its name)."""
        meta = self.topics.catalog.get(topic)
        if meta is None or meta.id != topic_id or partition >= meta.partitions:
            return None
        log = self.partitions.get(meta, partition)
        if log.wal is None:
            self.attach(log)
        return log

    def txn_log_of(self, part: Any) -> PartitionLog | None:
        """``txn_log`` of a transaction's partition (``topic``, ``topic_id``, ``partition``:
        engine.txn.txn_store.TxnPartition)."""
        return self.txn_log(part.topic, part.topic_id, part.partition)

    def writer(self, topic: str, partition: int) -> PartitionLog:
        """A partition's log with this process's WAL stream attached, for a write that does
        not go through the produce path (a transaction marker)."""
        log = self.partition(topic, partition)
        if log.wal is None:
            self.attach(log)
        return log
