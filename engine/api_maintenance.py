"""``Engine``'s maintenance: the log start and retention, compaction, tiered storage and
segment tools. A part of the façade (engine/engine.py), kept apart so each file stays one
subject; each method checks what it must and delegates to engine.maintenance,
engine.tiering or engine.tools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import clock
from .counters.meter import Meter
from .crypto.topic import Vault
from .errors import InvalidArgument
from .fetch import positions
from .fetch.positions import Position
from .fs.locks import LockWait
from .maintenance import compaction, retention
from .progress import Progress
from .storage.catalog import TopicMeta
from .storage.log import PartitionLog
from .storage.partitions import Partitions
from .tiering import restore as tier_restore
from .tiering import status
from .tiering import tier as tiering
from .tools import inspect, repair
from .tools import verify as verify_mod
from .tools.openers import Openers
from .wal.owner import WalOwner


class MaintenanceApi:
    """Mixed into ``Engine``; what it uses of the engine is declared here."""

    path: str
    lock_wait: LockWait
    meter: Meter
    _wal: WalOwner
    _partitions: Partitions
    _writable: Callable[[], None]
    _log: Callable[..., PartitionLog]
    _logs: Callable[..., list[PartitionLog]]
    _partition: Callable[[str, int], PartitionLog]
    _own_hot_stats: Callable[[], dict[str, dict[str, int]]]
    topic: Callable[..., TopicMeta]
    topics: Callable[..., list[TopicMeta]]
    _vault: Vault

    # ---------------------------------------------------------------- log start, retention
    def delete_records(self, topic: str, before: dict[int, int], dry_run: bool = False
                       ) -> list[dict[str, Any]]:
        """Move each partition's log start offset forward to ``before[p]`` (never back;
        offsets above the log end are refused), deleting whole segments below it. Rows:
        partition, prior/new log start offset, deleted segments."""
        if not dry_run:
            self._writable()
        meta = self.topic(topic)
        return retention.delete_records({p: self._log(meta, p) for p in before}, before, dry_run)

    def delete_records_before(self, topic: str, before: Position,
                              partitions: Sequence[int] | None = None, dry_run: bool = False
                              ) -> list[dict[str, Any]]:
        """``delete_records`` up to a position: an ``offset`` (past the end of a partition:
        its end, unless the partitions are named) or the first offset at a ``timestamp``."""
        target = positions.offsets_before(self._logs(topic, partitions), before, partitions is None)
        return self.delete_records(topic, target, dry_run)

    def apply_retention(self, topic: str | None = None, dry_run: bool = False,
                        now: int | None = None) -> list[dict[str, Any]]:
        """Delete the sealed segments past ``retention.ms``/``retention.bytes`` (or below the
        log start offset) of ``topic`` (default: every topic); one row per segment."""
        if not dry_run:
            self._writable()
        t = clock.now_ms() if now is None else now
        return [row for log in self._logs(topic, retain=False)
                for row in retention.apply(log, log.config, t, dry_run)]

    # ---------------------------------------------------------------- compaction
    def compaction_plan(self, topic: str, partitions: Sequence[int] | None = None,
                        force: bool = False, now: int | None = None) -> list[dict[str, Any]]:
        """What the next compaction pass would clean per partition, and why not the rest."""

        now = clock.now_ms() if now is None else now
        return [compaction.plan_partition(log, log.config, now, force)
                for log in self._logs(topic, partitions)]

    def explain_compaction(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: dirty ratio, cleanable range, what holds the rest back, and every
        tombstone's delete horizon."""

        now = clock.now_ms()
        return [compaction.explain_partition(log, log.config, now) for log in self._logs(topic)]

    def compact(self, topic: str, partitions: Sequence[int] | None = None, force: bool = False
                ) -> list[dict[str, Any]]:
        """One compaction pass in this process, without Spark (small topics; the reference
        for the Spark job: engine.spark.submit.compact)."""

        self._writable()
        with self.meter.get("rivven_compaction", topic=topic).timed():
            return compaction.compact_partitions(self.path, self._logs(topic, partitions), force)

    def apply_compaction(self, topic: str, plan: dict[str, Any], staged_dir: str, now: int,
                         min_tombstone: int | None = None) -> dict[str, Any]:
        """Swap in the segments a compaction job wrote to ``staged_dir`` for one partition's
        ``plan`` (crash-safe; refused with CompactionError when the partition changed)."""

        self._writable()
        log = self._partition(topic, plan["partition"])
        return compaction.swap(log, plan, staged_dir, now, min_tombstone)

    # ---------------------------------------------------------------- tiered storage
    def tier(self, topic: str | None = None, dry_run: bool = False, now: int | None = None,
             copier: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None] | None = None
             ) -> dict[str, Any]:
        """One tiering pass: copy the segments past local retention of ``topic`` (default:
        every topic with remote.storage.enable) to the cold store, verify, record them in the
        tier manifest, delete the local copies. ``copier`` does the copies (default: in this
        process; engine.spark.submit.tier runs them on Spark)."""
        if not dry_run:
            self._writable()
        metas = tiering.tiered_topics([self.topic(topic)] if topic else self.topics(), topic)
        if copier is None:
            copier = (lambda tasks: None) if dry_run else tiering.copy_in_process
        if dry_run:
            return tiering.run(self.path, metas, self._log, copier, dry_run, now)
        with self.meter.get("rivven_tier").timed():
            out = tiering.run(self.path, metas, self._log, copier, dry_run, now)
        for row in out["partitions"]:
            if row.get("uploaded"):
                self.meter.get("rivven_tier_uploads_total", topic=row["topic"]).inc(
                    len(row["uploaded"]))
                self.meter.get("rivven_tier_upload_bytes_total", topic=row["topic"]).inc(
                    row.get("bytes", 0))
        return out

    def tier_status(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per partition: cold and local ranges and bytes, hot cache bytes and hit rate."""
        logs = self._logs(topic, retain=False)
        hot = status.gather_hot_stats(self.path, self._own_hot_stats())
        return [status.status(log, hot.get(f"{log.topic}/{log.partition}", {})) for log in logs]

    def tier_restore(self, topic: str, from_offset: int | None = None,
                     from_timestamp: int | None = None, partitions: Sequence[int] | None = None,
                     dry_run: bool = False, from_position: Position | None = None
                     ) -> list[dict[str, Any]]:
        """Bring cold segments back to local disk, from the one holding ``from_offset`` (or
        the offset ``from_position`` names, e.g. ``beginning``, ``from_end`` N, or the first
        offset at ``from_timestamp``) up to the local segments."""
        if not dry_run:
            self._writable()
        if from_position is not None and from_position.kind == "offset":
            from_offset, from_position = from_position.value, None
        elif from_timestamp is not None:
            from_position = Position("timestamp", from_timestamp)
        if from_position is None and (from_offset is None or from_offset < 0):
            raise InvalidArgument("give a non-negative offset or a timestamp to restore from")
        at = from_position
        return [tier_restore.restore(log, positions.resolve(log, at) if at else from_offset, dry_run)
                for log in self._logs(topic, partitions)]

    def verify_cold(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Read every cold object back and check it against its manifest entry. Rows per
        partition: objects checked, bytes, findings."""
        return [status.verify_partition(log) for log in self._logs(topic, retain=False)]

    # ---------------------------------------------------------------- segments
    def segment_list(self, topic: str, partition: int | None = None) -> list[dict[str, Any]]:
        """Per segment: file, base/last offset, records, bytes, time range (header scan)."""
        parts = None if partition is None else [partition]
        return [row for log in self._logs(topic, parts) for row in inspect.segment_rows(log)]

    def verify(self, targets: Sequence[str] = (), cold: bool = False,
               progress: Progress | None = None, decrypt: bool = False) -> dict[str, Any]:
        """Check every batch, index and boundary of the targeted segments (and with ``cold``
        every cold copy); findings as data, nothing changed (engine.tools.verify). Needs no
        key: encrypted batches are checked as far as their CRC and layout go; ``decrypt``
        opens each one too (its authentication tag checked: the keyring is needed)."""
        return verify_mod.verify(self.path, list(targets), cold, progress,
                                 Openers(self._vault).of_partition_dir if decrypt else None)

    def segment_recover(self, targets: Sequence[str], truncate_corrupt: bool = False,
                        dry_run: bool = False, approved: dict[str, int | None] | None = None
                        ) -> list[dict[str, Any]]:
        """Truncate torn tails (and with ``truncate_corrupt`` corrupt tails) and rebuild indexes
        of the targeted segments, each partition under its lock (``rivven segment recover``).
        One row per segment: the cut, what it drops, the holes left (engine.tools.repair).
        ``approved`` (path -> cut position of a dry run the user agreed to): a cut that needs
        confirmation and was not approved as it now stands is refused."""
        if not dry_run:
            self._writable()
        out = repair.recover_segments(self.path, targets, truncate_corrupt, dry_run, approved,
                                      self.lock_wait)
        self._reopen_partitions()
        return out

    recover = segment_recover  # (its name before 0.2)

    def reindex(self, path: str) -> dict[str, Any]:
        """Rebuild the ``.index`` and ``.timeindex`` of one ``.log`` from its bytes."""
        self._writable()
        out = repair.reindex(path, self.lock_wait)
        self._reopen_partitions()
        return out

    def _reopen_partitions(self) -> None:
        """Files were mended behind the open logs' back: checkpoint, then open them afresh."""
        if self._wal.stream is not None:
            self._wal.checkpoint()  # nothing this process wrote may be dropped unsynced
        self._partitions.forget_all()
