"""``Maintenance`` (``Engine.maintenance``): the log start and retention, compaction and tiered
storage of a data dir's topics. Each call checks what it must and hands the work to one module
(retention, compaction, engine.tiering); the Spark jobs hand in where the heavy part runs
(``tier(copier=...)``, ``apply_compaction`` of what a Spark job staged)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import clock
from ..counters.meter import Meter
from ..errors import InvalidArgument
from ..fetch import positions
from ..fetch.positions import Position
from ..storage.finder import LogFinder
from ..tiering import restore, status, tier_pass
from ..tiering.results import ColdCheck, Restored, TierRun, TierStatus
from . import compaction, retention
from .results import CompactionPlan, CompactionResult, Explanation, SegmentDeleted, StartMoved

Copier = Callable[[list[dict[str, Any]]], "list[dict[str, Any]] | None"]


def _nothing() -> None:
    pass


class Maintenance:
    """The topics of ``find``; ``counters`` counts compaction and tier runs; ``writable()``
    raises when the engine is read-only; ``hot_stats()`` gives this process's hot cache
    figures (``tier_status``)."""

    def __init__(self, data_dir: str, find: LogFinder, counters: Meter,
                 writable: Callable[[], None] = _nothing,
                 hot_stats: Callable[[], dict[str, dict[str, int]]] = dict) -> None:
        self.data_dir = data_dir
        self.find = find
        self.counters = counters
        self.writable = writable
        self.hot_stats = hot_stats

    # ---------------------------------------------------------------- log start, retention
    def delete_records(self, topic: str, before: dict[int, int], dry_run: bool = False
                       ) -> list[StartMoved]:
        """Move each partition's log start offset forward to ``before[p]`` (never back;
        offsets above the log end are refused), deleting whole segments below it. Rows:
        partition, prior/new log start offset, deleted segments."""
        if not dry_run:
            self.writable()
        meta = self.find.topic(topic)
        return retention.delete_records({p: self.find.log(meta, p) for p in before}, before,
                                        dry_run)

    def delete_records_before(self, topic: str, before: Position,
                              partitions: Sequence[int] | None = None, dry_run: bool = False
                              ) -> list[StartMoved]:
        """``delete_records`` up to a position: an ``offset`` (past the end of a partition:
        its end, unless the partitions are named) or the first offset at a ``timestamp``."""
        target = positions.offsets_before(self.find.logs(topic, partitions), before,
                                          partitions is None)
        return self.delete_records(topic, target, dry_run)

    def apply_retention(self, topic: str | None = None, dry_run: bool = False,
                        now: int | None = None) -> list[SegmentDeleted]:
        """Delete the sealed segments past ``retention.ms``/``retention.bytes`` (or below the
        log start offset) of ``topic`` (default: every topic); one row per segment."""
        if not dry_run:
            self.writable()
        t = clock.now_ms() if now is None else now
        return [row for log in self.find.logs(topic, retain=False)
                for row in retention.apply(log, log.config, t, dry_run)]

    # ---------------------------------------------------------------- compaction
    def compaction_plan(self, topic: str, partitions: Sequence[int] | None = None,
                        force: bool = False, now: int | None = None
                        ) -> list[CompactionPlan]:
        """What the next compaction pass would clean per partition, and why not the rest."""
        now = clock.now_ms() if now is None else now
        return [compaction.plan_partition(log, log.config, now, force)
                for log in self.find.logs(topic, partitions)]

    def explain_compaction(self, topic: str) -> list[Explanation]:
        """Per partition: dirty ratio, cleanable range, what holds the rest back, and every
        tombstone's delete horizon."""
        now = clock.now_ms()
        return [compaction.explain_partition(log, log.config, now)
                for log in self.find.logs(topic)]

    def compact(self, topic: str, partitions: Sequence[int] | None = None, force: bool = False
                ) -> list[CompactionResult]:
        """One compaction pass in this process, without Spark (small topics; the reference
        for the Spark job: engine.spark.submit.compact)."""
        self.writable()
        with self.counters.get("rivven_compaction", topic=topic).timed():
            return compaction.compact_partitions(self.data_dir,
                                                 self.find.logs(topic, partitions), force)

    def apply_compaction(self, topic: str, plan: CompactionPlan, staged_dir: str,
                         now: int, min_tombstone: int | None = None
                         ) -> CompactionResult:
        """Swap in the segments a compaction job wrote to ``staged_dir`` for one partition's
        ``plan`` (crash-safe; refused with CompactionError when the partition changed)."""
        self.writable()
        log = self.find.partition(topic, plan["partition"])
        return compaction.swap(log, plan, staged_dir, now, min_tombstone)

    # ---------------------------------------------------------------- tiered storage
    def tier(self, topic: str | None = None, dry_run: bool = False, now: int | None = None,
             copier: Copier | None = None, partitions: Sequence[int] | None = None) -> TierRun:
        """One tiering pass: copy the segments past local retention of ``topic`` (default:
        every topic with remote.storage.enable; only its ``partitions`` when given) to the
        cold store, verify, record them in the tier manifest, delete the local copies.
        ``copier`` does the copies (default: in this process; engine.spark.submit.tier runs
        them on Spark)."""
        if partitions is not None and topic is None:
            raise InvalidArgument("name the topic whose partitions to tier")
        if not dry_run:
            self.writable()
        metas = tier_pass.tiered_topics([self.find.topic(topic)] if topic else self.find.all(),
                                      topic)
        if copier is None:
            copier = (lambda tasks: None) if dry_run else tier_pass.copy_in_process
        if dry_run:
            return tier_pass.run(self.data_dir, metas, self.find.log, copier, dry_run, now,
                                 partitions)
        with self.counters.get("rivven_tier").timed():
            out = tier_pass.run(self.data_dir, metas, self.find.log, copier, dry_run, now,
                                partitions)
        for row in out["partitions"]:
            if row.get("uploaded"):
                self.counters.get("rivven_tier_uploads_total", topic=row["topic"]).inc(
                    len(row["uploaded"]))
                self.counters.get("rivven_tier_upload_bytes_total", topic=row["topic"]).inc(
                    row.get("bytes", 0))
        return out

    def tier_status(self, topic: str | None = None) -> list[TierStatus]:
        """Per partition: cold and local ranges and bytes, hot cache bytes and hit rate."""
        logs = self.find.logs(topic, retain=False)
        hot = status.gather_hot_stats(self.data_dir, self.hot_stats())
        return [status.status(log, hot.get(f"{log.topic}/{log.partition}", {})) for log in logs]

    def tier_restore(self, topic: str, from_offset: int | None = None,
                     from_timestamp: int | None = None, partitions: Sequence[int] | None = None,
                     dry_run: bool = False, from_position: Position | None = None
                     ) -> list[Restored]:
        """Bring cold segments back to local disk, from the one holding ``from_offset`` (or
        the offset ``from_position`` names, e.g. ``beginning``, ``from_end`` N, or the first
        offset at ``from_timestamp``) up to the local segments."""
        if not dry_run:
            self.writable()
        if from_position is not None and from_position.kind == "offset":
            from_offset, from_position = from_position.value, None
        elif from_timestamp is not None:
            from_position = Position("timestamp", from_timestamp)
        if from_position is None:
            if from_offset is None or from_offset < 0:
                raise InvalidArgument("give a non-negative offset or a timestamp to restore from")
            offset = from_offset
            return [restore.restore(log, offset, dry_run)
                    for log in self.find.logs(topic, partitions)]
        at = from_position
        return [restore.restore(log, positions.resolve(log, at), dry_run)
                for log in self.find.logs(topic, partitions)]

    def verify_cold(self, topic: str | None = None) -> list[ColdCheck]:
        """Read every cold object back and check it against its manifest entry. Rows per
        partition: objects checked, bytes, findings."""
        return [status.verify_partition(log) for log in self.find.logs(topic, retain=False)]
