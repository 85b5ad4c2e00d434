"""``Segments`` (``Engine.segments``): the segment files of a data dir for operators — list,
verify, recover (cut torn tails and damaged batches, rebuild indexes) and reindex (``rivven
segment``). Verification returns findings as data and changes nothing; repair is a separate,
explicit step, each partition under its lock."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..crypto.topic import Vault
from ..fs.locks import LockWait
from ..progress import Progress
from ..storage.finder import LogFinder
from . import inspect, repair, verify
from .openers import Openers
from .results import Reindexed, SegmentRepair, SegmentRow, VerifyReport


def _nothing() -> None:
    pass


class Segments:
    """The segments under ``data_dir`` (or of ``find``'s topics). ``writable()`` raises when
    the engine is read-only; ``reopen()`` makes the engine's open partitions forget what a
    repair changed behind their back (after checkpointing what this process wrote)."""

    def __init__(self, data_dir: str, find: LogFinder, vault: Vault, lock_wait: LockWait,
                 writable: Callable[[], None] = _nothing,
                 reopen: Callable[[], None] = _nothing) -> None:
        self.data_dir = data_dir
        self.find = find
        self.vault = vault
        self.lock_wait = lock_wait
        self.writable = writable
        self.reopen = reopen

    def list_segments(self, topic: str, partition: int | None = None) -> list[SegmentRow]:
        """Per segment, cold ones first: file, base/last offset, records, bytes, time range
        (a header scan)."""
        parts = None if partition is None else [partition]
        return [row for log in self.find.logs(topic, parts) for row in inspect.segment_rows(log)]

    def verify(self, targets: Sequence[str] = (), cold: bool = False,
               progress: Progress | None = None, decrypt: bool = False) -> VerifyReport:
        """Check every batch, index and boundary of the targeted segments (files, partition
        or topic dirs; default the data dir) and with ``cold`` every cold copy; findings as
        data, nothing changed (engine.tools.verify). Needs no key: encrypted batches are
        checked as far as their CRC and layout go; ``decrypt`` opens each one too (its
        authentication tag checked: the keyring is needed)."""
        return verify.verify(self.data_dir, list(targets), cold, progress,
                               Openers(self.vault).of_partition_dir if decrypt else None)

    def recover(self, targets: Sequence[str], truncate_corrupt: bool = False,
                dry_run: bool = False, approved: Mapping[str, SegmentRepair] | None = None
                ) -> list[SegmentRepair]:
        """Truncate torn tails (and with ``truncate_corrupt`` cut out corrupt batches, only
        them when an intact batch follows, their offsets then a recorded gap) and rebuild
        indexes of the targeted segments, each partition under its lock (``rivven segment
        recover``). One row per segment: the cut, what it drops, the holes left
        (engine.tools.repair). ``approved`` (path -> the row of a dry run the user agreed
        to): a cut that needs confirmation and was not approved as it now stands is
        refused."""
        if not dry_run:
            self.writable()
        out = repair.recover_segments(self.data_dir, targets, truncate_corrupt, dry_run,
                                      approved, self.lock_wait)
        self.reopen()
        return out

    def reindex(self, path: str) -> Reindexed:
        """Rebuild the ``.index`` and ``.timeindex`` of one ``.log`` from its bytes."""
        self.writable()
        out = repair.reindex(path, self.lock_wait)
        self.reopen()
        return out
