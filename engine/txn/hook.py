"""``PartitionProducers``: the producer state of one open partition, kept in step with its log.

It is the ``ProducerHook`` (engine.storage.log) the engine hands to every log it opens. It
loads the state on first use — the newest intact snapshot at or above the local log start and
at or below the log end, then the headers of the batches from there to the end — so a
partition nobody writes format-2 batches to costs nothing. After that, under the partition's
mutex:

- the pipeline checks each format-2 batch before its offsets are assigned (``check``) and
  applies it once its WAL record is written (``applied``);
- when the flock is taken, batches other processes appended are applied (``caught_up``);
- a failed write or fsync drops the state (``discarded``): rebuilt when next needed;
- each checkpoint writes a snapshot (``checkpointed``), after expiring producers, keeps the
  newest ``KEEP`` and deletes those below the local log start or past the log end.

Its files (the snapshots, the ``.txnindex`` entries of aborted transactions) are written
through the log's own calls (``write_snapshot``, ``index_aborts``, ``delete_snapshots``):
this module never names a path in the partition directory.

Format-1 batches this process appends never reach the hook (the plain produce path pays
nothing): while the pipeline holds the flock nothing else appends, so the offsets between the
state's end and a format-2 batch this process appends are its own format-1 batches.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import clock
from ..errors import DamagedMetadata, StorageError
from ..format.control import marker_type
from ..format.records import MAGIC_PRODUCER, BatchHeader
from ..segments.segment_set import SegmentGone
from ..segments.txn_index import AbortedTxn
from ..storage.log import PartitionLog
from . import snapshot
from .state import ProducerState

KEEP = 2  # snapshots kept per partition
log_ = logging.getLogger("rivven.txn")


def _wants_body(h: BatchHeader) -> bool:
    return h.is_control  # (a marker's type is in its record)


class PartitionProducers:
    """The ``ProducerHook`` of one PartitionLog (the log calls it with its mutex held)."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.name = f"{log.topic}-{log.partition}"
        self._state: ProducerState | None = None
        self._snapshot_at = -1  # offset of the newest snapshot written or loaded
        self._pruned_start = -1  # local log start when snapshots were last pruned
        # the transactions ABORT markers ended after the offset the state was loaded from (or
        # last snapshotted at): not all in a .txnindex yet (written at the next snapshot)
        self._recent: list[AbortedTxn] = []
        # the control batch ``check`` just decoded: (its header, its marker type)
        self._checked: tuple[BatchHeader, int] | None = None

    # ---------------------------------------------------------------- ProducerHook
    def caught_up(self, end: int) -> None:
        if self._state is not None:
            self._sync(end, writer=True)

    def check(self, header: BatchHeader, buf: Any) -> int | None:
        state = self._state
        if state is None:
            state = self._load(self.log.end_offset(), writer=True)
        marker = self._marker(header, buf)
        if marker is not None:  # (decoded once: applied, which follows, takes it up)
            self._checked = (header, marker)
        return state.check(header, marker)

    def applied(self, header: BatchHeader, buf: Any, base: int) -> None:
        state = self._state
        if state is None:  # (checked, then dropped by a failure: rebuilt when next needed)
            return
        # offsets between the state's end and ``base`` are this process's format-1 batches
        checked, self._checked = self._checked, None
        marker = checked[1] if checked is not None and checked[0] is header else \
            self._marker(header, buf)
        aborted = state.apply(header, base, marker, clock.now_ms())
        if aborted is not None:
            self._recent.append(aborted)

    def discarded(self) -> None:
        self._state = None

    def checkpointed(self, end: int) -> None:
        log = self.log
        if not log.writable:
            return
        state = self._state
        if state is not None and state.end < end:
            self._sync(end, writer=True)
            state = self._state
        if state is not None and state.end == end:  # (ahead: batches in flight; next time)
            gone = state.expire(clock.now_ms(), log.config.producer_id_expiration_ms,
                                log.start_offset())
            if gone or end != self._snapshot_at:
                try:
                    # the aborts below ``end`` indexed first: the snapshot vouches for them
                    log.index_aborts(self._recent, end)
                    log.write_snapshot(end, snapshot.encode(state))
                    self._snapshot_at = end
                    self._recent = [a for a in self._recent if a.last_offset >= end]
                except StorageError as e:  # the log is the truth: the next one will do
                    log_.warning("%s: producer-state snapshot not written: %s", self.name, e)
        start = log.local_start()
        if start != self._pruned_start or state is not None:
            self._prune(start, end)

    # ---------------------------------------------------------------- reading it
    def state(self) -> ProducerState:
        """The state as of the log end now (loaded when needed; it includes batches this
        process has in flight). It changes as appends go on: read it holding ``log.mutex``,
        or use the methods below, which do."""
        log = self.log
        with log.mutex:
            end = log.offsets()[1]
            if self._state is None:
                return self._load(end, writer=False)
            if self._state.end < end:  # (ahead: this process's batches in flight)
                self._sync(end, writer=False)
            return self._state if self._state is not None else self._load(end, writer=False)

    def last_stable_offset(self) -> tuple[int, int]:
        """(last stable offset, log end) now: read_committed reads stop at the first."""
        with self.log.mutex:
            state = self.state()
            end = self.log.end_offset()
            return state.last_stable_offset(end), end

    def stable(self) -> tuple[int, list[AbortedTxn]]:
        """``last_stable_offset()[0]`` and ``recent_aborts()`` as of one moment (one look at
        the log: what a read_committed read needs)."""
        with self.log.mutex:
            state = self.state()
            return state.last_stable_offset(self.log.end_offset()), list(self._recent)

    def recent_aborts(self) -> list[AbortedTxn]:
        """The aborted transactions whose markers lie past the newest snapshot this state
        comes from (maybe not in a ``.txnindex`` yet), oldest first."""
        with self.log.mutex:
            self.state()
            return list(self._recent)

    def open_transactions(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (first offset, epoch) of each transaction open in the partition."""
        with self.log.mutex:
            return self.state().open_transactions()

    def ended_at(self, producer_id: int, epoch: int) -> int | None:
        """The offset of ``producer_id``'s last batch here when it is at ``epoch`` with no
        transaction open (a marker of that epoch ended its last one), else None."""
        with self.log.mutex:
            e = self.state().producers.get(producer_id)
            if e is None or e.epoch != epoch or e.txn_first_offset >= 0 or e.last_offset < 0:
                return None
            return e.last_offset

    def last_sequence(self, producer_id: int, epoch: int) -> int | None:
        """``ProducerState.last_sequence`` now."""
        with self.log.mutex:
            return self.state().last_sequence(producer_id, epoch)

    def producers(self) -> list[dict[str, Any]]:
        """A copy of every producer's state here (``rivven txn producers``): producer id,
        epoch, last sequence, last offset, last seen, open transaction's first offset."""
        with self.log.mutex:
            return [{"producer_id": pid, "epoch": e.epoch, "last_sequence": e.last_seq,
                     "last_offset": e.last_offset, "last_seen_ms": e.last_timestamp,
                     "txn_first_offset": None if e.txn_first_offset < 0 else e.txn_first_offset}
                    for pid, e in self.state().entries()]

    # ---------------------------------------------------------------- keeping it in step
    def _marker(self, h: BatchHeader, buf: Any) -> int | None:
        return marker_type(h, buf, 0, f" (a batch appended to {self.name})") \
            if h.is_control else None

    def _sync(self, end: int, writer: bool) -> None:
        """Bring the state to ``end``: apply the batches appended since, or rebuild it when
        the log no longer holds what it counted (cut by a repair, or gone below the local
        start)."""
        state = self._state
        assert state is not None
        if state.end == end:
            return
        if state.end > end or state.end < self.log.local_start():
            self._state = None
            self._load(end, writer)
            return
        try:
            self._scan(state, end)
        except SegmentGone:  # (deleted under a reader: look again from a snapshot)
            self._state = None
            self._load(end, writer)

    def _scan(self, state: ProducerState, end: int) -> None:
        now = clock.now_ms()
        for h, buf in self.log.headers(state.end, end, _wants_body):
            if h.magic == MAGIC_PRODUCER:
                marker = marker_type(h, buf, 0, f" in {self.name}") if h.is_control else None
                aborted = state.apply(h, h.base_offset, marker, now)
                if aborted is not None:
                    self._recent.append(aborted)
            else:
                state.advance(h.next_offset)
        state.advance(end)

    def _load(self, end: int, writer: bool) -> ProducerState:
        """The newest intact snapshot in [local start, end] (damaged ones reported and
        skipped), then the batches after it. A writer also deletes snapshots past the end:
        they describe batches a repair cut."""
        log = self.log
        start = log.local_start()
        found = log.snapshots()
        state = None
        for off in reversed(found):
            if not start <= off <= end:
                continue
            try:
                data, where = log.read_snapshot(off)
                state = snapshot.decode(data, where, off, self.name)
                self._snapshot_at = off
                break
            except FileNotFoundError:
                continue  # (pruned by another process meanwhile)
            except DamagedMetadata as e:
                log.report_ignored(e)
                log_.warning("%s", e)
        if state is None:
            state = ProducerState(self.name, start)
        self._recent = []  # (the aborts below the snapshot are in .txnindex files)
        if writer and log.writable and any(off > end for off in found):
            log.delete_snapshots([off for off in found if off > end])
        for attempt in range(3):
            try:
                self._scan(state, end)
                break
            except SegmentGone:  # deleted under a reader (retention): look again
                if attempt == 2:
                    raise
                log.reload_view()
                state = ProducerState(self.name, log.local_start())
                self._recent = []
        self._state = state
        return state

    def _prune(self, start: int, end: int) -> None:
        """Keep the newest KEEP snapshots in [local start, end]; delete the rest."""
        log = self.log
        try:
            found = log.snapshots()
        except OSError:
            return
        usable = [off for off in found if start <= off <= end]
        drop = [off for off in found if off not in usable[-KEEP:]]
        if drop:
            log.delete_snapshots(drop)
        self._pruned_start = start


def producers_of(log: PartitionLog) -> PartitionProducers | None:
    """The producer state of ``log`` (None when it was opened without one: tools, Spark)."""
    hook = log.producers
    return hook if isinstance(hook, PartitionProducers) else None

