"""The append pipeline of one partition: offsets, the WAL record, group commit, the segment.

Group commit, pipelined. Under the partition mutex the calling thread assigns the offsets and
writes the WAL record itself (no hand-off to a leader); then, without the mutex, it waits in
``WalStream.sync``, where one fdatasync serves every thread of every partition waiting
meanwhile. Whichever thread comes back first writes every batch whose WAL bytes are now
durable to the segment, in offset order (``_drain``), so the others usually find their batch
written when they wake up. A batch is visible to readers only once it is in the segment, so
no reader ever sees a record a crash could take away.

The partition flock is taken by the first append and kept while appends are in flight (at
most about HOLD_S under constant load, so other processes get their turn); the in-memory log
end is authoritative meanwhile. With ``holds``, an idle pipeline keeps it too, until it has
been idle IDLE_HOLD_S (engine.storage.holds).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Protocol

from .. import clock
from ..crypto.batch import Sealer
from ..errors import InvalidArgument, RivvenError, StorageError
from ..failpoint import failpoint
from ..format.records import ATTR_CONTROL, MAGIC_PRODUCER, EncodedBatch, read_header
from ..segments.segment import Segment
from ..segments.segment_set import SegmentSet
from .config import TopicConfig
from .holds import HOLD_S, FlockHolds
from .partition_lock import PartitionLock
from .ports import HotCachePort, PartitionCounts, ProducerHook, WalStreamPort

MAX_RELATIVE_OFFSET = (1 << 31) - 1
MAGIC_AT = 12  # the batch header's magic byte
ATTRS_AT = 20  # the low byte of its attributes (ATTR_CONTROL is in it)


class _Entry:
    """One batch in the pipeline: offsets assigned, WAL record written. It reaches the
    segment once its WAL bytes are durable and every batch before it is there."""

    __slots__ = ("batch", "buf", "base", "wal_end", "seq", "error", "done", "durable", "owner",
                 "seg", "pos", "synced")

    def __init__(self, batch: EncodedBatch, buf: bytearray, base: int, wal_end: int,
                 seq: int) -> None:
        self.batch = batch
        self.buf = buf
        self.base = base
        self.wal_end = wal_end
        self.seq = seq
        self.error: BaseException | None = None
        self.done = False
        self.durable = False  # reaches the segment only once its WAL bytes are durable
        self.owner = threading.get_ident()  # the thread that logged it (and will finish it)
        # a direct append: its bytes were written at ``pos`` of ``seg`` (no WAL record), and
        # it is accounted once its owner's fdatasync of the segment came back (``synced``)
        self.seg: Segment | None = None
        self.pos = 0
        self.synced = False


class AppendOwner(Protocol):
    """What the append pipeline needs of the partition it appends to (PartitionLog), read
    at each use: the engine hands the WAL stream in with the first append and replaces the
    topic's configs as they change. The pipeline is handed the partition lock and the
    segment set themselves; it never sees the log's other parts."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def topic_id(self) -> bytes: ...
    @property
    def config(self) -> TopicConfig:
        """The topic's configs: the segment limits, ``index.interval.bytes``."""
    @property
    def wal(self) -> WalStreamPort | None:
        """Where batches are logged first; None: no WAL (each batch fsynced in its segment)."""
    @property
    def wal_sync(self) -> str: ...
    @property
    def direct_bytes(self) -> int:
        """``append.direct.bytes``: a batch this large skips the WAL (-1: none does)."""
    @property
    def holds(self) -> FlockHolds | None:
        """The engine's kept flocks (engine.storage.holds), shared by its partitions."""
    @property
    def hot(self) -> HotCachePort | None:
        """Recent batches in memory, keyed by the owner."""
    @property
    def counts(self) -> PartitionCounts: ...
    @property
    def producers(self) -> ProducerHook | None:
        """Checks and applies format-2 batches; None: they are refused (tools, Spark)."""

    dirty: bool  # (set by mark_dirty; put back when nothing was logged after all)

    def mark_dirty(self) -> None:
        """A batch is about to be logged: the next WAL checkpoint must fsync the partition."""

    def flock_taken(self) -> int:
        """(mutex held, the flock just taken.) Catch up with what other processes did while
        it was free; raises when the partition is gone. Returns the log end."""

    def sealer(self) -> Sealer | None:
        """(flock held.) What seals a data batch appended now (None: plaintext); raises
        KeyUnavailable when the topic's key cannot be had."""

    def sealing(self, sealed: bool, offset: int) -> None:
        """(flock held.) A data batch, ``sealed`` or not, is about to be logged at
        ``offset``: the partition's record of where every batch is sealed says so first
        (engine.segments.sealed_range)."""

    def roll(self) -> Segment:
        """(flock held.) Seal the active segment and start a new one at the end."""


