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
from collections.abc import Iterator

from . import compaction, files
from .config import TopicConfig
from .errors import CorruptRecordError, OffsetOutOfRange, RivvenError, StorageError, UnknownTopic
from .locks import flocked, open_lock_file
from .records import EncodedBatch
from .segment import BatchRef, Segment, TornTail
from .wal import WalStream, encode_batch_record

MAX_RELATIVE_OFFSET = (1 << 31) - 1
GATHER_S = 0.002  # longest a group-commit leader waits for the batches of a typical group
GATHER_IDLE_S = 0.0005  # ... and it stops waiting once no batch came for this long
HOLD_S = 0.05  # longest the append pipeline keeps the partition flock under constant load


def now_ms() -> int:
    return int(time.time() * 1000)


class _Request:
    __slots__ = ("batch", "base", "error", "done", "group")

    def __init__(self, batch: EncodedBatch) -> None:
        self.batch = batch
        self.base: int | None = None
        self.error: BaseException | None = None
        self.done = False
        self.group: _Group | None = None


class _Group:
    """Batches logged together: one WAL fsync, then their segment writes."""

    __slots__ = ("reqs", "todo", "wal_end", "seq")

    def __init__(self, reqs: list[_Request]) -> None:
        self.reqs = reqs
        self.todo: list[tuple[_Request, bytearray, int]] = []
        self.wal_end = 0
        self.seq = 0


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
                 wal_sync: str = "always", cuts: list[dict] | None = None) -> None:
        self.dir = directory
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
        self._queue: list[_Request] = []
        self._qlock = threading.Lock()
        self._qcond = threading.Condition(self._qlock)
        self._last_group = 1
        self._leading = False
        self._inflight: deque[_Group] = deque()
        self._flock_held = False
        self._flock_since = 0.0
        self._assigned_end = 0
        self._seq = 0
        self._done_seq = 0
        self._broken = False
        self._broken_error: BaseException | None = None
        self._logging = False
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

    def close(self) -> None:
        """Finish the groups in flight, fail queued appends, release every file."""
        with self._qcond:
            self._closed = True
            deadline = time.monotonic() + 30
            while (self._leading or self._inflight) and time.monotonic() < deadline:
                self._qcond.wait(0.1)
            for r in self._queue:
                r.error = StorageError(f"{self.topic}-{self.partition} was closed while this "
                                       "append waited; retry it")
                r.done = True
            self._queue = []
            self._qcond.notify_all()
        with self.mutex:
            self._flock_held = False  # closing the fd drops it
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
            act.catch_up(repair)
        while act.next_offset > act.base and os.path.exists(
                files.path(self.dir, act.next_offset, files.LOG)):
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

    def _read_log_start(self) -> None:
        """Pick up a log start offset persisted by any process (one stat when unchanged)."""
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

        Group commit, pipelined. Threads appending to this partition queue up. One leader at a
        time takes the queue as a group: it assigns offsets and writes the group's WAL records,
        then hands leadership on and, outside it, waits for the WAL fsync and writes the
        segment bytes — groups reach the segment in offset order, and only once durable. So
        the next group is being encoded and logged while this one's fsync runs.

        The partition flock is taken by the first group and kept while groups are in flight
        (at most about HOLD_S under constant load, so other processes get their turn); the
        in-memory log end is authoritative meanwhile. A leader first waits (at most GATHER_S)
        for as many batches as its previous group had: threads released by one fsync come back
        one at a time under the GIL, and without the wait groups would alternate 1, n-1.
        """
        req = _Request(batch)
        cond = self._qcond
        group = None
        with cond:
            if self._closed:
                raise StorageError(f"{self.topic}-{self.partition} was closed; open it again")
            self._queue.append(req)
            cond.notify_all()
            while not req.done and req.group is None:
                if self._leading:  # a follower: a leader will take (or took) our batch
                    cond.wait()
                    continue
                group = self._lead(req)
            if req.group is not None and req.group is not group:
                while not req.done:  # another thread leads our group through to the end
                    cond.wait()
        if group is not None:
            self._finish_group(group)
        if req.error is not None:
            raise req.error
        return req.base

    def _lead(self, req: _Request) -> _Group | None:
        """(qcond held.) Take the queue as one group and log it; returns the group, or None
        when it failed (its requests then carry the error)."""
        cond = self._qcond
        self._leading = True
        reqs: list[_Request] = []
        group = None
        try:
            deadline = time.monotonic() + GATHER_S
            # with a group in flight, go now: this group's logging overlaps its fsync
            while len(self._queue) < self._last_group and not self._inflight:
                left = min(deadline - time.monotonic(), GATHER_IDLE_S)
                seen = len(self._queue)
                if left <= 0:
                    break
                cond.wait(left)
                if len(self._queue) == seen:
                    break  # nobody came for a while: do not wait out the whole window
            if self._flock_held and (self._broken
                                     or time.monotonic() - self._flock_since > HOLD_S):
                while self._inflight:  # let the pipeline drain, then start afresh
                    cond.wait()
                self._release_flock()
            reqs, self._queue = self._queue, []
            self._last_group = len(reqs)
            self._logging = True  # checkpoints wait: these WAL records are not numbered yet
            cond.release()
            try:
                group = self._start_group(reqs)
            finally:
                cond.acquire()
                self._logging = False
                if group is not None:
                    self._seq += 1
                    group.seq = self._seq
                    self._inflight.append(group)
        except BaseException as e:
            for r in reqs:  # taken but never logged: their callers must not wait forever
                if not r.done and r.group is None:
                    r.error = r.error or (e if isinstance(e, Exception) else
                                          StorageError("append interrupted"))
                    r.done = True
            raise
        finally:
            if group is None and not self._inflight:
                self._release_flock()
            self._leading = False
            cond.notify_all()
        return group

    def _start_group(self, reqs: list[_Request]) -> _Group | None:
        """Take the flock if needed, assign offsets, write the WAL records (no fsync)."""
        # dirty before any WAL write: a checkpoint that rotates the WAL after our record then
        # sees this partition and fsyncs it before deleting the file holding the record
        self.dirty = True
        try:
            with self.mutex:
                if not self._flock_held:
                    fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
                    self._flock_held = True
                    self._flock_since = time.monotonic()
                    self._broken = False
                    try:
                        self._check_alive()
                        self._refresh(repair=True)
                    except BaseException:
                        self._release_flock()
                        raise
                    self._assigned_end = self.active.next_offset
                wal = self.wal
                base = self._assigned_end
                group = _Group(reqs)
                for r in reqs:
                    buf = r.batch.assign(base)
                    if wal is not None:
                        try:
                            group.wal_end = wal.append(encode_batch_record(
                                self.topic_id, self.partition, self.topic, buf))
                        except StorageError as e:
                            r.error = e
                            continue
                    group.todo.append((r, buf, base))
                    base += r.batch.last_offset_delta + 1
                self._assigned_end = base
                for r in reqs:
                    r.group = group
                return group
        except BaseException as e:  # every waiter must hear about it
            err = e if isinstance(e, StorageError | RivvenError) else StorageError(
                f"{self.topic}-{self.partition}: append failed: {e}")
            with self._qcond:
                for r in reqs:
                    if r.error is None:
                        r.error = err
                    r.done = True
                self._qcond.notify_all()
            if not isinstance(e, Exception):
                raise
            return None

    def _finish_group(self, group: _Group) -> None:
        """Wait for the group's WAL fsync, then write its batches in offset order."""
        wal = self.wal
        error: BaseException | None = None
        try:
            if wal is not None and group.todo and self.wal_sync == "always":
                wal.sync(group.wal_end)  # only now may the batches become visible
        except Exception as e:  # noqa: BLE001
            error = e
        cond = self._qcond
        with cond:
            while self._inflight[0] is not group:
                cond.wait()
            if self._broken and error is None:
                error = self._broken_error
        if error is None:
            try:
                with self.mutex:
                    for r, buf, b in group.todo:
                        self._write(buf, b, r.batch.count, r.batch.last_offset_delta,
                                    r.batch.max_timestamp,
                                    sync=wal is None and self.wal_sync == "always")
                        r.base = b
            except Exception as e:  # noqa: BLE001
                error = e
        with cond:
            try:
                if error is not None:
                    # later groups were numbered after this one: they must fail too, and the
                    # next leader starts again from the segment's real end
                    self._broken = True
                    self._broken_error = error
                    for r, _, _ in group.todo:
                        if r.base is None:
                            r.error = error
                for r in group.reqs:
                    r.done = True
                self._inflight.popleft()
                self._done_seq = group.seq
                if not self._inflight and not self._leading:
                    self._release_flock()
            finally:
                cond.notify_all()

    def _release_flock(self) -> None:
        """(qcond held, nothing in flight.) Drop the pipeline's flock."""
        if self._flock_held:
            with self.mutex:
                self._flock_held = False
                if self.lock_fd >= 0:
                    fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The mutex plus the partition flock, unless the append pipeline already holds it."""
        with self.mutex:
            if self._flock_held:
                yield
            else:
                with flocked(self.lock_fd):
                    yield

    def _quiesce(self) -> None:
        """Wait until every group logged so far (numbered, or being logged) has reached the
        segment."""
        with self._qcond:
            while self._logging:
                self._qcond.wait()
            target = self._seq
            while self._done_seq < target:
                self._qcond.wait()

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

        Groups already numbered reach the segment first: their WAL records may sit in a file
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
        self._read_log_start()  # never write back a start another process moved on
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
        cfg = self.config
        first_ts = seg.first_batch_timestamp
        if (seg.size + nbytes > cfg.segment_bytes
                or (first_ts is not None
                    and now_ms() - max(first_ts, seg.opened_ms) > cfg.segment_ms)
                or len(seg.index) >= cfg.segment_index_bytes // 8
                or seg.next_offset + count - seg.base > MAX_RELATIVE_OFFSET):
            return self.roll()
        return seg

    def roll(self) -> Segment:
        """Seal the active segment (fsync log and indexes) and start a new one at the end."""
        old = self.active
        old.sync()
        old.index.sync()
        old.timeindex.sync()
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
        return min(max(self.log_start, self.bases[0]), self.active.next_offset)

    def end_offset(self) -> int:
        return self.active.next_offset

    def offsets(self) -> tuple[int, int]:
        with self.mutex:
            self._refresh(repair=False)
            self._read_log_start()
            return self.start_offset(), self.active.next_offset

    def batches(self, offset: int, max_bytes: int = 1 << 20) -> Iterator[BatchRef]:
        """CRC-checked batches holding ``offset`` and after, about ``max_bytes`` in all."""
        with self.mutex:
            self._refresh(repair=False)
            self._read_log_start()
            bases = list(self.bases)
            end = self.active.next_offset
            active = self.active
            start = self.start_offset()
        if offset < start or offset > end:
            raise self._out_of_range(offset, start, end)
        i = bisect_right(bases, offset) - 1
        sent = 0
        retries = 0
        while i < len(bases) and offset < end and sent < max_bytes:
            try:
                seg = active if bases[i] == active.base else self._sealed(bases[i])
            except SegmentGone:
                with self.mutex:  # deleted by retention, delete-records or a compaction swap
                    self._ckpt_stamp = None
                    self._read_log_start()
                    self._relist()
                    start = self.start_offset()
                    bases = list(self.bases)
                if offset < start:
                    raise self._out_of_range(offset, start, end) from None
                retries += 1
                if retries > 10:
                    raise
                i = bisect_right(bases, offset) - 1
                continue
            limit = seg.size
            try:
                for ref in seg.iter_batches(seg.position_for(offset), limit):
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
            i += 1


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
        gone = []
        for i, base in enumerate(self.bases[:-1]):
            nxt = self.bases[i + 1]
            if nxt > start:
                break
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
            gone.append({"base_offset": base, "next_offset": nxt, "bytes": size})
        if gone:
            files.fsync_dir(self.dir)
            self.bases = self.bases[len(gone):]
        return gone

    def all_segments(self) -> list[Segment]:
        with self.mutex:
            self._refresh(repair=False)
            return [self.active if b == self.active.base else self._sealed(b) for b in self.bases]

    def segment_max_timestamp(self, seg: Segment) -> int:
        if not seg.loaded:
            with self.mutex:
                seg.load(repair=False)
        return seg.max_timestamp
