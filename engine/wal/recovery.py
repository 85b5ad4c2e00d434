"""``Recovery`` (``Engine.recovery``): the WAL streams of a data dir and what a crash left —
replaying dead streams, cutting their torn tails, listing the streams, checkpointing every
partition, and what opening partitions mended (``rivven wal ...``). ``at_open`` is what a
writable ``Engine.open`` runs first."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from ..counters.meter import Meter
from ..errors import StorageError, disk_full
from ..progress import Progress
from ..storage.finder import LogFinder
from . import inventory
from .owner import WalOwner
from .results import CheckpointedAll, Repair, ReplayReport, StreamInfo, TailCut


class Recovery:
    def __init__(self, data_dir: str, owner: WalOwner, find: LogFinder,
                 progress: Progress | None = None,
                 writable: Callable[[], None] = lambda: None) -> None:
        self.data_dir = data_dir
        self.owner = owner
        self.find = find
        self.progress = progress
        self.writable = writable

    def replay(self, dry_run: bool = False) -> ReplayReport:
        """Replay the WAL streams whose process is gone (``rivven wal replay``): batches past
        a partition's log end go back into its segments (merged across streams by offset,
        idempotent), then those partitions are checkpointed and the streams deleted."""
        return self.owner.replay(self.find.all, self.find.log, self.progress, dry_run)

    def cut_tails(self, dry_run: bool = False) -> list[TailCut]:
        """Cut torn tails of dead streams' WAL files (``rivven wal recover``; no replay)."""
        return self.owner.recover_tails(dry_run)

    def streams(self) -> list[StreamInfo]:
        """Every WAL stream of the data dir: live or dead, files, bytes, partitions."""
        return [inventory.stream_info(d) for d in inventory.all_streams(self.data_dir)]

    def checkpoint_all(self) -> CheckpointedAll:
        """Replay dead WAL streams, then checkpoint every partition of every topic."""
        self.writable()
        replayed = self.replay()
        return {"replayed": replayed,
                "checkpoints": self.owner.checkpoint_logs(self.find.logs(None))}

    def repairs(self) -> list[Repair]:
        """What the engine mended or set aside while opening partitions: ``action`` "cut", a
        damaged segment tail it cut (past the checkpoint, with no intact batch after it; WAL
        replay restores what it held: file, position, bytes, reason), or "ignored", a damaged
        metadata file it did not act on (a ``.checkpoint`` that fails its seal or disagrees
        with the log: file, reason)."""
        # (rows the segments write as they open: engine.segments.segment, segment_set)
        return cast("list[Repair]", list(self.find.partitions.cuts))

    def at_open(self, counters: Meter) -> ReplayReport:
        """Replay the dead streams (counted). On a full disk a batch that must go back into
        its segment cannot: the engine opens anyway — the commands that free space need it —
        but refuses appends (their offsets are the replay's) until an open replays the
        streams: ``{"deferred": reason}``."""
        t0 = time.monotonic()
        try:
            report = self.replay()
        except StorageError as e:
            if not disk_full(e):
                raise
            self.owner.replay_pending = StorageError(
                f"the WAL of a crashed writer still has to be replayed, and the disk is full "
                f"({e}); free space (rivven delete-records, retention apply or topic delete), "
                "then open the data dir again")
            return {"deferred": str(e)}
        if report.get("streams"):
            counters.get("rivven_recovery_duration_seconds").observe(time.monotonic() - t0)
            counters.get("rivven_recovery_batches_replayed_total").inc(report.get("applied", 0))
            counters.get("rivven_recovery_bytes_cut_total").inc(
                sum(t.get("bytes", 0) for t in report.get("torn_tails", [])))
        return report
