"""One segment: a ``.log`` of record batches plus its sparse ``.index`` and ``.timeindex``.

The log is append-only. ``size`` is the length of the prefix known to hold complete batches,
each CRC-valid or recorded as damaged (``damage``); everything a reader returns lies inside it.
Bytes past it are either a batch being written by another process (readers stop there), a
torn tail left by a writer that died (the next writer truncates it, holding the partition
lock), or a damaged end no intact batch follows (``tail_damage``: a reader's view stops
before it, a writer refuses to append after it unless it can prove it torn).

Damage stays local (docs/DURABILITY.md, Damage stays where it is). A batch that fails its
CRC or whose header does not parse is stepped over when an intact batch follows it
(``next_intact``: where the damaged header's length or stored length says, else the next
8-byte boundary holding a whole, CRC-valid batch whose offsets continue the log): the view
goes on past it, appends go on at the end, and a read that reaches its offsets fails naming
them and the way past (``Damage``; engine.storage.reader). The batch-by-batch reads are
batch_scan.py's (``BatchScan``, which ``Segment`` extends).
"""

from __future__ import annotations

import copy
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable

from .. import clock
from ..errors import CorruptRecordError, os_error
from ..format.records import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    MAX_BATCH_BYTES,
    MAX_RELATIVE_OFFSET,
    BatchHeader,
    crc_intact,
    read_header,
)
from ..fs import guard, prealloc
from ..progress import Progress
from . import filenames
from .batch_scan import PLAIN_ONLY as PLAIN_ONLY  # (storage.reader)
from .batch_scan import BatchRef as BatchRef  # (storage, tiering, fetch)
from .batch_scan import BatchScan, TornTail
from .damage import Damage, header_at, next_intact
from .index import OffsetIndex, TimeIndex, max_entries

SCAN_REPORT_BYTES = 64 << 20  # a scan at least this long reports progress
RESERVE_CHUNK = 8 << 20  # blocks reserved ahead of direct appends (fs.prealloc)


