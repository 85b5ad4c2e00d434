"""One partition: its ordered segments, appends under the partition lock, reads without locks.

Several processes may append to the same partition. Each append takes ``.lock`` (flock) in the
partition directory, brings this process's view up to date (did the active segment grow? did
another process roll it? did a dead writer leave a torn tail? — truncate it), assigns offsets,
writes, syncs and releases. Deleting a topic unlinks ``.lock`` while holding it, so a writer
that finds its lock file unlinked knows the partition is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import CorruptRecordError, OffsetOutOfRange, RivvenError, StorageError, UnknownTopic
from ..failpoint import failpoint
from ..format.records import EncodedBatch
from ..maintenance import compaction
from ..tiering.cold import ColdObjectError
from ..wal.stream import WalStream, encode_batch_record
from . import files, tier_manifest
from .config import TopicConfig
from .locks import flocked, open_lock_file
from .segment import BatchRef, Segment, TornTail
from .tier_manifest import ColdSegment

MAX_RELATIVE_OFFSET = (1 << 31) - 1
HOLD_S = 0.05  # longest the append pipeline keeps the partition flock under constant load
IDLE_HOLD_S = 0.02  # longest an idle partition keeps it while the engine appends elsewhere


def now_ms() -> int:
    return int(time.time() * 1000)


class _Entry:
    """One batch in the append pipeline: offsets assigned, WAL record written. It reaches the
    segment once its WAL bytes are durable and every batch before it is there."""

    __slots__ = ("batch", "buf", "base", "wal_end", "seq", "error", "done")

    def __init__(self, batch: EncodedBatch, buf: bytearray, base: int, wal_end: int,
                 seq: int) -> None:
        self.batch = batch
        self.buf = buf
        self.base = base
        self.wal_end = wal_end
        self.seq = seq
        self.error: BaseException | None = None
        self.done = False


class FlockHolds:
    """Partition flocks an engine keeps between appends while it appends elsewhere.

    Taking and dropping a partition's flock costs five syscalls per append (flock twice,
    the liveness and size checks, the next-segment probe); with threads appending to several
    partitions, each of them a GIL hand-off. So a partition whose pipeline goes idle keeps
    its flock while other appends of the engine are in flight, as a pipeline under load
    does: the last append of the engine to finish drops every kept flock, and a reaper
    thread drops those kept longer than IDLE_HOLD_S (so a thread blocked elsewhere, say on
    another process's flock, never makes another process wait longer than that).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0  # threads inside PartitionLog.append
        self.idle: dict[PartitionLog, float] = {}  # flock kept while idle: since (monotonic)
        self.reaper: threading.Thread | None = None

    def enter(self) -> None:
        with self.lock:
            self.active += 1

    def keep(self, log: PartitionLog) -> bool:
        """(``log``'s mutex held, its pipeline idle, its flock held.) Keep the flock?"""
        with self.lock:
            if self.active <= 1:  # only the caller appends: drop it now
                return False
            self.idle.pop(log, None)  # (re-inserted: the dict stays in time order)
            self.idle[log] = time.monotonic()
            if self.reaper is None:
                self.reaper = threading.Thread(target=self._reap, daemon=True,
                                               name="rivven-flock-holds")
                self.reaper.start()
            return True

    def leave(self) -> None:
        with self.lock:
            self.active -= 1
            if self.active or not self.idle:
                return
            logs = list(self.idle)
            self.idle.clear()
        self._drop(logs, time.monotonic())

    def _drop(self, logs: list[PartitionLog], since: float) -> None:
        busy = [log for log in logs if not log.release_idle()]
        if busy:  # (their mutex was taken: the reaper tries again)
            with self.lock:
                for log in busy:
                    self.idle.setdefault(log, since - IDLE_HOLD_S)  # due at once
                if self.reaper is None:
                    self.reaper = threading.Thread(target=self._reap, daemon=True,
                                                   name="rivven-flock-holds")
                    self.reaper.start()

    def _reap(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                due = [log for log, since in self.idle.items() if now - since >= IDLE_HOLD_S]
                for log in due:
                    del self.idle[log]
                if not self.idle and not due:
                    self.reaper = None
                    return
                wait = min(self.idle.values(), default=now) + IDLE_HOLD_S - now
            if due:
                self._drop(due, now)
            time.sleep(max(wait, 0.001))


def read_checkpoint(directory: str) -> dict | None:
    """The partition's recovery point, or None when there is none (or it is unreadable)."""
    try:
        with open(os.path.join(directory, files.CHECKPOINT), "rb") as f:
            point = json.loads(f.read())
        return {k: int(point[k]) for k in ("segment", "position", "recovery_point",
                                            "log_start_offset")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


class SegmentGone(UnknownTopic):
    """A segment file disappeared under a reader (retention, delete-records, topic delete)."""


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig,
                 writable: bool, wal: WalStream | None = None, topic_id: bytes = b"",
                 wal_sync: str = "always", cuts: list[dict] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 holds: FlockHolds | None = None, cold: Any = None, hot: Any = None) -> None:
        self.dir = directory
        self.holds = holds  # shared by the engine's partitions: see FlockHolds
        self._prefix = os.path.join(directory, "")  # + files.name(...): a file's path
        self.cold = cold  # engine.tier_cache.ColdCache: where reads of tiered offsets go
        self.hot = hot  # engine.hot.HotCache: recent batches in memory, or None
        self.tier: list[ColdSegment] = []  # the tier manifest (offsets in the cold store)
        self._tier_bases: list[int] = []
        self.tier_error: Exception | None = None
        self._tier_stamp: tuple[int, int, int] | None = None
        self.progress = progress  # long scans of a segment report (what, total, done) bytes
        self.topic = topic
        self.partition = partition
        self.config = config
        self.writable = writable
        self.mutex = threading.RLock()
        self.lock_fd = -1
        self.segments: dict[int, Segment] = {}
        self.bases: list[int] = []
        self.wal = wal
        self.cuts = cuts if cuts is not None else []  # shared with the engine (repairs())
        self.topic_id = topic_id
        self.wal_sync = wal_sync
        self.dirty = False
        self._cond = threading.Condition(self.mutex)  # an entry reached the segment (or failed)
        self._pending: deque[_Entry] = deque()  # logged, not yet in the segment, offset order
        self._active: deque[None] = deque()  # one item per thread inside append()
        self._waiters = 0  # threads waiting on _cond
        self._flock_held = False
        self._flock_since = 0.0
        self._assigned_end = 0
        self._seq = 0
        self._done_seq = 0
        self._broken = False
        self._broken_error: BaseException | None = None
        self._closed = False
        self.log_start = 0  # persisted in .checkpoint; may lie inside the first segment
        self._ckpt_stamp: tuple[int, int, int] | None = None
        if writable:
            try:
                self.lock_fd = open_lock_file(os.path.join(directory, files.LOCK_FILE))
            except FileNotFoundError:
                raise UnknownTopic(f"partition {partition} of topic {topic!r} is gone") from None
        if writable:
            with flocked(self.lock_fd):  # a writer's first look repairs what it finds
                self._check_alive()
                for f in os.listdir(directory):  # debris of a checkpoint cut short by a crash
                    if f.startswith(files.CHECKPOINT + ".tmp."):
                        os.unlink(os.path.join(directory, f))
                compaction.roll_forward(directory)  # finish (or discard) an interrupted swap
                self._relist()
                self._drop_orphan_indexes()
                self.active = self._open(self.bases[-1])
                self.active.load(repair=True, checkpoint=read_checkpoint(directory))
                self._read_log_start()
                self._delete_below(self.start_offset())  # a deletion cut short by a crash
        else:
            self._relist()
            self.active = self._open(self.bases[-1])
            self.active.load(repair=False)
            self._read_log_start()

    def stop_appends(self) -> None:
        """Refuse appends from now on; those already logged still finish (Engine.close)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()  # appends waiting in _log give up

    def close(self) -> None:
        """Finish the groups in flight, fail queued appends, release every file."""
        with self._cond:
            self._closed = True
            deadline = time.monotonic() + 30
            while self._pending and time.monotonic() < deadline:
                self._wait(0.1)
            for e in self._pending:  # their WAL fsync never came back: fail them, not hang
                e.error = StorageError(f"{self.topic}-{self.partition} was closed while this "
                                       "append waited; retry it")
                e.done = True
            self._pending.clear()
            self._cond.notify_all()
            self._flock_held = False  # closing the fd drops it
            if self.hot is not None:
                self.hot.clear(self)
            for seg in self.segments.values():
                seg.close()
            self.segments.clear()
            if self.lock_fd >= 0:
                os.close(self.lock_fd)
                self.lock_fd = -1

    # ---------------------------------------------------------------- segments
    def _relist(self) -> None:
        try:
            bases = files.segment_bases(self.dir)
        except FileNotFoundError:
            raise UnknownTopic(f"partition {self.partition} of topic {self.topic!r} is gone") from None
        if not bases:
            if self.writable:
                Segment(self.dir, 0, True, create=True).close()
            bases = [0]
        for b in list(self.segments):
            if b not in bases:
                self.segments.pop(b)  # closed when no reader holds it any more
        self.bases = bases

    def _open(self, base: int) -> Segment:
        seg = self.segments.get(base)
        if seg is None:
            try:
                seg = Segment(self.dir, base, self.writable)
            except FileNotFoundError:
                raise SegmentGone(
                    f"segment {base} of {self.topic}-{self.partition} vanished (topic deleted?)"
                ) from None
            seg.index_interval = self.config.index_interval_bytes
            seg.cuts = self.cuts
            seg.progress = self.progress
            self.segments[base] = seg
        return seg

    def _sealed(self, base: int) -> Segment:
        """A sealed segment: its size is its file size; loaded (tail scanned) on demand."""
        seg = self._open(base)
        if not seg.loaded and seg is not self.active:
            i = self.bases.index(base)
            seg.size = seg.file_size()
            seg.next_offset = self.bases[i + 1] if i + 1 < len(self.bases) else seg.next_offset
        return seg

    def _refresh(self, repair: bool) -> None:
        """Bring the view up to date with what other processes wrote (caller holds mutex)."""
        act = self.active
        if repair and act.needs_repair:
            act.load(repair=True, checkpoint=read_checkpoint(self.dir))
        if act.file_size() != act.size:
            if self.hot is not None and act.file_size() < act.size:
                self.hot.clear(self)  # cut by a repair: cached batches may be gone
            act.catch_up(repair)
        # (access, not exists: no exception raised and caught on the common miss)
        while act.next_offset > act.base and os.access(
                f"{self._prefix}{act.next_offset:020d}{files.LOG}", os.F_OK):
            self._relist()
            act = self._open(act.next_offset)
            act.load(repair=repair, checkpoint=read_checkpoint(self.dir) if repair else None)
            self.active = act

    def _drop_orphan_indexes(self) -> None:
        """(Lock held.) Index files whose .log is gone: a deletion cut short by a crash."""
        bases = set(self.bases)
        for f in os.listdir(self.dir):
            parsed = files.parse(f)
            if parsed and parsed[1] in (files.INDEX, files.TIMEINDEX) and parsed[0] not in bases:
                os.unlink(os.path.join(self.dir, f))

    def _read_tier(self) -> None:
        """Pick up the tier manifest when it changed (one stat when it did not)."""
        st = tier_manifest.stamp(self.dir)
        if st == self._tier_stamp:
            return
        try:
            self.tier = tier_manifest.load(self.dir)
            self._tier_bases = [e.base_offset for e in self.tier]
            self.tier_error = None
        except RivvenError as e:  # raised to whoever needs the cold offsets
            self.tier = []
            self._tier_bases = []
            self.tier_error = e
        if self._tier_stamp is not None or st is not None:
            self._relist()  # segments came back (restore) or went (tiering)
        self._tier_stamp = st

    def _read_log_start(self) -> None:
        """Pick up a log start offset persisted by any process (one stat when unchanged),
        and the tier manifest."""
        self._read_tier()
        try:
            st = os.stat(os.path.join(self.dir, files.CHECKPOINT))
        except FileNotFoundError:
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._ckpt_stamp:
            return
        self._ckpt_stamp = stamp
        point = read_checkpoint(self.dir)
        if point is not None and point["log_start_offset"] > self.log_start:
            self.log_start = point["log_start_offset"]
            if len(self.bases) > 1 and self.bases[1] <= self.log_start:
                self._relist()  # whole segments below it are (being) deleted
        self._drop_replaced()

    def _drop_replaced(self) -> None:
        """Forget cached sealed segments whose file was replaced or deleted (compaction)."""
        stale = False
        for base, seg in list(self.segments.items()):
            if seg is self.active:
                continue
            try:
                same = os.stat(seg.path).st_ino == os.fstat(seg.fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # (closed when no reader holds it any more)
                self.segments.pop(base)
                stale = True
        if stale:
            self._relist()

    def _check_alive(self) -> None:
        if os.fstat(self.lock_fd).st_nlink == 0:
            raise UnknownTopic(f"topic {self.topic!r} was deleted")

    # ---------------------------------------------------------------- writing
    def append(self, batch: EncodedBatch) -> int:
        """Assign offsets to ``batch`` and store it durably; returns its base offset.

        Group commit, pipelined. Under the mutex the calling thread assigns the offsets and
        writes the WAL record itself (no hand-off to a leader); then, without the mutex, it
        waits in ``WalStream.sync``, where one fdatasync serves every thread of every
        partition waiting meanwhile. Whichever thread comes back first writes every batch
        whose WAL bytes are now durable to the segment, in offset order (``_drain``), so the
        others usually find their batch written when they wake up.

        The partition flock is taken by the first append and kept while appends are in
        flight (at most about HOLD_S under constant load, so other processes get their
        turn); the in-memory log end is authoritative meanwhile. With ``holds``, an idle
        pipeline keeps it too while the engine appends to other partitions (FlockHolds).
        """
        holds = self.holds
        if holds is None:
            return self._append(batch)
        holds.enter()
        try:
            return self._append(batch)
        finally:
            holds.leave()

    def _append(self, batch: EncodedBatch) -> int:
        cond = self._cond
        with cond:
            if self._closed:
                raise StorageError(f"{self.topic}-{self.partition} was closed; open it again")
            self._active.append(None)
            try:
                entry = self._log(batch)
                if self.wal is None or self.wal_sync != "always":
                    self._drain()  # no WAL fsync to wait for
            except BaseException:
                self._active.pop()
                self._maybe_release()
                raise
        error: BaseException | None = None
        try:
            if not entry.done:
                self.wal.sync(entry.wal_end)  # only now may the batch become visible
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
                        self._wait()
        self._active.pop()  # (deque ops are atomic: no mutex needed unless we were last)
        if not self._active and self._flock_held:
            with cond:
                self._maybe_release()
        if error is not None and not isinstance(error, Exception):
            raise error
        if entry.error is not None:
            raise entry.error
        return entry.base

    def _log(self, batch: EncodedBatch) -> _Entry:
        """(mutex held.) Take the flock if needed, assign offsets, write the WAL record."""
        while self._flock_held and (self._broken
                                    or time.monotonic() - self._flock_since > HOLD_S):
            if self._pending:  # let the pipeline drain, then start afresh
                self._wait()
                if self._closed:
                    raise StorageError(f"{self.topic}-{self.partition} was closed; open it "
                                       "again")
                continue
            self._release_flock()
        # dirty before the WAL write: a checkpoint that rotates the WAL after our record then
        # sees this partition and fsyncs it before deleting the file holding the record
        self.dirty = True
        if not self._flock_held:
            try:
                fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
                self._flock_held = True
                self._flock_since = time.monotonic()
                self._broken = False
                self._check_alive()
                self._refresh(repair=True)
            except BaseException as e:
                self._release_flock()
                if isinstance(e, Exception) and not isinstance(e, RivvenError):
                    raise StorageError(f"{self.topic}-{self.partition}: append failed: {e}"
                                       ) from e
                raise
            self._assigned_end = self.active.next_offset
        base = self._assigned_end
        buf = batch.assign(base)
        wal_end = 0
        if self.wal is not None:  # a failed write raises: no offsets used, nothing logged
            wal_end = self.wal.append(encode_batch_record(self.topic_id, self.partition,
                                                          self.topic, buf))
        self._assigned_end = base + batch.last_offset_delta + 1
        self._seq += 1
        entry = _Entry(batch, buf, base, wal_end, self._seq)
        self._pending.append(entry)
        if self.wal is not None:
            self.wal.listeners.add(self)
        return entry

    def after_wal_sync(self) -> None:
        """Called by the thread that just finished a WAL fsync, before it wakes the threads
        it covered: write their batches now, so they wake up to find them written. Skipped
        when the mutex is busy (the owners then drain themselves)."""
        if self.mutex.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self.mutex.release()

    def _drain(self) -> None:
        """(mutex held.) Write the pending batches whose WAL bytes are durable, in offset
        order, and settle failed ones: a batch after a failed one fails too (its offsets
        would follow a hole), and the next append starts again from the segment's real end."""
        pending = self._pending
        wal = self.wal
        always = self.wal_sync == "always"
        settled = False
        if len(pending) > 1 and not self._broken:
            settled = self._drain_group()
        while pending:
            e = pending[0]
            if self._broken:
                if e.error is None:
                    e.error = self._broken_error
            elif e.error is None:
                if wal is not None and always and not wal.durable(e.wal_end):
                    break
                b = e.batch
                try:
                    self._write(e.buf, e.base, b.count, b.last_offset_delta, b.max_timestamp,
                                sync=wal is None and always)
                except Exception as err:  # noqa: BLE001
                    e.error = err
            if e.error is not None and not self._broken:
                self._broken = True
                self._broken_error = e.error
            pending.popleft()
            e.done = True
            self._done_seq = e.seq
            settled = True
        if not pending and self.wal is not None:
            self.wal.listeners.discard(self)
        if settled and self._waiters:
            self._cond.notify_all()

    def _drain_group(self) -> bool:
        """(mutex held.) Write the leading durable pending batches with one pwritev when they
        all fit in the active segment (a group commit's batches: one syscall, not one each).
        Returns whether any batch was settled; anything it cannot do is left to _drain."""
        pending = self._pending
        wal = self.wal
        if wal is None:  # (no WAL: each batch is written and fsynced as it comes)
            return False
        check = self.wal_sync == "always"
        run: list[_Entry] = []
        nbytes = count = 0
        for e in pending:
            if e.error is not None or (check and not wal.durable(e.wal_end)) or len(run) >= 512:
                break  # (512: well below IOV_MAX)
            if run and e.base != run[-1].base + run[-1].batch.last_offset_delta + 1:
                break  # (never, offsets are assigned back to back: _write would refuse it)
            run.append(e)
            nbytes += len(e.buf)
            count += e.batch.last_offset_delta + 1
        if len(run) < 2:
            return False
        seg = self.active
        seg.index_interval = self.config.index_interval_bytes
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
            b = e.batch
            n = len(e.buf)
            seg.appended(pos, e.base, n, e.base + b.last_offset_delta + 1, b.max_timestamp)
            if self.hot is not None:
                self.hot.add(self, e.base, e.base + b.last_offset_delta + 1, pos, e.buf)
            pos += n
            pending.popleft()
            e.done = True
            self._done_seq = e.seq
        return True

    def _wait(self, timeout: float | None = None) -> None:
        self._waiters += 1
        try:
            self._cond.wait(timeout)
        finally:
            self._waiters -= 1

    def _maybe_release(self) -> None:
        """(mutex held.) Drop the flock once nobody appends and nothing is in flight."""
        if self._flock_held and not self._active and not self._pending:
            if self.holds is not None and not self._broken and self.holds.keep(self):
                return
            self._release_flock()

    def release_idle(self) -> bool:
        """Drop a flock kept by FlockHolds unless an append took it up again; False when
        the mutex was busy (never waited for: its holder may wait for another process)."""
        if not self._flock_held:
            return True
        if not self.mutex.acquire(blocking=False):
            return False
        try:
            if not self._active and not self._pending:
                self._release_flock()
        finally:
            self.mutex.release()
        return True

    def _release_flock(self) -> None:
        """(mutex held, nothing in flight.) Drop the pipeline's flock."""
        if self._flock_held:
            self._flock_held = False
            if self.lock_fd >= 0:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The mutex plus the partition flock, unless the append pipeline already holds it."""
        with self.mutex:
            if self.lock_fd < 0:  # closed: the engine forgot it (topic deleted or replaced)
                raise UnknownTopic(f"partition {self.partition} of topic {self.topic!r} was "
                                   "closed (deleted?)")
            if self._flock_held:
                yield
            else:
                with flocked(self.lock_fd):
                    yield

    def _quiesce(self) -> None:
        """Wait until every batch logged so far has reached the segment (or failed)."""
        with self._cond:
            target = self._seq
            while self._done_seq < target:
                self._wait()

    def _write(self, buf: bytes | bytearray, base: int, count: int, last_delta: int,
               max_ts: int, sync: bool) -> None:
        """Write one batch (offsets assigned) at the end of the log (caller holds the lock)."""
        seg = self._maybe_roll(len(buf), count)
        if base != seg.next_offset:
            raise StorageError(f"{self.topic}-{self.partition}: batch at offset {base} does not "
                               f"follow the log end {seg.next_offset}")
        pos = seg.size
        try:
            seg.write(buf, pos)
            if sync:
                seg.sync()
        except StorageError:
            self._undo(seg, pos)
            raise
        seg.appended(pos, base, len(buf), base + last_delta + 1, max_ts)
        if self.hot is not None:
            self.hot.add(self, base, base + last_delta + 1, pos, buf)

    def replay(self, batches: list[tuple[int, int, int, int, bytes]]) -> tuple[int, int, int]:
        """Append WAL batches ``(base, count, last_delta, max_ts, bytes)`` that continue the log,
        in offset order; ones already in the log are skipped, ones after a hole cannot be
        placed. Returns (applied, skipped, dropped)."""
        applied = skipped = dropped = 0
        self._quiesce()
        with self._exclusive():
            self._check_alive()
            self._refresh(repair=True)
            for base, count, last_delta, max_ts, buf in batches:
                end = self.active.next_offset
                if base < end:
                    skipped += 1
                    continue
                if base > end or not buf:  # (no bytes: the log shrank since the plan)
                    dropped = len(batches) - applied - skipped  # a hole: the rest can't be placed
                    break
                self._write(buf, base, count, last_delta, max_ts, sync=False)
                applied += 1
            self.dirty = self.dirty or applied > 0
        return applied, skipped, dropped

    def checkpoint(self) -> dict:
        """fsync the active segment and its indexes, then record the recovery point.

        Batches already logged reach the segment first: their WAL records may sit in a file
        the caller is about to delete.
        """
        self.dirty = False  # an append from here on marks it again and is checkpointed later
        try:
            self._quiesce()
            return self._checkpoint()
        except BaseException:
            self.dirty = True
            raise

    def _checkpoint(self) -> dict:
        with self._exclusive():
            self._check_alive()
            self._refresh(repair=True)
            return self._checkpoint_locked()

    def _checkpoint_locked(self) -> dict:
        act = self.active
        act.sync()
        act.index.sync()
        act.timeindex.sync()
        # never write back a start another process moved on: read the file itself, its
        # (inode, mtime, size) can repeat (inode reuse, coarse timestamps)
        self._ckpt_stamp = None
        self._read_log_start()
        point = {"segment": act.base, "position": act.size,
                 "recovery_point": act.next_offset, "log_start_offset": self.start_offset()}
        files.write_atomic(os.path.join(self.dir, files.CHECKPOINT), json.dumps(point).encode())
        self._ckpt_stamp = None
        return point

    def _undo(self, seg: Segment, pos: int) -> None:
        # Not acknowledged: cut what may have reached the file so no reader ever sees it.
        try:
            os.ftruncate(seg.fd, pos)
        except OSError:
            pass  # the next writer's refresh truncates the torn tail instead

    def _maybe_roll(self, nbytes: int, count: int) -> Segment:
        seg = self.active
        seg.index_interval = self.config.index_interval_bytes
        if seg.size == 0:
            return seg
        if self._must_roll(seg, nbytes, count, 0):
            return self.roll()
        return seg

    def _must_roll(self, seg: Segment, nbytes: int, count: int, index_entries: int) -> bool:
        """Would ``nbytes`` more (``count`` records, adding up to ``index_entries`` more index
        entries before the last batch) overflow the active segment's limits?"""
        cfg = self.config
        first_ts = seg.first_batch_timestamp
        return (seg.size + nbytes > cfg.segment_bytes
                or (first_ts is not None
                    and now_ms() - max(first_ts, seg.opened_ms) > cfg.segment_ms)
                or len(seg.index) + index_entries >= cfg.segment_index_bytes // 8
                or seg.next_offset + count - seg.base > MAX_RELATIVE_OFFSET)

    def roll(self) -> Segment:
        """Seal the active segment (fsync log and indexes) and start a new one at the end."""
        old = self.active
        old.sync()
        old.index.sync()
        old.timeindex.sync()
        if self.hot is not None:
            self.hot.clear(self)  # the hot run covers the active segment only
        new = Segment(self.dir, old.next_offset, True, create=True)
        new.index_interval = self.config.index_interval_bytes
        new.cuts = self.cuts
        new.next_offset = old.next_offset
        new.loaded = True
        files.fsync_dir(self.dir)
        self.segments[new.base] = new
        self.bases.append(new.base)
        self.active = new
        return new

    # ---------------------------------------------------------------- reading
    def refresh(self) -> None:
        with self.mutex:
            self._refresh(repair=False)

    def start_offset(self) -> int:
        first = self.bases[0]
        if self.tier and self.tier[0].base_offset < first:
            first = self.tier[0].base_offset
        return min(max(self.log_start, first), self.active.next_offset)

    def local_start(self) -> int:
        """The first offset held by a local segment (or the log start, if later)."""
        return min(max(self.log_start, self.bases[0]), self.active.next_offset)

    def end_offset(self) -> int:
        return self.active.next_offset

    def offsets(self) -> tuple[int, int]:
        with self.mutex:
            self._refresh(repair=False)
            self._read_log_start()
            return self.start_offset(), self.active.next_offset

    def batches(self, offset: int, max_bytes: int = 1 << 20) -> Iterator[BatchRef]:
        """CRC-checked batches holding ``offset`` and after, about ``max_bytes`` in all: from
        the hot cache, the local segments, or (below them) cold segments via the cache."""
        with self.mutex:
            self._refresh(repair=False)
            self._read_log_start()
            bases = list(self.bases)
            end = self.active.next_offset
            active = self.active
            start = self.start_offset()
            tier, tier_bases = self.tier, self._tier_bases
        if offset < start or offset > end:
            raise self._out_of_range(offset, start, end)
        sent = 0
        if self.hot is not None and active.base <= offset < end:
            for ref in self.hot.get(self, offset, end, max_bytes):
                yield ref
                sent += ref.header.size
                offset = ref.header.next_offset
        retries = 0
        while offset < end and sent < max_bytes:
            i = bisect_right(bases, offset) - 1
            try:
                if i < 0:  # below the local segments: tiered to the cold store
                    entry = _cold_entry(tier, tier_bases, offset)
                    if entry is None:
                        if self.tier_error is not None:
                            raise self.tier_error
                        raise SegmentGone(f"offset {offset} of {self.topic}-{self.partition} "
                                          "is neither local nor in the tier manifest")
                    try:
                        seg = self.cold_segment(entry)
                    except ColdObjectError:
                        # restored or deleted by retention since we read the manifest? then
                        # the next look finds the offsets elsewhere; else the object is gone
                        start, bases, tier, tier_bases = self._reload_view()
                        if any(e.object == entry.object for e in tier) or retries > 10:
                            raise
                        retries += 1
                        if offset < start:
                            raise self._out_of_range(offset, start, end) from None
                        continue
                    nxt = entry.next_offset
                else:
                    seg = active if bases[i] == active.base else self._sealed(bases[i])
                    nxt = bases[i + 1] if i + 1 < len(bases) else end
            except SegmentGone:
                # deleted by retention, delete-records, a compaction swap or tiering
                start, bases, tier, tier_bases = self._reload_view()
                if offset < start:
                    raise self._out_of_range(offset, start, end) from None
                retries += 1
                if retries > 10:
                    raise
                continue
            try:
                for ref in seg.iter_batches(seg.position_for(offset), seg.size):
                    if ref.header.next_offset <= offset:
                        continue
                    yield ref
                    sent += ref.header.size
                    offset = ref.header.next_offset
                    if sent >= max_bytes:
                        return
            except TornTail as t:
                if seg is active:
                    return  # a batch still being written by another process
                raise CorruptRecordError(
                    f"sealed segment {seg.path} ends with an incomplete batch at position "
                    f"{t.position}; run 'rivven segment recover'", seg.path, t.position) from None
            if seg is active:
                return
            offset = max(offset, nxt)

    def _reload_view(self) -> tuple[int, list[int], list[ColdSegment], list[int]]:
        with self.mutex:
            self._ckpt_stamp = None
            self._tier_stamp = None
            self._read_log_start()
            self._drop_replaced()
            self._relist()
            return self.start_offset(), list(self.bases), self.tier, self._tier_bases

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
            self._refresh(repair=False)
            self._read_log_start()
            if self.tier_error is not None:
                raise self.tier_error
            return [e for e in self.tier if e.base_offset < self.bases[0]]

    def _out_of_range(self, offset: int, start: int, end: int) -> OffsetOutOfRange:
        return OffsetOutOfRange(
            f"offset {offset} is out of range for {self.topic}-{self.partition}: valid offsets "
            f"are {start}..{end} (end = next offset to be written)", start, end)

    # ---------------------------------------------------------------- log start
    def advance_start(self, offset: int) -> tuple[int, int, list[dict]]:
        """Move the log start offset forward to ``offset`` (never back, at most the end),
        persist it, then delete the whole segments below it. Returns (prior, new, deleted)."""
        self._quiesce()
        with self._exclusive():
            self._check_alive()
            self._refresh(repair=True)
            self._ckpt_stamp = None
            self._read_log_start()
            prior = self.start_offset()
            if offset > prior:
                self.log_start = min(offset, self.active.next_offset)
                self._checkpoint_locked()
            return prior, self.start_offset(), self._delete_below(self.start_offset())

    def _delete_below(self, start: int) -> list[dict]:
        """(Lock held.) Delete sealed segments whose offsets all lie below ``start``."""
        n = 0
        while n < len(self.bases) - 1 and self.bases[n + 1] <= start:
            n += 1
        return self._unlink_first(n)

    def _unlink_first(self, n: int) -> list[dict]:
        """(Lock held.) Delete the ``n`` oldest segments (never the active one)."""
        gone = []
        for i, base in enumerate(self.bases[:min(n, len(self.bases) - 1)]):
            self.segments.pop(base, None)  # closed when no reader holds it any more
            size = 0
            for suffix in (files.LOG, files.INDEX, files.TIMEINDEX):  # .log first: it defines
                try:                                                  # the segment
                    p = files.path(self.dir, base, suffix)
                    if suffix == files.LOG:
                        size = os.path.getsize(p)
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            gone.append({"base_offset": base, "next_offset": self.bases[i + 1], "bytes": size})
            failpoint("segment-deleted")
        if gone:
            files.fsync_dir(self.dir)
            self.bases = self.bases[len(gone):]
        return gone

    def drop_tiered(self, entries: list[ColdSegment], keep_from: int) -> list[dict]:
        """Delete the oldest local segments that the tier manifest ``entries`` hold (same
        offsets and size), up to (not including) the one at ``keep_from``."""
        by_base = {e.base_offset: e for e in entries}
        with self._exclusive():
            self._check_alive()
            self._refresh(repair=True)
            self._read_tier()  # the start offset must see the entries before the files go
            n = 0
            while n < len(self.bases) - 1 and self.bases[n] < keep_from:
                e = by_base.get(self.bases[n])
                p = files.path(self.dir, self.bases[n], files.LOG)
                if (e is None or e.next_offset != self.bases[n + 1]
                        or os.path.getsize(p) != e.bytes):
                    break
                n += 1
            return self._unlink_first(n)

    def all_segments(self) -> list[Segment]:
        with self.mutex:
            self._refresh(repair=False)
            self._read_log_start()  # (and the tier manifest: start_offset depends on both)
            return [self.active if b == self.active.base else self._sealed(b) for b in self.bases]

    def segment_max_timestamp(self, seg: Segment) -> int:
        if not seg.loaded:
            with self.mutex:
                seg.load(repair=False)
        return seg.max_timestamp


def _cold_entry(tier: list[ColdSegment], bases: list[int], offset: int) -> ColdSegment | None:
    i = bisect_right(bases, offset) - 1
    if i >= 0 and offset < tier[i].next_offset:
        return tier[i]
    return None
