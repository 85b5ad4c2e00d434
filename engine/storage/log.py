"""``PartitionLog``: one partition, the only object that changes its files.

It composes the parts that each do one job: the segment set (engine.segments.segment_set),
the loader that mends what a crash left and returns what it found (loader), the append
pipeline (pipeline), reads (reader), the view of the tier manifest (tier_view), the log start
offset (log_start) and checkpoints (engine.segments.checkpoint), the keys and sealed ranges
(sealing), and the one segment-replacement protocol (engine.segments.swap). The parts are
handed the lock and the segment set and know the log only by a protocol of the few calls they
make (``AppendOwner``, ``ReadSource``): none imports this module. Maintenance and tiering
change a partition only through its public calls: ``mutation()``, ``replace_segments()``,
``set_tier()``, ``advance_start()``; the producer state (engine.txn.hook) keeps its snapshots
and ``.txnindex`` entries through ``write_snapshot()``, ``delete_snapshots()`` and
``index_aborts()``.

Several processes may append to the same partition. Each append takes ``.lock`` (flock) in the
partition directory, brings this process's view up to date (did the active segment grow? did
another process roll it? did a dead writer leave a torn tail? — truncate it), assigns offsets,
writes, syncs and releases. Readers take no lock.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..crypto.batch import Sealer
from ..crypto.topic import TopicKeys
from ..errors import DamagedMetadata, StorageError, disk_full
from ..failpoint import failpoint
from ..format.records import BatchHeader, EncodedBatch
from ..fs import guard
from ..fs.locks import DEFAULT_WAIT, LockWait
from ..progress import Progress
from ..segments import (
    checkpoint,
    filenames,
    sealed_range,
    snapshot_files,
    swap,
    tier_manifest,
    txn_index,
)
from ..segments.segment import BatchRef, Segment
from ..segments.segment_set import SegmentSet
from ..segments.swap import SwapRefused
from ..segments.tier_manifest import ColdSegment, Home
from ..segments.txn_index import AbortedTxn
from . import key_usage, loader, log_start, reader
from .append_each import append_each  # (imported from here too: txn.markers, produce.path)
from .budget import FileBudget
from .config import TopicConfig
from .holds import FlockHolds
from .partition_lock import PartitionLock
from .pipeline import AppendPipeline
from .ports import UNCOUNTED, ColdSegments, HotCachePort, PartitionCounts, ProducerHook, WalStreamPort
from .reader import View
from .sealing import Sealing
from .tier_view import TierView

_STAMP_FIELDS = {"bytes": "st_size", "ino": "st_ino", "mtime_ns": "st_mtime_ns"}


class RecoveryPointNotWritten(StorageError):
    """(A full disk.) The partition's segments were fsynced, but its ``.checkpoint`` could
    not be written: what was appended is durable in the segments (a WAL holding it may go),
    only the recovery point lags behind (the next writer to open it scans a little more)."""


class PartitionLog:
    """One partition directory: ``append`` (group commit), ``batches`` (reads), the log start,
    the tier view and every change of its segments. Thread-safe."""

    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig,
                 writable: bool, wal: WalStreamPort | None = None, topic_id: bytes = b"",
                 wal_sync: str = "always", cuts: list[dict] | None = None,
                 progress: Progress | None = None,
                 holds: FlockHolds | None = None, cold: ColdSegments | None = None,
                 hot: HotCachePort | None = None, lock_wait: LockWait = DEFAULT_WAIT,
                 producers: Callable[[PartitionLog], ProducerHook] | None = None,
                 keys: TopicKeys | None = None, counts: PartitionCounts | None = None,
                 direct_bytes: int = -1) -> None:
        self.dir = directory
        self.counts: PartitionCounts = counts if counts is not None else UNCOUNTED
        self.topic = topic
        self.partition = partition
        self.writable = writable
        self.topic_id = topic_id
        self.wal = wal  # this process's WAL stream, set by the engine with the first append
        self.wal_sync = wal_sync
        # a batch of at least this many bytes skips the WAL: written once, straight to the
        # segment (append.direct.bytes; -1: never)
        self.direct_bytes = direct_bytes
        self.holds = holds  # shared by the engine's partitions: see FlockHolds
        self.cold = cold  # where reads of tiered offsets go
        self.hot = hot  # recent batches in memory, or None
        self.cuts = cuts if cuts is not None else []  # shared with the engine (repairs())
        # the topic's data keys: appends seal with them (encryption.enable), reads open
        self.keys = keys
        self.dirty = False  # appended since the last checkpoint
        if writable:  # (partition-N, its topic's dir and topics/: nothing written through a link)
            guard.check_own_dir(directory, 3)
        self.lock = PartitionLock(directory, topic, partition, writable, lock_wait)
        self.mutex = self.lock.mutex
        self.config = config  # the topic's configs; the engine sets them as they change
        self.segs = SegmentSet(directory, topic, partition, writable, self.cuts, progress,
                               lambda: self.config.index_interval_bytes)
        # the keys and where every data batch is sealed (engine.segments.sealed_range)
        self.seals = Sealing(directory, topic, partition, keys, lambda: self.config,
                             self.segs.ignored)
        self.sealed_range = self.seals.tracker  # (as it is on disk; maintenance reads it)
        self.tierview = TierView(directory, self.tier_home)
        self._txnindexes = txn_index.Present(directory)  # (read_committed reads ask it)
        self.pipeline = AppendPipeline(self, self.lock, self.segs)
        self.budget: FileBudget | None = None  # set by the engine (engine.storage.partitions)
        try:
            loaded = loader.load(directory, self.segs, self.lock, self.tierview,
                                 config.remote_storage_uri, writable)
        except BaseException:
            self.lock.close()
            raise
        self.log_start = loaded.log_start  # persisted in .checkpoint; may lie inside the first segment
        # the .checkpoint the start was read from (its identity: read again once it changes)
        self._ckpt_stamp: tuple[int, int, int] | None = loaded.checkpoint_stamp
        # the log start known durable, so a light checkpoint keeps it: the start read from
        # disk is (every move of it is a full checkpoint), so the WAL's checkpoints may be
        # light until it moves
        self._written_start = self.start_offset()
        # format-2 batches (idempotent and transactional producers) are checked against it;
        # without one (tools, Spark) they are refused
        self.producers: ProducerHook | None = producers(self) if producers is not None else None

    @property
    def opener(self) -> Callable[[Any, int, BatchHeader, str], Any] | None:
        """What opens this partition's encrypted batches (None: a log opened without its
        topic's keys), taken once per read: where the partition records that every batch is
        sealed, it also refuses a plaintext data batch there as damage (engine.storage.
        sealing)."""
        return self.seals.opener()

    def seal_fn(self) -> Callable[[bytearray], bytearray] | None:
        """How maintenance seals the batches it writes anew: with the topic's current data
        key when ``encryption.enable``, else None; KeyUnavailable now when that key cannot be
        had (engine.storage.sealing)."""
        return self.seals.seal_fn()

    @property
    def tier(self) -> list[ColdSegment]:
        """The tier manifest as last read, oldest first."""
        return self.tierview.entries

    @property
    def tier_error(self) -> Exception | None:
        return self.tierview.error

    def tier_home(self) -> Home:
        """Where this partition's cold objects may lie (its configured cold prefix, and the
        rule for prefixes its manifest recorded): engine.segments.tier_manifest."""
        data_dir = os.path.dirname(os.path.dirname(os.path.dirname(self.dir)))
        return tier_manifest.home(data_dir, self.topic, self.topic_id.hex(), self.partition,
                                  self.config.remote_storage_uri)

    def stop_appends(self) -> None:
        """Refuse appends from now on; those already logged still finish (Engine.close)."""
        self.pipeline.stop()

    def release_files(self) -> bool:
        """Close this log's descriptors while it is idle (the engine's file budget,
        engine.storage.budget); every later use opens them again. A reader (or a maintenance
        pass) holding a segment keeps that segment's descriptors until it lets go of it:
        the log continues on a copy. Skipped (False) while an append is in flight or another
        thread holds the mutex (a flock kept between appends is let go). Nothing is lost:
        what an append wrote is in the page cache, and a checkpoint reopens the files to
        fsync them."""
        if not self.mutex.acquire(blocking=False):
            return False
        try:
            if not self.pipeline.idle():
                return False
            if self.lock.held:  # kept between appends (FlockHolds): let go of it now
                self.lock.release()
            self.segs.release()
            self.lock.release_fd()
            return True
        finally:
            self.mutex.release()

    def files(self) -> int:
        """Descriptors this log holds open now."""
        return self.segs.files() + (self.lock.fd >= 0)

    def close(self) -> None:
        """Finish the groups in flight, fail queued appends, release every file."""
        with self.lock.cond:
            self.pipeline.close()
            if self.hot is not None:
                self.hot.clear(self)
            self.segs.close()
            self.lock.close()

    # ---------------------------------------------------------------- the view
    def sync_view(self, repair: bool) -> None:
        """(mutex held.) Bring the view up to date with what other processes wrote; a writer
        (``repair``, holding the flock) cuts a torn tail on the way."""
        if self.segs.released:
            self.segs.reacquire()
            if self.budget is not None:
                self.budget.touch(self)
        elif self.lock.held and not repair:
            return  # this process appends: nobody else does, its view is the log
        if self.segs.refresh(repair) and self.hot is not None:
            self.hot.clear(self)  # cut by a repair: cached batches may be gone

    def refresh(self) -> None:
        with self.mutex:
            self.sync_view(repair=False)

    def read_log_start(self) -> None:
        """Pick up a log start offset persisted by any process (one stat when unchanged),
        and the tier manifest."""
        if self.tierview.refresh(self.config.remote_storage_uri):
            self.segs.relist()  # segments came back (restore) or went (tiering)
        st = checkpoint.stamp(self.dir)
        if st is None or st == self._ckpt_stamp:
            return
        self._ckpt_stamp = st
        self.log_start = log_start.persisted(self.dir, self.segs, self.log_start,
                                             lambda: self.sync_view(repair=False))

    def start_offset(self) -> int:
        return log_start.first_offset(self.log_start, self.segs, self.tierview)

    def local_start(self) -> int:
        """The first offset held by a local segment (or the log start, if later)."""
        return min(max(self.log_start, self.segs.bases[0]), self.segs.active.next_offset)

    def end_offset(self) -> int:
        return self.segs.active.next_offset

    def offsets(self) -> tuple[int, int]:
        """(log start offset, log end offset), up to date."""
        with self.mutex:
            self.sync_view(repair=False)
            self.read_log_start()
            return self.start_offset(), self.segs.active.next_offset

    def view(self) -> View:
        with self.mutex:
            self.sync_view(repair=False)
            self.read_log_start()
            return self._snapshot()

    def reload_view(self) -> View:
        """A view read afresh: after a segment vanished under a reader."""
        with self.mutex:
            if self.segs.released:
                self.sync_view(repair=False)
            self._ckpt_stamp = None
            self.tierview.forget()
            self.read_log_start()
            self.segs.drop_replaced()
            self.segs.relist()
            return self._snapshot()

    def _snapshot(self) -> View:
        tv = self.tierview
        return View(self.start_offset(), self.segs.active.next_offset, list(self.segs.bases),
                    self.segs.active, tv.entries, tv.bases)

    def all_segments(self, recheck: bool = False) -> list[Segment]:
        """The local segments, oldest first; ``recheck`` first drops cached segments whose
        file another process replaced (plan on the files as they are)."""
        with self.mutex:
            if recheck:
                self.segs.drop_replaced()
            self.sync_view(repair=False)
            self.read_log_start()  # (and the tier manifest: start_offset depends on both)
            return self.segs.all()

    def sealed(self, base: int) -> Segment:
        return self.segs.sealed(base)

    def key_usage(self, cache: dict | None = None) -> list[dict[str, Any]]:
        """The data key versions its segments use (engine.storage.key_usage)."""
        return key_usage.rows(self, cache)

    def segment_max_timestamp(self, seg: Segment) -> int:
        if not seg.loaded:
            with self.mutex:
                seg.load(repair=False)
        return seg.max_timestamp

    # ---------------------------------------------------------------- reading
    def batches(self, offset: int, max_bytes: int = 1 << 20, sealed_crc: bool = True
                ) -> Iterator[BatchRef]:
        """CRC-checked batches holding ``offset`` and after, about ``max_bytes`` in all: from
        the hot cache, the local segments, or (below them) cold segments via the cache.
        ``sealed_crc=False``: an encrypted batch's CRC is left to its tag (the caller opens
        every one it uses)."""
        return reader.batches(self, offset, max_bytes, sealed_crc)

    def headers(self, start: int, end: int,
                body: Callable[[BatchHeader], bool] = lambda h: False
                ) -> Iterator[tuple[BatchHeader, bytes | None]]:
        """(mutex held.) Headers of the local batches holding offsets ``start`` to ``end``,
        without their bodies (engine.storage.reader.headers)."""
        return reader.headers(self.segs, start, end, body)

    def report_ignored(self, e: DamagedMetadata) -> None:
        """Note a damaged metadata file of this partition that was ignored, never acted on
        (``Engine.repairs()``)."""
        self.segs.ignored(e)

    def cold_segment(self, entry: ColdSegment) -> Segment:
        """A read-only Segment over the locally cached copy of a cold segment."""
        if self.cold is None:
            raise StorageError(f"{self.topic}-{self.partition}: offsets {entry.base_offset}.."
                               f"{entry.next_offset - 1} are in the cold store, which this "
                               "reader cannot reach")
        return self.cold.segment(entry)

    def cold_entries(self) -> list[ColdSegment]:
        """The tier manifest's segments not also held locally, oldest first."""
        with self.mutex:
            self.sync_view(repair=False)
            self.read_log_start()
            if self.tierview.error is not None:
                raise self.tierview.error
            return [e for e in self.tierview.entries if e.base_offset < self.segs.bases[0]]

    # ---------------------------------------------------------------- writing
    # (mark_dirty, flock_taken, sealer and roll: what the append pipeline asks of its log,
    # engine.storage.pipeline.AppendOwner)
    def mark_dirty(self) -> None:
        """Appended since the last checkpoint: the WAL's next checkpoint fsyncs this log."""
        self.dirty = True

    def flock_taken(self) -> int:
        """(mutex held, the flock just taken by the append pipeline.) Catch up with what other
        processes did while it was free: check the partition still exists, bring the view up
        to date (cutting a torn tail), apply the batches appended meanwhile to the producer
        state, re-read the topic's key set. Returns the log end."""
        self.lock.check_alive()
        self.sync_view(repair=True)
        end = self.segs.active.next_offset
        if self.producers is not None:  # batches other processes appended meanwhile
            self.producers.caught_up(end)
        if self.keys is not None and (self.keys.keyset is not None
                                      or self.config.encryption_enable):
            # another process may have rotated, or dropped the version held here: read the
            # key set now (a drop holds this flock while it checks, so what is read here is
            # safe to seal with while the flock is held)
            self.keys.refresh()
        if self.keys is not None:  # (every writer of it holds this flock: it stays as read)
            self.seals.claim = self.sealed_range.current()
        return end

    def sealing(self, sealed: bool, offset: int) -> None:
        """(flock held.) A data batch, ``sealed`` or not, is about to be logged at ``offset``:
        ``encryption.json`` says so first (engine.storage.sealing)."""
        self.seals.sealing(sealed, offset)

    def sealer(self) -> Sealer | None:
        """(flock held.) What seals a data batch appended now (None: plaintext); raises
        KeyUnavailable when it cannot be had (engine.storage.sealing)."""
        return self.seals.sealer()

    def append(self, batch: EncodedBatch) -> int:
        """Assign offsets to ``batch`` and store it durably; returns its base offset
        (engine.storage.pipeline)."""
        return self.pipeline.append(batch)

    def append_all(self, batches: list[EncodedBatch], bases: list[int] | None = None
                   ) -> list[int]:
        """``append`` of several batches, one WAL fsync for all (``append_each``); their base
        offsets (also put in ``bases`` as they are stored: what a failure part of the way
        left stored)."""
        return append_each([(self, b) for b in batches], done=bases)

    def roll(self) -> Segment:
        """(Lock held.) Seal the active segment (fsynced) and start a new one at the end."""
        if self.hot is not None:
            self.hot.clear(self)  # the hot run covers the active segment only
        seg = self.segs.roll()
        self.counts.rolls.inc()
        return seg

    def roll_active(self) -> bool:
        """Seal the active segment now, when it holds a batch, and start a new one: how a
        pass over sealed segments reaches the newest records (``rivven key reencrypt``).
        Returns whether it rolled."""
        with self.mutation():
            if self.segs.active.size == 0:
                return False
            self.roll()
            return True

    @contextlib.contextmanager
    def mutation(self) -> Iterator[None]:
        """The prologue of every change: wait for the batches in flight to reach the segment,
        take the partition lock, check the partition still exists, and bring the view up to
        date (cutting a torn tail)."""
        self.pipeline.quiesce()
        with self.lock.exclusive():
            self.lock.check_alive()
            self.sync_view(repair=True)
            yield

    def replay(self, batches: list[tuple[int, int, int, int, bytes]]) -> tuple[int, int, int]:
        """Append WAL batches ``(base, count, last_delta, max_ts, bytes)`` that continue the log,
        in offset order; ones already in the log are skipped, ones after a hole cannot be
        placed. Returns (applied, skipped, dropped)."""
        applied = skipped = dropped = 0
        with self.mutation():
            for base, count, last_delta, max_ts, buf in batches:
                end = self.segs.active.next_offset
                if base < end:
                    skipped += 1
                    continue
                if base > end or not buf:  # (no bytes: the log shrank since the plan)
                    dropped = len(batches) - applied - skipped  # a hole: the rest can't be placed
                    break
                self.pipeline.write(buf, base, count, last_delta, max_ts, sync=False)
                applied += 1
            if applied:
                self.segs.publish()  # (a replay's batches were logged: durable)
            self.dirty = self.dirty or applied > 0
            if applied and self.producers is not None:
                self.producers.caught_up(self.segs.active.next_offset)
        return applied, skipped, dropped

    def checkpoint(self) -> dict:
        """fdatasync the active segment, then record the recovery point (the WAL's
        checkpoint: docs/DURABILITY.md). Its indexes are not fsynced (a segment's are when it
        rolls; recovery checks and rebuilds the active one's past the point), nor the
        directory after the rename (a crash may leave the previous point: a longer scan).

        Batches already logged reach the segment first: their WAL records may sit in a file
        the caller is about to delete.
        """
        self.dirty = False  # an append from here on marks it again and is checkpointed later
        try:
            with self.mutation():
                return self._checkpoint_locked(light=True)
        except BaseException:
            self.dirty = True
            raise

    def _checkpoint_locked(self, light: bool = False) -> dict:
        """``light``: when the log start is still the one known durable, only the recovery
        point moves (no index fsyncs, no directory fsync)."""
        # never write back a start another process moved on: read the file itself, its
        # (inode, mtime, size) can repeat (inode reuse, coarse timestamps); the flock is
        # held, so it stays as read until the write below
        self._ckpt_stamp = None
        self.read_log_start()
        light = light and self.start_offset() == self._written_start
        act = self.segs.active
        if light:
            act.sync()
        else:
            act.sync_all()
        point = {"segment": act.base, "position": act.size,
                 "recovery_point": act.next_offset, "log_start_offset": self.start_offset()}
        try:
            checkpoint.write_checkpoint(self.dir, point, sync_dir=not light)
        except StorageError as e:
            if disk_full(e):
                raise RecoveryPointNotWritten(str(e)) from e
            raise
        self._ckpt_stamp = None
        if not light:
            self._written_start = point["log_start_offset"]
        if self.producers is not None:
            self.producers.checkpointed(act.next_offset)
        return point

    # ---------------------------------------------------------------- the producer state's files
    # (the producer state, engine.txn.hook, keeps its snapshots and the aborted-transaction
    # indexes through these calls: only the log writes files into its directory)
    def snapshots(self) -> list[int]:
        """The offsets of the producer-state snapshots of the partition, oldest first."""
        return snapshot_files.offsets(self.dir)

    def read_snapshot(self, offset: int) -> tuple[bytes, str]:
        """The bytes of the snapshot at ``offset`` and its path (for messages): DamagedMetadata
        when unreadable, FileNotFoundError when gone (engine.segments.snapshot_files)."""
        return snapshot_files.read(self.dir, offset)

    def write_snapshot(self, offset: int, data: bytes) -> None:
        """(Lock held: a checkpoint.) Write the snapshot at ``offset`` whole (tmp, fsync,
        rename, fsync dir)."""
        snapshot_files.write(self.dir, offset, data)

    def delete_snapshots(self, offsets: list[int]) -> None:
        """(Lock held.) Delete the snapshots at ``offsets`` (missing ones are fine)."""
        snapshot_files.remove(self.dir, offsets)

    def index_aborts(self, aborts: Iterable[AbortedTxn], end: int) -> None:
        """(Lock held: a checkpoint, before its snapshot at ``end``.) Append to each segment's
        ``.txnindex`` the aborted transactions of ``aborts`` (in marker order) whose marker
        lies in it, below ``end`` and at or past the local log start, and fsync it: one open
        and one fsync per segment (engine.segments.txn_index)."""
        bases = self.view().bases
        start = self.local_start()
        by_segment: dict[int, list[AbortedTxn]] = {}  # (in marker order within each)
        for a in aborts:
            if start <= a.last_offset < end:
                by_segment.setdefault(bases[bisect_right(bases, a.last_offset) - 1], []).append(a)
        for base, found in by_segment.items():
            txn_index.write_entries(self.dir, base, found)

    def aborted_txns(self, start: int) -> Iterator[AbortedTxn]:
        """The ``.txnindex`` entries of the segments from the one holding ``start`` on, in
        offset order: cold segments first (from the cold cache's copy), then local ones. Read
        lazily, a segment at a time: a read_committed read stops once it has what it needs
        (engine.txn.isolation)."""
        for entry in self.cold_entries():
            if entry.next_offset <= start or not entry.txnindex_bytes:
                continue
            seg = self.cold_segment(entry)  # (the cold cache's: it stays open)
            found, _ = txn_index.read_entries(
                filenames.path(seg.directory, seg.base, filenames.TXNINDEX), seg.base,
                entry.next_offset)
            yield from found
        bases = self.view().bases
        present = self._txnindexes.bases()
        for base in bases[max(0, bisect_right(bases, start) - 1):]:
            if base in present:
                yield from txn_index.read_entries(
                    filenames.path(self.dir, base, filenames.TXNINDEX), base)[0]

    # ---------------------------------------------------------------- changes
    def advance_start(self, offset: int) -> tuple[int, int, list[dict]]:
        """Move the log start offset forward to ``offset`` (never back, at most the end),
        persist it, then delete the whole segments below it. Returns (prior, new, deleted)."""
        with self.mutation():
            self._ckpt_stamp = None
            self.read_log_start()
            prior = self.start_offset()
            if offset > prior:
                old = self.log_start
                self.log_start = min(offset, self.segs.active.next_offset)
                try:
                    self._checkpoint_locked()
                except StorageError as e:
                    if not disk_full(e) or self.tierview.entries:
                        self.log_start = old
                        raise
                    # A full disk: the whole segments below the new start go first, which
                    # frees the space the checkpoint needs. A crash in between leaves the log
                    # starting at its first remaining segment: a prefix gone, never a hole
                    # (there are no cold segments below the local ones).
                    gone = self.segs.delete_below(self.start_offset())
                    self._checkpoint_locked()
                    return prior, self.start_offset(), gone
            return prior, self.start_offset(), self.segs.delete_below(self.start_offset())

    def replace_segments(self, install: Sequence[int] = (), staged_dir: str | None = None,
                         remove: Sequence[int] = (),
                         expect: Mapping[int, Mapping[str, int]] | None = None,
                         side_files: Mapping[str, Any] | None = None) -> None:
        """The one way to change which segments the partition holds (Kafka's
        ``replaceSegments``), as one crash-safe swap (engine.segments.swap): the segments
        staged in ``staged_dir`` at bases ``install`` (indexes built, fsynced) go in, those at
        ``remove`` go out, and ``side_files`` (name -> JSON document) are written.

        ``expect[base]`` is what the caller saw of a segment it replaces (``bytes``, ``ino``,
        ``mtime_ns``). Refused with SwapRefused, nothing changed, when one of them changed or
        vanished, when ``remove`` reaches the active segment, or when another process left a
        swap half-done (finished here first).
        """
        name = f"{self.topic}-{self.partition}"
        with self.mutation():
            if swap.pending(self.dir):
                # another process's swap, cut short after its commit point, that this process
                # (open since before) never rolled forward: the caller planned on a half-swapped
                # log
                swap.roll_forward(self.dir)
                self._after_swap(())
                raise SwapRefused(f"{name}: an interrupted swap of another pass was finished "
                                  "first; nothing was swapped, run the pass again")
            if remove and max(remove) >= self.segs.active.base:
                raise SwapRefused(f"{name}: the active segment changed under the pass; nothing "
                                  "was swapped")
            for base, want in (expect or {}).items():
                p = filenames.path(self.dir, base, filenames.LOG)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    st = None
                if st is None or any(getattr(st, _STAMP_FIELDS[k]) != v for k, v in want.items()):
                    raise SwapRefused(f"segment {p} changed or vanished since the plan "
                                      "(retention or another pass?); nothing was swapped")
            if install:
                self.seals.claim_for_swap(staged_dir or "", install)
                swap.stage(self.dir, staged_dir or "", install)
            failpoint("swap-cleaned")
            swap.commit(self.dir, install, remove, side_files or {})
            failpoint("swap-committed")
            swap.roll_forward(self.dir)
            self._after_swap(remove)

    def claim_sealed(self) -> sealed_range.Ranges:
        """After a re-encryption: record that every data batch is sealed when the topic
        encrypts and no plaintext one is left (local or cold), or that none is when it does
        not and no sealed one is left. Returns the ranges now recorded."""
        with self.mutation():
            return self.seals.claim_sealed(self.key_usage, self.segs.all)

    def _after_swap(self, removed: Sequence[int]) -> None:
        for b in removed:
            self.segs.segments.pop(b, None)  # closed when no reader holds it any more
        self.segs.drop_replaced()
        self.segs.relist()
        self._checkpoint_locked()  # a new .checkpoint tells other processes to look again

    def set_tier(self, entries: list[ColdSegment], remove: Sequence[int] = (),
                 expect: Mapping[int, Mapping[str, int]] | None = None) -> None:
        """Replace the tier manifest with ``entries`` and (in the same swap) delete the local
        segments at ``remove``, which the new manifest must hold."""
        self.replace_segments(remove=remove, expect=expect,
                              side_files={tier_manifest.MANIFEST:
                                          tier_manifest.document(entries, self.tier_home())})

