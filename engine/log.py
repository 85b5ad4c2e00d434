"""One partition: its ordered segments, appends under the partition lock, reads without locks.

Several processes may append to the same partition. Each append takes ``.lock`` (flock) in the
partition directory, brings this process's view up to date (did the active segment grow? did
another process roll it? did a dead writer leave a torn tail? — truncate it), assigns offsets,
writes, syncs and releases. Deleting a topic unlinks ``.lock`` while holding it, so a writer
that finds its lock file unlinked knows the partition is gone.
"""

from __future__ import annotations

import json
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Iterator

from . import files
from .config import TopicConfig
from .errors import CorruptRecordError, OffsetOutOfRange, StorageError, UnknownTopic
from .locks import flocked, open_lock_file
from .records import EncodedBatch
from .segment import BatchRef, Segment, TornTail
from .wal import WalStream, encode_batch_record

MAX_RELATIVE_OFFSET = (1 << 31) - 1


def now_ms() -> int:
    return int(time.time() * 1000)


class _Request:
    __slots__ = ("batch", "base", "error", "done")

    def __init__(self, batch: EncodedBatch) -> None:
        self.batch = batch
        self.base: int | None = None
        self.error: BaseException | None = None
        self.done = False


def read_checkpoint(directory: str) -> dict | None:
    """The partition's recovery point, or None when there is none (or it is unreadable)."""
    try:
        with open(os.path.join(directory, files.CHECKPOINT), "rb") as f:
            point = json.loads(f.read())
        return {k: int(point[k]) for k in ("segment", "position", "recovery_point",
                                            "log_start_offset")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig,
                 writable: bool, wal: WalStream | None = None, topic_id: bytes = b"",
                 wal_sync: str = "always") -> None:
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
        self.topic_id = topic_id
        self.wal_sync = wal_sync
        self.dirty = False
        self._queue: list[_Request] = []
        self._qlock = threading.Lock()
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
                self._relist()
                self.active = self._open(self.bases[-1])
                self.active.load(repair=True, checkpoint=read_checkpoint(directory))
        else:
            self._relist()
            self.active = self._open(self.bases[-1])
            self.active.load(repair=False)

    def close(self) -> None:
        with self.mutex:
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
                Segment(self.dir, 0, True).close()
            bases = [0]
        for b in list(self.segments):
            if b not in bases:
                self.segments.pop(b).close()
        self.bases = bases

    def _open(self, base: int) -> Segment:
        seg = self.segments.get(base)
        if seg is None:
            try:
                seg = Segment(self.dir, base, self.writable)
            except FileNotFoundError:
                raise UnknownTopic(
                    f"segment {base} of {self.topic}-{self.partition} vanished (topic deleted?)"
                ) from None
            seg.index_interval = self.config.index_interval_bytes
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

    def _check_alive(self) -> None:
        if os.fstat(self.lock_fd).st_nlink == 0:
            raise UnknownTopic(f"topic {self.topic!r} was deleted")

    # ---------------------------------------------------------------- writing
    def append(self, batch: EncodedBatch) -> int:
        """Assign offsets to ``batch`` and store it durably; returns its base offset.

        Threads appending to this partition queue up; whoever holds the mutex takes the whole
        queue, writes every batch to the WAL, syncs once, then writes the segment (group commit).
        """
        req = _Request(batch)
        with self._qlock:
            self._queue.append(req)
        with self.mutex:
            if not req.done:
                with self._qlock:
                    reqs, self._queue = self._queue, []
                self._append_all(reqs)
        if req.error is not None:
            raise req.error
        return req.base

    def _append_all(self, reqs: list[_Request]) -> None:
        # dirty before any WAL write: a checkpoint that rotates the WAL after our record then
        # sees this partition and fsyncs it before deleting the file holding the record
        self.dirty = True
        try:
            with flocked(self.lock_fd):
                self._check_alive()
                self._refresh(repair=True)
                wal = self.wal
                base = self.active.next_offset
                todo = []
                end = 0
                for r in reqs:
                    buf = r.batch.assign(base)
                    if wal is not None:
                        try:
                            end = wal.append(encode_batch_record(self.topic_id, self.partition,
                                                                 self.topic, buf))
                        except StorageError as e:
                            r.error = e
                            continue
                    todo.append((r, buf, base))
                    base += r.batch.last_offset_delta + 1
                if wal is not None and todo and self.wal_sync == "always":
                    wal.sync(end)  # only now may the batches become visible
                for r, buf, b in todo:
                    self._write(buf, b, r.batch.count, r.batch.last_offset_delta,
                                r.batch.max_timestamp, sync=wal is None and self.wal_sync == "always")
                    r.base = b
        except Exception as e:  # noqa: BLE001 - every waiter must hear about it
            for r in reqs:
                if r.base is None and r.error is None:
                    r.error = e
        finally:
            for r in reqs:
                r.done = True

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
        with self.mutex, flocked(self.lock_fd):
            self._check_alive()
            self._refresh(repair=True)
            for base, count, last_delta, max_ts, buf in batches:
                end = self.active.next_offset
                if base < end:
                    skipped += 1
                    continue
                if base > end:
                    dropped = len(batches) - applied - skipped  # a hole: the rest can't be placed
                    break
                self._write(buf, base, count, last_delta, max_ts, sync=False)
                applied += 1
            self.dirty = self.dirty or applied > 0
        return applied, skipped, dropped

    def checkpoint(self) -> dict:
        """fsync the active segment and its indexes, then record the recovery point."""
        with self.mutex, flocked(self.lock_fd):
            self._check_alive()
            self._refresh(repair=True)
            act = self.active
            act.sync()
            act.index.sync()
            act.timeindex.sync()
            point = {"segment": act.base, "position": act.size,
                     "recovery_point": act.next_offset, "log_start_offset": self.bases[0]}
            files.write_atomic(os.path.join(self.dir, files.CHECKPOINT),
                               json.dumps(point).encode())
            self.dirty = False
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
        new = Segment(self.dir, old.next_offset, True)
        new.index_interval = self.config.index_interval_bytes
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
        return self.bases[0]

    def end_offset(self) -> int:
        return self.active.next_offset

    def offsets(self) -> tuple[int, int]:
        with self.mutex:
            self._refresh(repair=False)
            return self.bases[0], self.active.next_offset

    def batches(self, offset: int, max_bytes: int = 1 << 20) -> Iterator[BatchRef]:
        """CRC-checked batches holding ``offset`` and after, about ``max_bytes`` in all."""
        with self.mutex:
            self._refresh(repair=False)
            bases = list(self.bases)
            end = self.active.next_offset
            active = self.active
        if offset < bases[0] or offset > end:
            raise OffsetOutOfRange(
                f"offset {offset} is out of range for {self.topic}-{self.partition}: "
                f"valid offsets are {bases[0]}..{end} (end = next offset to be written)"
            )
        i = bisect_right(bases, offset) - 1
        sent = 0
        while i < len(bases) and offset < end and sent < max_bytes:
            seg = active if bases[i] == active.base else self._sealed(bases[i])
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

    def segment_for_offset(self, offset: int) -> Segment:
        i = bisect_right(self.bases, offset) - 1
        base = self.bases[max(i, 0)]
        return self.active if base == self.active.base else self._sealed(base)

    def all_segments(self) -> list[Segment]:
        with self.mutex:
            self._refresh(repair=False)
            return [self.active if b == self.active.base else self._sealed(b) for b in self.bases]

    def segment_max_timestamp(self, seg: Segment) -> int:
        if not seg.loaded:
            with self.mutex:
                seg.load(repair=False)
        return seg.max_timestamp
