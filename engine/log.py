"""One partition: its ordered segments, appends under the partition lock, reads without locks.

Several processes may append to the same partition. Each append takes ``.lock`` (flock) in the
partition directory, brings this process's view up to date (did the active segment grow? did
another process roll it? did a dead writer leave a torn tail? — truncate it), assigns offsets,
writes, syncs and releases. Deleting a topic unlinks ``.lock`` while holding it, so a writer
that finds its lock file unlinked knows the partition is gone.
"""

from __future__ import annotations

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

MAX_RELATIVE_OFFSET = (1 << 31) - 1


def now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig,
                 writable: bool) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.writable = writable
        self.mutex = threading.RLock()
        self.lock_fd = -1
        self.segments: dict[int, Segment] = {}
        self.bases: list[int] = []
        if writable:
            try:
                self.lock_fd = open_lock_file(os.path.join(directory, files.LOCK_FILE))
            except FileNotFoundError:
                raise UnknownTopic(f"partition {partition} of topic {topic!r} is gone") from None
        if writable:
            with flocked(self.lock_fd):  # a writer's first look repairs what it finds
                self._check_alive()
                self._relist()
                self.active = self._open(self.bases[-1])
                self.active.load(repair=True)
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
            act.load(repair=True)
        if act.file_size() != act.size:
            act.catch_up(repair)
        while act.next_offset > act.base and os.path.exists(
                files.path(self.dir, act.next_offset, files.LOG)):
            self._relist()
            act = self._open(act.next_offset)
            act.load(repair=repair)
            self.active = act

    def _check_alive(self) -> None:
        if os.fstat(self.lock_fd).st_nlink == 0:
            raise UnknownTopic(f"topic {self.topic!r} was deleted")

    # ---------------------------------------------------------------- writing
    def append(self, batch: EncodedBatch, sync: bool = True) -> int:
        """Assign offsets to ``batch``, write it, make it durable; returns its base offset."""
        with self.mutex, flocked(self.lock_fd):
            self._check_alive()
            self._refresh(repair=True)
            seg = self._maybe_roll(len(batch), batch.count)
            base = seg.next_offset
            buf = batch.assign(base)
            pos = seg.size
            try:
                seg.write(buf, pos)
                if sync:
                    seg.sync()
            except StorageError:
                self._undo(seg, pos)
                raise
            seg.appended(pos, base, len(buf), base + batch.last_offset_delta + 1,
                         batch.max_timestamp)
            return base

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