class AppendPipeline:
    def __init__(self, log: AppendOwner, lock: PartitionLock, segs: SegmentSet) -> None:
        self.log = log
        self.lock = lock
        self.segs = segs
        self.cond = lock.cond  # an entry reached the segment (or failed)
        self.pending: deque[_Entry] = deque()  # logged, not yet in the segment, offset order
        self._active: deque[None] = deque()  # one item per thread inside append()
        self._waiters = 0  # threads waiting on cond
        self._assigned_end = 0
        self._seq = 0
        self._done_seq = 0
        self._broken = False
        self._broken_error: BaseException | None = None
        self.closed = False

    # ---------------------------------------------------------------- appending
    def append(self, batch: EncodedBatch) -> int:
        """Assign offsets to ``batch`` and store it durably; returns its base offset."""
        return self.finish(self.start(batch))

    def start(self, batch: EncodedBatch, durable: bool = False, direct: bool = True) -> _Entry:
        """The first half of ``append``: offsets assigned, the WAL record written. Every
        entry started must be given to ``finish`` (engine.storage.log.append_each starts the
        batches of several partitions, then finishes them: one WAL fsync for all). ``durable``: whatever
        ``wal.sync`` says, the batch reaches the segment (and readers) only once its WAL
        bytes are fdatasynced, and ``finish`` waits for that (a transaction's markers: one
        seen in a segment is durable, so a retry or a recovery can trust it). ``direct``: a
        batch of ``append.direct.bytes`` or more may skip the WAL (append_each of several
        partitions: no, they share one WAL fsync)."""
        log = self.log
        with self.cond:
            if self.closed:
                raise StorageError(f"{log.topic}-{log.partition} was closed; open it again")
            self._active.append(None)
            try:
                entry = self._log(batch, direct)
                if durable and log.wal is not None:
                    entry.durable = True
                if log.wal is None or log.wal_sync != "always":
                    self._drain()  # no WAL fsync to wait for
            except BaseException:
                self._active.pop()
                self._maybe_release()
                raise
        return entry

    def finish(self, entry: _Entry) -> int:
        """The second half of ``append``: wait until the entry's WAL bytes are durable and it
        is in the segment; returns its base offset."""
        cond = self.cond
        log = self.log
        error: BaseException | None = None
        if entry.seg is not None and not entry.synced:
            self._sync_direct(entry)
        try:
            if not entry.done:
                # only now may the batch become visible (not done yet: it was logged, a log
                # without a WAL settles each batch in start)
                log.wal.sync(entry.wal_end)  # type: ignore[union-attr]
        except BaseException as e:  # noqa: BLE001 - handed to the entry, re-raised below
            error = e
        if not entry.done:  # (usually the syncer wrote it already: see after_wal_sync)
            with cond:
                if not entry.done:
                    if error is not None:
                        entry.error = error if isinstance(error, Exception) else StorageError(
                            "append interrupted")
                    self._drain()
                    while not entry.done:  # an earlier batch's owner has yet to come back
                        self.wait()
        self._active.pop()  # (deque ops are atomic: no mutex needed unless we were last)
        if not self._active and self.lock.held:
            with cond:
                self._maybe_release()
        if error is not None and not isinstance(error, Exception):
            raise error
        if entry.error is not None:
            raise entry.error
        return entry.base

    def _log(self, batch: EncodedBatch, direct: bool = True) -> _Entry:
        """(mutex held.) Take the flock if needed, assign offsets, write the WAL record."""
        log = self.log
        lock = self.lock
        while lock.held and (self._broken or time.monotonic() - lock.since > HOLD_S):
            if self.pending:  # let the pipeline drain, then start afresh
                me = threading.get_ident()
                if any(e.owner == me for e in self.pending):
                    # this thread logged batches it has yet to finish (append_each's several
                    # batches of one partition): waiting for the drain would wait for itself
                    break
                self.wait()
                if self.closed:
                    raise StorageError(f"{log.topic}-{log.partition} was closed; open it "
                                       "again")
                continue
            lock.release()
        # dirty before the WAL write: a checkpoint that rotates the WAL after our record then
        # sees this partition and fsyncs it before deleting the file holding the record
        was_dirty = log.dirty
        log.mark_dirty()
        hook = log.producers
        if not lock.held:
            try:
                lock.hold()
                self._broken = False
                self._assigned_end = log.flock_taken()
            except BaseException as e:
                lock.release()
                # nothing was logged: a partition a writer refuses (a damaged end) is no
                # checkpoint's to fail at close, which would keep an empty WAL for a replay
                log.dirty = was_dirty
                if isinstance(e, Exception) and not isinstance(e, RivvenError):
                    raise StorageError(f"{log.topic}-{log.partition}: append failed: {e}"
                                       ) from e
                raise
        # (a marker is never sealed; raises before anything is checked or written)
        control = batch.buf[ATTRS_AT] & ATTR_CONTROL
        sealer = None if control else log.sealer()
        header = None
        if batch.buf[MAGIC_AT] == MAGIC_PRODUCER:  # (one byte: plain batches pay nothing more)
            header = read_header(batch.buf)
            if hook is None:
                raise InvalidArgument(
                    f"{log.topic}-{log.partition} was opened without producer state (a tool "
                    f"or a Spark job): a batch of producer id {header.producer_id} can only "
                    "be appended through an Engine")
            original = hook.check(header, batch.buf)  # raises: nothing written, no offsets
            if original is not None:
                return self._duplicate(original)
        base = self._assigned_end
        if not control:  # (raises before anything is logged: no offsets used)
            log.sealing(sealer is not None, base)
        buf = batch.assign(base)
        if sealer is not None:  # the WAL and the segment get the very same sealed bytes
            buf = sealer.seal_batch(buf, log.topic_id, log.partition)
        wal_end = 0
        wal = log.wal
        seg = None
        pos = 0
        if direct and wal is not None and 0 <= log.direct_bytes <= len(buf) and not control \
                and log.wal_sync == "always" and (not self.pending or self.pending[-1].seg):
            # written once, straight to the segment: fdatasynced there by its owner (finish),
            # then accounted and published. A batch in the WAL pending before it would have
            # to reach the segment first: then this one takes the WAL too (None)
            seg, pos = self._write_direct(buf, base, batch)
        if seg is None and wal is not None:  # a failed write raises: no offsets, nothing logged
            wal_end = wal.append_batch(log.topic_id, log.partition, log.topic, buf,
                                       batch.last_offset_delta + 1)
        if header is not None:
            hook.applied(header, buf, base)  # type: ignore[union-attr]
        self._assigned_end = base + batch.last_offset_delta + 1
        self._seq += 1
        entry = _Entry(batch, buf, base, wal_end, self._seq)
        self.pending.append(entry)
        if seg is not None:
            entry.seg, entry.pos = seg, pos
        elif wal is not None:
            wal.listeners.add(self)
        return entry

    def _write_direct(self, buf: bytearray, base: int, batch: EncodedBatch
                      ) -> tuple[Segment | None, int]:
        """(mutex and flock held; nothing pending, or only direct appends.) Write a batch to
        the segment's end, not yet accounted: no reader sees it until its fdatasync
        (``_sync_direct``) and the publication after it. A failed write raises with nothing
        written; (None, 0) when it would follow direct appends in flight across a roll."""
        count = batch.last_offset_delta + 1
        if self.pending:  # right after the direct appends in flight, in the same segment
            last = self.pending[-1]
            seg = last.seg
            pos = last.pos + len(last.buf)
            if seg is not self.segs.active or self._must_roll(
                    seg, pos - seg.size + len(buf), base + count - seg.next_offset,
                    len(self.pending)):
                return None, 0
        else:
            seg = self._maybe_roll(len(buf), count)
            if base != seg.next_offset:
                raise StorageError(f"{self.log.topic}-{self.log.partition}: batch at offset "
                                   f"{base} does not follow the log end {seg.next_offset}")
            pos = seg.size
        seg.reserve(pos + len(buf), self.log.config.segment_bytes)
        try:
            seg.write(buf, pos)
        except StorageError:
            self._undo(seg, pos)
            raise
        wal = self.log.wal
        if wal is not None:  # (checkpoints come by these bytes too: engine.wal.owner)
            wal.direct_written += len(buf)
        failpoint("append.direct.after_write")  # (crash tests: in the file, not durable)
        return seg, pos

    def _sync_direct(self, entry: _Entry) -> None:
        """(no mutex.) fdatasync a direct append's segment: it covers every direct append
        written so far (the batches of one produce call, say); then account and publish
        them (``_drain``). A failed fsync cuts them off the file again and fails them."""
        with self.cond:
            if entry.synced:
                return  # another owner's fsync covered it
            upto = self.pending[-1].seq  # (direct ones in flight are the pending list's tail)
        error: BaseException | None = None
        try:
            entry.seg.sync()  # type: ignore[union-attr]
        except BaseException as e:  # noqa: BLE001 - handed to the entry, re-raised by finish
            error = e
        failpoint("append.direct.after_sync")  # (crash tests: durable, not yet published)
        with self.cond:
            cut = False
            for p in self.pending:
                if p.seg is None or p.synced:
                    continue
                if p.seq > upto:
                    break
                if error is not None:
                    if not cut:
                        self._undo(p.seg, p.pos)
                        cut = True
                    p.error = error if isinstance(error, Exception) else StorageError(
                        "append interrupted")
                p.synced = True
            self._drain()
        if error is not None and not isinstance(error, Exception):
            raise error

    def _duplicate(self, base: int) -> _Entry:
        """(mutex held.) The entry to wait for when a retried batch was first logged at
        ``base``: its own while it is still in flight (a failed fsync then fails the retry
        too), else one already settled."""
        for e in self.pending:
            if e.base == base:
                return e
        entry = _Entry(None, b"", base, 0, 0)  # type: ignore[arg-type]
        entry.done = True
        return entry

    def after_wal_sync(self) -> None:
        """Called by the thread that just finished a WAL fsync, before it wakes the threads
        it covered: write their batches now, so they wake up to find them written. Skipped
        when the mutex is busy (the owners then drain themselves)."""
        failpoint("append.after_wal_sync")  # (crash tests: durable in the WAL only)
        if self.lock.mutex.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self.lock.mutex.release()

    def _drain(self) -> None:
        """(mutex held.) Write the pending batches whose WAL bytes are durable, in offset
        order, and settle failed ones: a batch after a failed one fails too (its offsets
        would follow a hole), and the next append starts again from the segment's real end."""
        pending = self.pending
        wal = self.log.wal
        always = self.log.wal_sync == "always"
        settled = False
        if len(pending) > 1 and not self._broken:
            settled = self._drain_group()
        while pending:
            e = pending[0]
            if e.seg is not None and not e.synced:
                break  # a direct append whose owner's fdatasync has yet to come back
            if self._broken:
                if e.error is None:
                    e.error = self._broken_error
                    if e.seg is not None:  # (written, never accounted: off the file again)
                        self._undo(e.seg, e.pos)
            elif e.seg is not None:
                if e.error is None:
                    self._account(e, e.seg, e.pos)
            elif e.error is None:
                if wal is not None and (always or e.durable) and not wal.durable(e.wal_end):
                    break
                b = e.batch
                try:
                    self.write(e.buf, e.base, b.count, b.last_offset_delta, b.max_timestamp,
                               sync=wal is None and always, owned=e.buf is b.buf)
                except Exception as err:  # noqa: BLE001
                    e.error = err
                else:
                    self._count(e)
            if e.error is not None and not self._broken:
                self._broken = True
                self._broken_error = e.error
                if self.log.producers is not None:  # it counted batches that never landed
                    self.log.producers.discarded()
            pending.popleft()
            e.done = True
            self._done_seq = e.seq
            settled = True
        if not pending and wal is not None:
            wal.listeners.discard(self)
        if settled:
            try:
                self.segs.publish()  # readers in every process may read them now
            except (RivvenError, OSError):
                pass  # (the partition went: nobody reads it; never the WAL syncer's error)
            if self._waiters:
                self.cond.notify_all()

    def _drain_group(self) -> bool:
        """(mutex held.) Write the leading durable pending batches with one pwritev when they
        all fit in the active segment (a group commit's batches: one syscall, not one each).
        Returns whether any batch was settled; anything it cannot do is left to _drain."""
        pending = self.pending
        log = self.log
        wal = log.wal
        if wal is None:  # (no WAL: each batch is written and fsynced as it comes)
            return False
        check = log.wal_sync == "always"
        run: list[_Entry] = []
        nbytes = count = 0
        for e in pending:
            if e.error is not None or e.seg is not None or len(run) >= 512 \
                    or ((check or e.durable) and not wal.durable(e.wal_end)):
                break  # (512: well below IOV_MAX; a direct append is written already)
            if run and e.base != run[-1].base + run[-1].batch.last_offset_delta + 1:
                break  # (never, offsets are assigned back to back: write would refuse it)
            run.append(e)
            nbytes += len(e.buf)
            count += e.batch.last_offset_delta + 1
        if len(run) < 2:
            return False
        seg = self.segs.active
        seg.index_interval = log.config.index_interval_bytes
        # the same limits _maybe_roll applies batch by batch (each batch adds at most one
        # index entry); a group that would roll goes batch by batch
        if seg.size == 0 or run[0].base != seg.next_offset or self._must_roll(
                seg, nbytes, count, len(run) - 1):
            return False
        pos = seg.size
        try:
            seg.writev([e.buf for e in run], pos)
        except StorageError as err:
            # as if the first batch's write failed: _drain fails it and the ones after it
            self._undo(seg, pos)
            run[0].error = err
            return False
        for e in run:
            self._account(e, seg, pos)
            pos += len(e.buf)
            pending.popleft()
            e.done = True
            self._done_seq = e.seq
        return True

    def _account(self, e: _Entry, seg: Segment, pos: int) -> None:
        """(mutex held.) An entry's bytes are in ``seg`` at ``pos`` (and durable)."""
        b = e.batch
        self._landed(seg, pos, e.buf, e.base, e.base + b.last_offset_delta + 1,
                     b.max_timestamp, e.buf is b.buf)
        self._count(e)

    def _landed(self, seg: Segment, pos: int, buf: bytes | bytearray, base: int, end: int,
                max_ts: int, owned: bool) -> None:
        """(mutex held.) A batch written at ``pos`` of ``seg``: its size, next offset and
        index entries, and the hot cache."""
        seg.appended(pos, base, len(buf), end, max_ts)
        if self.log.hot is not None:
            self.log.hot.add(self.log, base, end, pos, buf, owned=owned)

    def _count(self, e: _Entry) -> None:
        """(mutex held.) A batch in its segment: acknowledged once its owner returns."""
        if not e.buf[ATTRS_AT] & ATTR_CONTROL:  # (a transaction's marker is no record)
            self.log.counts.appended(e.batch.last_offset_delta + 1, len(e.buf))

    # ---------------------------------------------------------------- waiting, the flock
    def wait(self, timeout: float | None = None) -> None:
        """(mutex held.) Wait for an entry to settle."""
        self._waiters += 1
        try:
            self.cond.wait(timeout)
        finally:
            self._waiters -= 1

    def idle(self) -> bool:
        """(mutex held.) Nothing logged waits for the segment and no thread is appending."""
        return not self.pending and not self._active

    def quiesce(self) -> None:
        """Wait until every batch logged so far has reached the segment (or failed)."""
        with self.cond:
            target = self._seq
            while self._done_seq < target:
                self.wait()

    def _maybe_release(self) -> None:
        """(mutex held.) Drop the flock once nobody appends and nothing is in flight."""
        if self.lock.held and not self._active and not self.pending:
            holds = self.log.holds
            if holds is not None and not self._broken:
                holds.keep(self)
                return
            self.lock.release()

    def release_idle(self) -> bool:
        """Drop a flock kept by FlockHolds unless an append took it up again; False when
        the mutex was busy (never waited for: its holder may wait for another process)."""
        if not self.lock.held:
            return True
        mutex = self.lock.mutex
        if not mutex.acquire(blocking=False):
            return False
        try:
            if not self._active and not self.pending:
                self.lock.release()
        finally:
            mutex.release()
        return True

    def stop(self) -> None:
        """Refuse appends from now on; those already logged still finish."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()  # appends waiting in _log give up

    def close(self) -> None:
        """(mutex held.) Finish the groups in flight, fail queued appends."""
        self.closed = True
        log = self.log
        deadline = time.monotonic() + 30
        while self.pending and time.monotonic() < deadline:
            self.wait(0.1)
        for e in self.pending:  # their WAL fsync never came back: fail them, not hang
            e.error = StorageError(f"{log.topic}-{log.partition} was closed while this "
                                   "append waited; retry it")
            e.done = True
        self.pending.clear()
        self.cond.notify_all()

    # ---------------------------------------------------------------- the segment
    def write(self, buf: bytes | bytearray, base: int, count: int, last_delta: int,
              max_ts: int, sync: bool, owned: bool = False) -> None:
        """(Lock held.) Write one batch (offsets assigned) at the end of the log; ``owned``:
        ``buf`` is the produce's own, never changed again (the hot cache keeps it, no copy)."""
        log = self.log
        seg = self._maybe_roll(len(buf), count)
        if base != seg.next_offset:
            raise StorageError(f"{log.topic}-{log.partition}: batch at offset {base} does not "
                               f"follow the log end {seg.next_offset}")
        pos = seg.size
        try:
            seg.write(buf, pos)
            if sync:
                seg.sync()
        except StorageError:
            self._undo(seg, pos)
            raise
        self._landed(seg, pos, buf, base, base + last_delta + 1, max_ts, owned)

    @staticmethod
    def _undo(seg: Segment, pos: int) -> None:
        # Not acknowledged: cut what may have reached the file so no reader ever sees it
        # (never past its end: a truncate there would grow it).
        try:
            if os.fstat(seg.fd).st_size > pos:
                os.ftruncate(seg.fd, pos)
        except OSError:
            pass  # the next writer's refresh truncates the torn tail instead

    def _maybe_roll(self, nbytes: int, count: int) -> Segment:
        seg = self.segs.active
        seg.index_interval = self.log.config.index_interval_bytes
        if seg.size == 0:
            return seg
        if self._must_roll(seg, nbytes, count, 0):
            return self.log.roll()
        return seg

    def _must_roll(self, seg: Segment, nbytes: int, count: int, index_entries: int) -> bool:
        """Would ``nbytes`` more (``count`` records, adding up to ``index_entries`` more index
        entries before the last batch) overflow the active segment's limits?"""
        cfg = self.log.config
        first_ts = seg.first_batch_timestamp
        return (seg.size + nbytes > cfg.segment_bytes
                or (first_ts is not None
                    and clock.now_ms() - max(first_ts, seg.opened_ms) > cfg.segment_ms)
                or len(seg.index) + index_entries >= cfg.segment_index_bytes // 8
                or seg.next_offset + count - seg.base > MAX_RELATIVE_OFFSET)