class Segment(BatchScan):
    """One segment of a partition: its ``.log`` (read through ``BatchScan``), ``.index`` and
    ``.timeindex``; loaded, mended, appended to and looked up here."""

    def __init__(self, directory: str, base_offset: int, writable: bool,
                 create: bool = False) -> None:
        self.directory = directory
        self.base = base_offset
        self.writable = writable
        self.path = filenames.path(directory, base_offset, filenames.LOG)
        self.fd = -1
        # never O_CREAT an existing segment: one deleted meanwhile must stay deleted; never
        # write through a link (guard.open_file: UnexpectedLink)
        if writable:
            self.fd = guard.open_file(self.path, os.O_RDWR | (os.O_CREAT if create else 0))
        else:
            self.fd = os.open(self.path, os.O_RDONLY)
        st = os.fstat(self.fd)
        self.ino = st.st_ino  # (reopen after release: the same file, or it is gone)
        limit = max_entries(st.st_size)  # (an index bigger is not read)
        self.index = OffsetIndex(filenames.path(directory, base_offset, filenames.INDEX), writable, limit)
        self.timeindex = TimeIndex(filenames.path(directory, base_offset, filenames.TIMEINDEX), writable,
                                   limit)
        # a sealed segment's indexes were fsynced when it rolled: one that fails is damage,
        # reported (once); the active one's may be a crash's leftovers, which a writer mends
        self.report_index = False
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        # wall-clock ms when this process created or first opened the segment: segment.ms
        # counts from the later of this and the first batch's timestamp, so records produced
        # with old timestamps (a replay) do not roll a segment per batch
        self.opened_ms = clock.now_ms()
        self.bytes_since_index = 0
        self.loaded = False
        self.needs_repair = False
        self.durable = 0  # bytes known fsynced (from the checkpoint), set by load
        self.reserved = 0  # blocks allocated up to here (direct appends: fs.prealloc)
        self.cuts: list[dict] = []  # damaged tails this process cut (see _cuttable)
        self.progress: Progress | None = None
        # damaged batches found inside the log, by position (``damage_at``), and a damaged
        # end of a reader's view with the file size it was seen at (``catch_up``)
        self.damage: dict[int, Damage] = {}
        self.tail_damage: Damage | None = None
        self._tail_seen = -1

    def __repr__(self) -> str:
        return f"Segment({self.path}, size={self.size}, next={self.next_offset})"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if hasattr(self, "timeindex"):
            self.index.close()
            self.timeindex.close()

    def detached(self) -> Segment:
        """A copy of what is known of this segment without its descriptors (``reopen`` opens
        them): the file budget (engine.storage.budget) puts it in place of an idle
        partition's active segment, and this one closes when its last holder lets go."""
        seg = copy.copy(self)
        seg.fd = -1
        seg.index = self.index.detached()
        seg.timeindex = self.timeindex.detached()
        return seg

    def reopen(self) -> None:
        """Open the files again after ``release``; SegmentGone-style FileNotFoundError when
        the segment was deleted or replaced meanwhile (the caller lists the segments anew)."""
        if self.fd >= 0:
            return
        fd = guard.open_file(self.path, os.O_RDWR) if self.writable else os.open(
            self.path, os.O_RDONLY)
        if os.fstat(fd).st_ino != self.ino:
            os.close(fd)
            raise FileNotFoundError(f"{self.path} was replaced")
        self.fd = fd
        self.index.reopen()
        self.timeindex.reopen()

    def __del__(self) -> None:
        # a segment dropped from a log's view (deleted or replaced) closes when its last
        # reader lets go of it, which frees its disk space
        try:
            self.close()
        except OSError:
            pass

    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    # ---------------------------------------------------------------- loading
    def load(self, repair: bool, checkpoint: dict | None = None, limit: int | None = None
             ) -> None:
        """Establish ``size``/``next_offset``/``max_timestamp`` from the indexes and the log tail.

        A reader trusts the log up to the last index entry and scans the rest. A writer
        (``repair``, holding the partition lock) trusts only what the partition's checkpoint
        says was fsynced: index entries past that point are dropped and rebuilt, and a damaged
        or torn tail past it is cut (the WAL replay puts acknowledged batches back). A reader
        scans no further than ``limit`` (the partition's durable end, engine.segments.durable_end).
        """
        self.needs_repair = False
        self.damage = {}
        self.tail_damage = None
        self.durable = self.file_size()
        if repair:
            if checkpoint is None or checkpoint["segment"] < self.base:
                self.durable = 0
            elif checkpoint["segment"] == self.base:
                self.durable = min(checkpoint["position"], self.durable)
            keep = bisect_left(self.index.values, self.durable)
            self.index.truncate_entries(keep)
            last = self.index.keys[keep - 1] if keep else 0
            self.timeindex.truncate_entries(bisect_right(self.timeindex.values, last))
        if not self._indexes_ok():
            if repair:
                self.rebuild_indexes(truncate_torn=True, durable=self.durable)
                self.loaded = True
                return
            # forget them in memory only; a writer rebuilds them under the lock
            self._drop_indexes("they do not fit the log")
        start_pos = 0
        self.size = 0
        self.next_offset = self.base
        self.max_timestamp = self.timeindex.keys[-1] if len(self.timeindex) else -1
        if len(self.index):
            start_pos = self.index.values[-1]
            self.size = start_pos
            self.next_offset = self.base + self.index.keys[-1]
        self.bytes_since_index = 0
        first = os.pread(self.fd, HEADER_SIZE, 0)
        self.first_batch_timestamp = None
        if len(first) == HEADER_SIZE:
            try:
                self.first_batch_timestamp = read_header(first, 0).max_timestamp
            except CorruptRecordError:
                pass
        self.catch_up(repair, from_index=start_pos, end=limit)
        self.loaded = True

    def _indexes_ok(self) -> bool:
        idx = self.index
        if idx.oversized or self.timeindex.oversized:
            return False
        keys, vals = idx.keys, idx.values
        if any(b <= a for a, b in zip(keys, keys[1:])) or any(b <= a for a, b in zip(vals, vals[1:])):
            return False
        if len(idx):
            if keys[0] <= 0 or vals[0] <= 0:
                return False
            h = header_at(self.fd, vals[-1])
            if h is None or h.base_offset != self.base + keys[-1]:
                return False
        t = self.timeindex
        tk, tv = t.keys, t.values
        if any(b <= a for a, b in zip(tk, tk[1:])) or any(b < a for a, b in zip(tv, tv[1:])):
            return False
        if len(t) and (not len(idx) or tv[-1] > keys[-1] or tv[0] <= 0):
            return False
        return True

    def catch_up(self, repair: bool, from_index: int | None = None, end: int | None = None
                 ) -> int:
        """Scan batches past ``size`` (appended by another process), up to ``end`` (the
        durable end a reader may not pass; None: the file size); returns how many.

        With ``repair`` (the caller holds the partition lock) a torn tail is truncated;
        without it, the view simply stops before it. A damaged batch an intact one follows
        is stepped over (``damage``); a damaged end stops a reader's view before it
        (``tail_damage``) and is cut by a writer only when ``_cuttable`` (else it raises).
        """
        end = self.file_size() if end is None else min(end, self.file_size())
        if self.tail_damage is not None:
            if end == self._tail_seen and not repair:
                return 0  # (the same damaged end as at the last look)
            self.tail_damage = None
        start = self.size if from_index is None else from_index
        count = 0
        if from_index is None and end != start:
            self.index.max_entries = self.timeindex.max_entries = max_entries(end)
            self.index.refresh()
            self.timeindex.refresh()
        if end <= start:
            if end < start and repair:  # another writer cut a torn tail we never saw
                self.size = end
            return 0
        report = self.progress if end - start >= SCAN_REPORT_BYTES else None
        base = self.base
        what = f"scanning {os.path.basename(self.path)} (no checkpoint covers it)"
        next_report = start + SCAN_REPORT_BYTES // 4
        tail: list[Damage] = []
        try:
            for ref in self.iter_batches(start, end, damaged=self._step_over(repair, tail),
                                         expect=self.next_offset):
                h = ref.header
                if h.base_offset < self.next_offset or h.next_offset - base > MAX_RELATIVE_OFFSET:
                    e = self._misplaced(h, ref.position)  # (offsets that fit nowhere: an end)
                    tail.append(Damage(ref.position, end, self.next_offset, None, str(e)))
                    raise e
                self._account(ref.position, h.base_offset, h.size, h.next_offset,
                              h.max_timestamp, index=repair)
                count += 1
                if report is not None and ref.position >= next_report:
                    report(what, end - start, ref.position - start)
                    next_report += SCAN_REPORT_BYTES // 4
            if report is not None:
                report(what, end - start, end - start)
        except TornTail as t:
            if repair:
                self.truncate(t.position)
        except CorruptRecordError as e:
            if tail and not repair:
                self.tail_damage, self._tail_seen = tail[0], end
                return count
            if not repair or not self._cuttable(self.size, end):
                raise self._refused(e, tail) from None
            self._note_cut(self.size, end, str(e))
            self.truncate(self.size)  # not yet durable when the machine went down
        return count

    def _step_over(self, repair: bool, tail: list[Damage]) -> Callable[[Damage], None]:
        """What a scan of the view does with a damaged batch: steps over it when an intact
        one follows, but a writer only below the checkpoint (past it the bytes may be what a
        crash left mid-write, which the WAL replay puts back: not the writer's to skip);
        a damaged end is raised (noted in ``tail``) for the caller's torn-tail rule."""

        def step(d: Damage) -> None:
            if d.next_offset is None:
                tail.append(d)
                raise CorruptRecordError(d.reason, self.path, d.position)
            if repair and d.position >= self.durable:
                raise CorruptRecordError(
                    f"{d.reason}; intact batches follow it past the partition's checkpoint, "
                    "so it is no write a crash tore: appends are refused until 'rivven "
                    f"segment recover {self.path} --truncate-corrupt' cuts out the damaged "
                    "batch", self.path, d.position)
        return step

    def _refused(self, e: CorruptRecordError, tail: list[Damage]) -> CorruptRecordError:
        """``e`` as a writer refuses a damaged end it may not cut: naming the repair."""
        if not tail:
            return e
        return CorruptRecordError(
            f"{e}; it is the end of the log and no write a crash tore (the checkpoint vouches "
            "for it, or it is whole as written): appends are refused until 'rivven segment "
            f"recover {self.path} --truncate-corrupt' cuts it", self.path, tail[0].position)

    def _misplaced(self, h: BatchHeader, position: int) -> CorruptRecordError:
        """A batch read into the view must follow the ones before it, within what this
        segment's int32 relative offsets reach: a crafted or misplaced one would make the
        next append's offsets, or an index entry, overflow."""
        return CorruptRecordError(
            f"batch at offsets {h.base_offset}..{h.last_offset} does not belong after offset "
            f"{self.next_offset - 1} of the segment with base offset {self.base}"
            f"{self.where(position)}; run 'rivven segment verify'", self.path, position)

    def _note_cut(self, position: int, end: int, reason: str) -> None:
        self.cuts.append({"action": "cut", "file": self.path, "position": position,
                          "bytes": end - position, "reason": reason})

    def _cuttable(self, position: int, end: int) -> bool:
        """May a damaged batch at ``position`` be cut as an unfinished tail? Only past the
        checkpoint, and only when no intact batch follows it (never cut good data)."""
        if position < self.durable:
            return False
        raw = os.pread(self.fd, HEADER_SIZE, position)
        try:
            h = read_header(raw, 0)
        except CorruptRecordError:
            if self._crc_intact(raw, position, end):
                return False  # written as it is (fields out of range): damage, not a torn write
            # (batches are 8-byte aligned: a damaged header cannot hide one elsewhere)
            return next_intact(self.fd, position, end, self.base, None) is None
        if self._crc_intact(raw, position, end):
            return False  # a whole batch, CRC intact, that does not fit the log: damage
        nxt = position + h.size
        if nxt + HEADER_SIZE > end:
            return True
        try:
            for _ in self.iter_batches(nxt, min(end, nxt + (64 << 20))):
                return False
        except (TornTail, CorruptRecordError):
            return True
        return True

    def _crc_intact(self, raw: bytes, position: int, end: int) -> bool:
        """Is the batch whose header ``raw`` is at ``position`` whole and CRC-valid?"""
        size = int.from_bytes(raw[8:12], "little", signed=True) + LENGTH_PREFIX
        if not HEADER_SIZE <= size <= min(end - position, MAX_BATCH_BYTES):
            return False
        return crc_intact(os.pread(self.fd, size, position))

    def _index_due(self, position: int) -> bool:
        return self.bytes_since_index > self.index_interval and position > 0

    def _account(self, position: int, base_offset: int, size: int, next_offset: int,
                 max_ts: int, index: bool) -> None:
        """Update in-memory state for a durable batch at ``position`` (indexing it if due)."""
        if self._index_due(position):
            if index and self.writable:
                rel = base_offset - self.base
                self.index.append(rel, position)
                if self.max_timestamp >= 0:
                    self.timeindex.append(self.max_timestamp, rel)
            self.bytes_since_index = 0
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_ts
        self.bytes_since_index += size
        self.size = position + size
        self.next_offset = next_offset
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts

    index_interval = 4096

    # ---------------------------------------------------------------- writing
    def write(self, data: bytes | bytearray | memoryview, position: int) -> None:
        try:
            n = os.pwrite(self.fd, data, position)
            if n == len(data):  # (nearly always: no view to slice)
                return
            view = memoryview(data)[n:]
            position += n
            while view:
                n = os.pwrite(self.fd, view, position)
                view = view[n:]
                position += n
        except OSError as e:
            raise os_error(e, "write", self.path) from e

    def writev(self, buffers: list, position: int) -> None:
        """Write ``buffers`` back to back from ``position`` (one pwritev when it takes all)."""
        try:
            n = os.pwritev(self.fd, buffers, position)
        except OSError as e:
            raise os_error(e, "write", self.path) from e
        total = sum(map(len, buffers))
        if n < total:  # a short write: the rest the slow way
            self.write(memoryview(b"".join(buffers))[n:], position + n)

    def reserve(self, end: int, limit: int) -> None:
        """(flock held.) Have blocks allocated up to ``end`` before a direct append writes
        there, a chunk ahead (never past ``limit``, the segment's size limit): its fdatasync
        then commits no block allocation. The file's size is untouched."""
        if end <= self.reserved:
            return
        start = max(self.reserved, self.size)
        upto = max(end, min(start + RESERVE_CHUNK, limit))
        # (refused: never asked again for this segment, its appends allocate as they go)
        self.reserved = upto if prealloc.reserve(self.fd, start, upto - start) else 1 << 62

    def release_reserve(self) -> None:
        """(flock held.) Give back the blocks reserved past the end (the segment is sealed;
        another process, or one killed, may have reserved them: the file says)."""
        try:
            prealloc.release(self.fd)
        except OSError:
            pass  # (only space: the blocks stay allocated)
        self.reserved = 0

    def sync(self) -> None:
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            raise os_error(e, "fsync", self.path) from e

    def sync_all(self) -> None:
        """fsync the log and both indexes (a roll, a checkpoint, a rebuilt segment)."""
        self.sync()
        self.index.sync()
        self.timeindex.sync()

    def appended(self, position: int, base_offset: int, size: int, next_offset: int,
                 max_ts: int) -> None:
        """Account a batch written at ``position`` once it is durable."""
        self._account(position, base_offset, size, next_offset, max_ts, index=True)

    def truncate(self, position: int) -> None:
        """Cut the log at ``position`` (a batch boundary) and drop index entries past it."""
        os.ftruncate(self.fd, position)
        self.damage = {p: d for p, d in self.damage.items() if d.end <= position}
        self.tail_damage = None
        self.index.truncate_entries(bisect_left(self.index.values, position))
        keep = self.index.keys[-1] if len(self.index) else 0
        self.timeindex.truncate_entries(bisect_right(self.timeindex.values, keep))
        if self.size > position:
            self.size = position

    def rebuild_indexes(self, truncate_torn: bool, tolerate_corruption: bool = False,
                        durable: int | None = None) -> int:
        """Rebuild both indexes from the log (same rule as appends); returns the valid end.

        A damaged batch an intact one follows is stepped over (a writer's, ``durable`` given
        with ``truncate_torn``: only below ``durable``). A damaged end is cut when a writer
        may (``_cuttable``); with ``tolerate_corruption`` the indexes cover the log up to it
        (the operator chose to leave it); otherwise it raises.
        """
        self.size = 0
        self.next_offset = self.base
        self.max_timestamp = -1
        self.bytes_since_index = 0
        self.first_batch_timestamp = None
        self.damage = {}
        self.tail_damage = None
        offs: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        writer = durable is not None and truncate_torn
        if durable is not None and truncate_torn:
            self.durable = durable
        tail: list[Damage] = []
        try:
            for ref in self.iter_batches(0, self.file_size(), expect=self.base,
                                         damaged=self._step_over(writer, tail)):
                h = ref.header
                if h.base_offset < self.next_offset or \
                        h.next_offset - self.base > MAX_RELATIVE_OFFSET:
                    raise self._misplaced(h, ref.position)
                if self._index_due(ref.position):
                    rel = h.base_offset - self.base
                    offs.append((rel, ref.position))
                    if self.max_timestamp >= 0 and (not times or self.max_timestamp > times[-1][0]):
                        times.append((self.max_timestamp, rel))
                self._account(ref.position, h.base_offset, h.size, h.next_offset,
                              h.max_timestamp, index=False)
        except TornTail as t:
            if truncate_torn and self.writable:
                os.ftruncate(self.fd, t.position)
        except CorruptRecordError as e:
            end = self.file_size()
            if writer and self._cuttable(self.size, end):
                self._note_cut(self.size, end, "damaged batch past the checkpoint")
                os.ftruncate(self.fd, self.size)
            elif not tolerate_corruption:
                raise self._refused(e, tail) from None
        if self.writable:
            self.index.write_all(offs)
            self.timeindex.write_all(times)
        return self.size

    # ---------------------------------------------------------------- reading
    def position_for(self, offset: int) -> int:
        """Byte position from which to scan for ``offset`` (an index lookup). The entry is
        checked before use: inside the log, and at a batch with the offset it claims. An index
        that fails (damaged, or not of this .log: a compaction swap cut short by a crash) is
        dropped and reported, and the log scanned from its start instead."""
        return self.start_for(offset)[0]

    def start_for(self, offset: int) -> tuple[int, int]:
        """``position_for``, and the base offset of the batch there (the segment's base
        offset at position 0)."""
        i = self.index.floor(offset - self.base)
        if i < 0:
            if self.index.oversized and not self.needs_repair:
                self._drop_indexes(f"it has more entries than {self.path} has batches")
            return 0, self.base
        pos = self.index.values[i]
        ok = 0 < pos < self.size  # (never pread a negative position: EINVAL)
        if ok:
            h = header_at(self.fd, pos)
            ok = h is not None and h.base_offset == self.base + self.index.keys[i]
        if not ok:
            self._drop_indexes(f"entry {i} (offset {self.base + self.index.keys[i]} -> "
                               f"position {pos}) does not point at that batch")
            return 0, self.base
        return pos, self.base + self.index.keys[i]

    def _drop_indexes(self, reason: str) -> None:
        """Forget the indexes in memory (this reader scans the log instead), leave them for a
        writer to rebuild (the active segment) and report them once."""
        self.index.forget()
        self.timeindex.forget()
        self.needs_repair = True
        if self.report_index:
            self.report_index = False
            _warn("ignoring the indexes of %s: %s; reading the log without them "
                        "('rivven segment reindex %s' rebuilds them)",
                        self.path, reason, self.path)

    def position_for_time(self, timestamp: int) -> int:
        i = self.timeindex.lower(timestamp)
        if i < 0:
            return 0
        return self.position_for(self.base + self.timeindex.values[i])


def _warn(message: str, *args: object) -> None:
    """A ``logging`` warning on ``rivven.storage`` (imported here: it costs start-up)."""
    import logging

    logging.getLogger("rivven.storage").warning(message, *args)
