"""The segments of one partition directory, in offset order; the last one is active.

Sealed segments are opened on demand and their size is their file size (their tail is scanned
only when a reader needs their last timestamp). A segment dropped from the set — deleted by
retention or delete-records, replaced by a swap — is closed when its last reader lets go of
it (``Segment.__del__``), which is what frees its disk space.

Every method that changes the set runs with the partition lock held (engine.storage.log).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import DamagedMetadata, UnknownTopic
from ..failpoint import failpoint
from ..fs import durable
from ..progress import Progress
from . import checkpoint, filenames
from .durable_end import DurableEnd, Published, visible
from .segment import Segment

SEALED_KEPT = 4  # sealed segments a partition keeps open (the engine's file budget bounds the rest)


class SegmentGone(UnknownTopic):
    """A segment file disappeared under a reader (retention, delete-records, topic delete)."""


class SegmentSet:
    def __init__(self, directory: str, topic: str, partition: int, writable: bool,
                 cuts: list[dict], progress: Progress | None,
                 index_interval: Callable[[], int] = lambda: 4096) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.writable = writable
        self.cuts = cuts  # damaged tails cut while loading (shared with the engine)
        self.progress = progress  # long scans report (what, total, done) bytes
        self.index_interval = index_interval  # the topic's index.interval.bytes, now
        self.segments: dict[int, Segment] = {}
        self.bases: list[int] = []
        self.active: Segment = None  # type: ignore[assignment]  # set by open_active
        self._ignored: set[tuple] = set()  # (.checkpoint stamp, reason) already noted
        self._prefix = os.path.join(directory, "")  # + filenames.name(...): a file's path
        self.released = False  # files closed by the file budget (engine.storage.budget)
        # how far readers may read the active segment, published by its writer after each
        # fsync (engine.segments.durable_end)
        self.end = DurableEnd(directory, writable)

    def close(self) -> None:
        for seg in self.segments.values():
            seg.close()
        self.segments.clear()
        self.end.close()

    def release(self) -> None:
        """(mutex held.) Let go of every file: the sealed segments are forgotten (opened anew
        on demand), the active one is replaced by a copy without descriptors that
        ``reacquire`` opens again. Each segment closes as its last holder lets go of it (a
        reader in the middle of one finishes it)."""
        act = self.active.detached()
        self.segments = {act.base: act}
        self.active = act
        self.released = True
        self.end.close()  # (a mapping keeps a descriptor: mapped again on the next look)

    def reacquire(self) -> None:
        """(mutex held.) Open the active segment's files again after ``release``; when it is
        gone (rolled and deleted by another process meanwhile), list and load anew."""
        self.released = False
        try:
            self.active.reopen()
        except FileNotFoundError:
            self.segments.clear()
            self.relist()
            self.open_active(repair=False)

    def files(self) -> int:
        """Descriptors this set holds open (a segment: its log and two indexes; the mapped
        durable end: one, mapped at the first look, Python's mmap keeps a copy of its
        descriptor)."""
        return 0 if self.released else 3 * len(self.segments) + 1

    # ---------------------------------------------------------------- the list
    def relist(self) -> None:
        try:
            bases = filenames.segment_bases(self.dir)
        except FileNotFoundError:
            raise UnknownTopic(f"partition {self.partition} of topic {self.topic!r} is gone"
                               ) from None
        if not bases:
            if self.writable:
                Segment(self.dir, 0, True, create=True).close()
            bases = [0]
        for b in list(self.segments):
            if b not in bases:
                self.segments.pop(b)  # closed when no reader holds it any more
        self.bases = bases

    def open(self, base: int) -> Segment:
        seg = self.segments.get(base)
        if seg is None:
            try:
                seg = Segment(self.dir, base, self.writable)
            except FileNotFoundError:
                raise SegmentGone(
                    f"segment {base} of {self.topic}-{self.partition} vanished (topic deleted?)"
                ) from None
            seg.index_interval = self.index_interval()
            seg.cuts = self.cuts
            seg.progress = self.progress
            self.segments[base] = seg
            if len(self.segments) > SEALED_KEPT + 1:
                self._forget_oldest_sealed(base)
        return seg

    def _forget_oldest_sealed(self, keep: int) -> None:
        """Keep at most SEALED_KEPT sealed segments open: a reader walking a long partition
        holds the descriptors of a few segments, not of all it passed (a segment dropped here
        closes when its last reader lets go of it)."""
        active = self.active.base if self.active is not None else None
        for b in list(self.segments):
            if b != active and b != keep:
                del self.segments[b]
                if len(self.segments) <= SEALED_KEPT + 1:
                    return

    def open_active(self, repair: bool) -> None:
        """Open and load the last segment (a writer, ``repair``, mends its tail; a reader
        stops at the durable end)."""
        self.active = act = self.open(self.bases[-1])
        if repair:
            act.load(repair=True, checkpoint=self.checkpoint())
        else:
            act.load(repair=False, limit=visible(self.end.read(), act.base))

    # ---------------------------------------------------------------- the checkpoint
    def checkpoint(self, active: Segment | None = None) -> dict | None:
        """The partition's ``.checkpoint`` when it is intact and agrees with the segments (the
        last being ``active``); else None, the reason noted once (engine.segments.checkpoint:
        a damaged checkpoint is never acted on). The log end is checked once the active
        segment is loaded (PartitionLog.read_log_start); until then a bad position only ever
        keeps bytes from being cut."""
        try:
            point = checkpoint.read_checkpoint(self.dir)
            if point is not None:
                act = active or self.active
                checkpoint.check(self.dir, point, self.bases, act.file_size())
            return point
        except DamagedMetadata as e:
            self.ignored(e)
            return None

    def ignored(self, e: DamagedMetadata) -> None:
        """Note a metadata file ignored because of ``e`` (once per version of the file)."""
        key = (checkpoint.stamp(self.dir), str(e))
        if key not in self._ignored:
            self._ignored.add(key)
            self.cuts.append({"action": "ignored", "file": e.path, "reason": str(e)})

    def sealed(self, base: int) -> Segment:
        """A sealed segment: its size is its file size; loaded (tail scanned) on demand."""
        seg = self.open(base)
        if not seg.loaded and seg is not self.active:
            i = self.bases.index(base)
            seg.report_index = not seg.needs_repair  # (reported once)
            seg.size = seg.file_size()
            seg.next_offset = self.bases[i + 1] if i + 1 < len(self.bases) else seg.next_offset
        return seg

    def all(self) -> list[Segment]:
        return [self.active if b == self.active.base else self.sealed(b) for b in self.bases]

    def refresh(self, repair: bool) -> bool:
        """Catch up with what other processes wrote to the active segment, and follow the
        segments they rolled; a reader stops at the published durable end, a writer
        (``repair``) reads the files and publishes their end (``publish_rebuilt``). Returns
        True when the active segment shrank (a repair cut it)."""
        act = self.active
        pub: Published | None = None
        if repair:
            if act.needs_repair:
                act.load(repair=True, checkpoint=self.checkpoint())
        else:
            pub = self.end.read()
            if pub is not None and pub[0] == act.base and pub[1] == act.size \
                    and act.tail_damage is None:
                return False  # nothing published past what is known: no syscall at all
        shrank = False
        size = act.file_size()
        limit = visible(pub, act.base)
        limit = size if limit is None else min(size, limit)
        if limit != act.size or act.tail_damage is not None:
            shrank = size < act.size
            act.catch_up(repair, end=None if repair else limit)
        # (access, not exists: no exception raised and caught on the common miss)
        while act.next_offset > act.base and (pub is None or pub[0] > act.base) and os.access(
                f"{self._prefix}{act.next_offset:020d}{filenames.LOG}", os.F_OK):
            self.relist()
            act = self.open(act.next_offset)
            if repair:
                act.load(repair=True, checkpoint=self.checkpoint(act))
            else:
                act.load(repair=False, limit=visible(pub, act.base))
            self.active = act
        if repair:
            self.publish_rebuilt()
        return shrank

    def publish(self) -> None:
        """(flock held, the active segment's accounted bytes durable, or visible before
        durable by ``wal.sync``.) Let readers in every process read up to them."""
        act = self.active
        self.end.publish(act.base, act.size, act.next_offset)

    def publish_rebuilt(self) -> None:
        """(flock held, the view just read from the files.) Publish the end the files prove.
        Bytes past what was published may be a killed writer's, written but never fsynced:
        they are fsynced before any reader may see them."""
        act = self.active
        pub = self.end.read()
        if pub == (act.base, act.size, act.next_offset):
            return
        if pub is not None and (pub[0] != act.base or pub[1] < act.size):
            act.sync()
        # (nothing published under this boot: no writer of it appended here, so every byte
        # came through the WAL or from before a reboot, and the files are the truth)
        self.publish()

    def drop_replaced(self) -> None:
        """Forget cached sealed segments whose file was replaced or deleted (a swap)."""
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
            self.relist()

    # ---------------------------------------------------------------- changes (lock held)
    def roll(self) -> Segment:
        """Seal the active segment (fsync log and indexes) and start a new one at the end."""
        old = self.active
        old.release_reserve()  # (a sealed segment keeps no blocks past its end)
        old.sync_all()
        new = Segment(self.dir, old.next_offset, True, create=True)
        new.index_interval = self.index_interval()
        new.cuts = self.cuts
        new.next_offset = old.next_offset
        new.loaded = True
        durable.fsync_dir(self.dir)
        self.segments[new.base] = new
        self.bases.append(new.base)
        self.active = new
        self.publish()  # readers follow the roll (the sealed segment is fsynced)
        return new

    def drop_orphan_indexes(self) -> None:
        """Index files whose .log is gone: a deletion cut short by a crash."""
        bases = set(self.bases)
        for f in os.listdir(self.dir):
            parsed = filenames.parse(f)
            if parsed and parsed[1] in (filenames.INDEX, filenames.TIMEINDEX, filenames.TXNINDEX) \
                    and parsed[0] not in bases:
                os.unlink(os.path.join(self.dir, f))

    def delete_below(self, start: int) -> list[dict]:
        """Delete sealed segments whose offsets all lie below ``start``."""
        n = 0
        while n < len(self.bases) - 1 and self.bases[n + 1] <= start:
            n += 1
        return self.delete_first(n)

    def delete_first(self, n: int) -> list[dict]:
        """Delete the ``n`` oldest segments (never the active one); a row per segment."""
        gone = []
        for i, base in enumerate(self.bases[:min(n, len(self.bases) - 1)]):
            self.segments.pop(base, None)  # closed when no reader holds it any more
            size = filenames.delete_segment(self.dir, base)
            gone.append({"base_offset": base, "next_offset": self.bases[i + 1], "bytes": size})
            failpoint("segment-deleted")
        if gone:
            durable.fsync_dir(self.dir)
            self.bases = self.bases[len(gone):]
        return gone
