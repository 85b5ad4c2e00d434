"""This process's WAL stream: appends from any thread, group-committed fdatasync.

Layout: ``wal/<stream>/stream.lock`` (flock held while the process lives) and the stream's
files (engine.wal.wal_file has their format). A stream whose lock can be taken belongs to a
dead process; whoever finds it recovers it (engine.wal.replay).

A busy stream whose fsyncs are small writes into zero-filled files prepared ahead by a
background thread (``next.tmp`` until a rotation renames it): overwriting blocks that are
already allocated and inside the file's size, an fdatasync has no metadata to commit, which on
ext4 makes it about a third cheaper. (For large fsyncs the extra zeros cost more than that.)
"""

from __future__ import annotations

import os
import threading
import time

from ..counters.meter import Meter
from ..errors import StorageError, os_error
from ..fs import durable, guard
from ..fs.locks import open_lock_file, try_lock
from .wal_file import SUFFIX, batch_record_parts

LOCK = "stream.lock"
RECOVERY_LOCK = "recovery.lock"
GATHER_S = 0.002  # longest a syncer waits for the waiters of a typical group
GATHER_IDLE_S = 0.0005  # ... and it stops waiting once nobody new came for this long
PREPARED = "next.tmp"  # the zero-filled file the next rotation takes
PREPARE_AFTER = 256 << 10  # bytes written to a file before its successor is prepared
PREPARE_FIRST = 4 << 20  # a stream's first prepared file; each next one doubles, up to
# wal.segment.bytes (so a stream that turns busy is on prepared files within milliseconds)
PREPARE_FREE_FACTOR = 4  # prepare only while the disk has this many times the file free
# ... and only for a stream that fsyncs at most this many bytes at a time: zero-filling
# doubles the bytes the WAL writes, which only pays while fsyncs are small (an fsync of
# 118 KB gains 0.2 ms but costs writing 118 KB more; one of a few KB costs next to nothing)
PREPARE_MAX_BYTES_PER_FSYNC = 64 << 10
_ZERO_CHUNK = memoryview(bytes(1 << 20))


def stream_files(stream_dir: str) -> list[str]:
    names = sorted(f for f in os.listdir(stream_dir) if f.endswith(SUFFIX))
    return [os.path.join(stream_dir, f) for f in names]


class _Sleeper:
    __slots__ = ("position", "lock", "covered")

    def __init__(self, position: int) -> None:
        self.position = position
        self.lock = threading.Lock()
        self.lock.acquire()
        self.covered = False


class WalStream:
    """This process's WAL: appends from any thread, group-committed fdatasync."""

    def __init__(self, data_dir: str, segment_bytes: int, meter: Meter | None = None) -> None:
        self.data_dir = data_dir
        m = meter if meter is not None else Meter(None, enabled=False)
        self.fsync_seconds = m.get("rivven_wal_fsync_duration_seconds")
        self.group_records = m.get("rivven_wal_group_commit_records")
        self.bytes_written = m.get("rivven_wal_bytes_written_total")
        self.records_written = 0  # records of the batches logged (write_mutex)
        self.records_synced = 0  # ... of those, covered by an fsync so far
        self.root = os.path.join(data_dir, "wal")
        self.id = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.dir = os.path.join(self.root, self.id)
        try:
            if guard.make_dir(self.root):  # (a link there: UnexpectedLink, never followed)
                durable.fsync_dir(data_dir)
            guard.make_dir(self.dir)
            self.lock_fd = open_lock_file(os.path.join(self.dir, LOCK))
        except OSError as e:
            raise os_error(e, "create the WAL stream", self.dir) from e
        if not try_lock(self.lock_fd):
            raise StorageError(f"cannot lock new WAL stream {self.dir}")
        durable.fsync_dir(self.root)
        self.segment_bytes = segment_bytes
        self.write_mutex = threading.Lock()
        self.sync_cond = threading.Condition(threading.Lock())  # guards the sync state
        self.arrive_cond = threading.Condition(
            self.sync_cond._lock)  # type: ignore[attr-defined]  # the gatherer waits here
        self.syncing = False
        self.gathering = False
        # threads waiting for an fsync, each on its own lock: the syncer wakes exactly the
        # ones it covered (they then return without touching sync_cond) and at most one more
        self.sleepers: list[_Sleeper] = []
        # partition logs with batches waiting for an fsync: the syncer writes them to their
        # segments before it wakes their threads (engine.storage.pipeline, after_wal_sync)
        self.listeners: set = set()
        self.written = 0  # stream position after the last appended byte
        # bytes appended straight to segments beside this stream (engine.storage.pipeline's
        # direct appends): they call for checkpoints as WAL bytes do
        self.direct_written = 0
        self.synced = 0
        self.file_start = 0
        self.fd = -1
        self.retired: list[int] = []  # fds of rotated files a syncer may still hold
        self.fsyncs = 0
        self.poisoned: BaseException | None = None  # a failed fsync: the file is untrustworthy
        self.poison_end = 0
        self.lost: list[tuple[int, int]] = []  # (lo, hi]: records whose fsync failed, for good
        self.waiting = 0  # threads inside sync()
        self.last_group = 1  # threads the previous fsync served
        self.closed = False
        self.zeroed = 0  # bytes of the current file that were zero-filled ahead of the writes
        self.prepared: tuple[str, int] | None = None  # (path, size) ready for the next rotation
        self.preparer: threading.Thread | None = None
        self.prepare_size = min(PREPARE_FIRST, segment_bytes)
        self.prepare_skip = -1  # file start for which preparing failed: not tried again
        self._open_file(0)

    def _open_file(self, start: int) -> None:
        path = os.path.join(self.dir, f"{start:020d}{SUFFIX}")
        zeroed = 0
        try:
            if self.prepared is not None:
                src, zeroed = self.prepared
                self.prepared = None
                try:
                    os.rename(src, path)
                except OSError:
                    zeroed = 0  # (lost meanwhile?) a plain new file will do
            fd = guard.open_file(path, os.O_WRONLY | os.O_CREAT)
        except OSError as e:
            raise os_error(e, "create the WAL file", path) from e
        try:
            durable.fsync_dir(self.dir)
        except OSError as e:
            os.close(fd)
            os.unlink(path)
            raise os_error(e, "fsync the WAL dir", self.dir) from e
        self.fd = fd
        self.file_start = start
        self.zeroed = zeroed
        self.file_fsyncs = self.fsyncs  # fsyncs before this file's first

    def append(self, record: bytes | list, records: int = 0) -> int:
        """Write a framed record (of ``records`` records: the group commit sizes count them),
        whole or as a list of buffers; returns the stream position its durability needs."""
        size = len(record) if not isinstance(record, list) else sum(map(len, record))
        with self.write_mutex:
            if self.closed:  # its fd number may belong to another file by now
                raise StorageError(f"WAL stream {self.dir} is closed")
            pos = self.written - self.file_start
            if (self.poisoned is not None or pos >= self.segment_bytes
                    or (pos and self.prepared is not None and pos + size > self.zeroed)):
                self._rotate()  # (a prepared file waits: take it once this one is used up)
                pos = 0
            try:
                if isinstance(record, list):
                    n = os.pwritev(self.fd, record, pos)
                else:
                    n = os.pwrite(self.fd, record, pos)
                if n != size:
                    raise OSError(28, "short write")
            except OSError as e:
                # leave no partial record behind: cut the file back to where it was
                try:
                    os.ftruncate(self.fd, pos)
                    self.zeroed = min(self.zeroed, pos)
                except OSError:
                    pass
                raise os_error(e, "write the WAL file",
                               os.path.join(self.dir, f"{self.file_start:020d}{SUFFIX}")) from e
            self.written += size
            self.records_written += records
            self.bytes_written.inc(size)
            pos += size
            if (self.preparer is None and self.prepared is None
                    and pos >= max(PREPARE_AFTER, self.zeroed // 2)
                    and pos <= PREPARE_MAX_BYTES_PER_FSYNC * (self.fsyncs - self.file_fsyncs)
                    and self.prepare_skip != self.file_start):
                self._start_preparing()
            return self.written

    def append_batch(self, topic_id: bytes, partition: int, topic: str,
                     batch: bytes | bytearray, records: int = 0) -> int:
        """Log one batch (offsets assigned) of a partition; returns what ``append`` does."""
        return self.append(batch_record_parts(topic_id, partition, topic, batch), records)

    def _start_preparing(self) -> None:
        """(write_mutex held.) Zero-fill the next file in the background."""
        size = self.prepare_size
        try:
            st = os.statvfs(self.dir)
            roomy = st.f_bavail * st.f_frsize >= PREPARE_FREE_FACTOR * size
        except OSError:
            roomy = False
        if not roomy:  # never crowd the disk the log itself needs
            self.prepare_skip = self.file_start
            return
        self.preparer = threading.Thread(target=self._prepare, args=(size, self.file_start),
                                         daemon=True, name="rivven-wal-prepare")
        self.preparer.start()

    def _prepare(self, size: int, for_file: int) -> None:
        path = os.path.join(self.dir, PREPARED)
        ok = False
        try:
            fd = guard.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                left = size
                while left > 0 and not self.closed:
                    left -= os.write(fd, _ZERO_CHUNK[:min(left, len(_ZERO_CHUNK))])
                    # flushed a chunk at a time, resting as long as each flush took: the disk
                    # stays free for the WAL fsyncs at least half the time (one large flush
                    # stalls them for as long as it runs: 30-40 ms at the 99th percentile here)
                    t = time.monotonic()
                    os.fdatasync(fd)
                    time.sleep(time.monotonic() - t)
                if not self.closed:
                    os.fdatasync(fd)
                    ok = True
            finally:
                os.close(fd)
        except (OSError, guard.UnexpectedLink):
            pass  # (disk full, say) the stream goes on with plain files
        with self.write_mutex:  # (held while unlinking: no new preparer has the name yet)
            self.preparer = None
            if ok and not self.closed:
                self.prepared = (path, size)
                self.prepare_size = min(size * 2, max(self.segment_bytes, size))
                return
            self.prepare_skip = for_file
            try:
                os.unlink(path)
            except OSError:
                pass

    def _rotate(self) -> None:
        """Start a new file (caller holds write_mutex); the old one is synced first, unless a
        failed fsync poisoned it (its unsynced records were never acknowledged)."""
        old_fd = self.fd
        if self.poisoned is None:
            try:
                self._fsync(old_fd)
            except StorageError as e:
                # as for a failed group fsync: the unsynced records of this file are lost for
                # good (a retried fdatasync may "succeed" after the kernel dropped the pages)
                with self.sync_cond:
                    self.poisoned = e
                    self.poison_end = self.written
                    self.lost.append((self.synced, self.written))
                raise
        self._open_file(self.written)  # may raise: then the old file stays current
        with self.sync_cond:
            if self.poisoned is None:
                self.synced = max(self.synced, self.written)
            else:
                # the poisoned file is closed without a sync: what it holds past the last
                # successful fsync (records written during or after the failed one, past its
                # target) is never durable, whatever later fsyncs of newer files cover
                self.lost.append((self.synced, self.written))
            self.poisoned = None
            self.retired.append(old_fd)
            if not self.syncing:  # else the syncer, which may hold that fd, closes it
                self._close_retired()

    def _close_retired(self) -> None:
        for fd in self.retired:
            os.close(fd)
        self.retired.clear()

    def rotate(self) -> int:
        """Start a new file; returns its start: every record before it is in older files."""
        with self.write_mutex:
            if self.written > self.file_start or self.poisoned is not None:
                self._rotate()
            return self.file_start

    def _fsync(self, fd: int) -> None:
        try:
            t0 = time.perf_counter()
            os.fdatasync(fd)
            self.fsync_seconds.observe(time.perf_counter() - t0)
            self.fsyncs += 1
        except OSError as e:
            raise os_error(e, "fsync the WAL file",
                           os.path.join(self.dir, f"{self.file_start:020d}{SUFFIX}")) from e

    def durable(self, position: int) -> bool:
        """Were bytes up to ``position`` fdatasynced? (False for a record whose fsync failed,
        even once later records are synced: a group-commit leader may ask for others.)"""
        if position > self.synced:
            return False
        return not self.lost or not any(lo < position <= hi for lo, hi in self.lost)

    def sync(self, position: int) -> None:
        """Return once bytes up to ``position`` are durable. One fdatasync serves every
        thread waiting meanwhile (group commit).

        The first waiter gathers: it waits (at most GATHER_S, and only while others keep
        coming) for as many waiters as the previous fsync served. The waiter that completes
        the group calls fdatasync itself instead of waking the gatherer first. After the
        fsync the syncer writes the listeners' durable batches to their segments, then wakes
        the threads it covered: each thread wake-up is one futex call and a GIL hand-off, and
        those are what a group's turnaround is made of.
        """
        if self.durable(position):
            return
        cond = self.sync_cond
        cond.acquire()
        self.waiting += 1
        mine = True  # we hold sync_cond and still count in ``waiting``
        try:
            while not self.durable(position):
                if self.poisoned is not None and position <= self.poison_end or (
                        position <= self.synced):  # (synced past it: it is in a lost range)
                    # after a failed fdatasync the kernel may have dropped those pages: a later
                    # "successful" fsync proves nothing, so these records are never acknowledged
                    raise StorageError(f"WAL {self.dir} lost an fsync ("
                                       f"{self.poisoned or 'earlier'}); the produce was not "
                                       "stored durably, retry it")
                if not self.syncing and self.waiting >= self.last_group:
                    if self.gathering:
                        self.arrive_cond.notify()  # the group is complete: stop gathering
                    self._fsync_group()
                elif not self.syncing and not self.gathering:
                    self._gather()
                else:  # an fsync in flight (it may not cover us), or a gatherer
                    sleeper = _Sleeper(position)
                    self.sleepers.append(sleeper)
                    cond.release()
                    mine = False
                    try:
                        sleeper.lock.acquire()
                    finally:
                        if not sleeper.covered:  # woken to look again (or interrupted)
                            cond.acquire()
                            mine = True
                            if sleeper in self.sleepers:
                                self.sleepers.remove(sleeper)
                    if sleeper.covered:
                        return  # the syncer counted us out of ``waiting``
        finally:
            if mine:
                self.waiting -= 1
                if self.sleepers and not self.syncing and not self.gathering:
                    self.sleepers.pop(0).lock.release()  # it gathers the next group
                cond.release()

    def _gather(self) -> None:
        """(sync_cond held.) Wait a little for the waiters of a typical group, then fsync
        unless a waiter who completed the group did."""
        self.gathering = True
        try:
            deadline = time.monotonic() + GATHER_S
            while not self.syncing and self.waiting < self.last_group:
                left = min(deadline - time.monotonic(), GATHER_IDLE_S)
                if left <= 0:
                    break
                seen = self.waiting
                self.arrive_cond.wait(left)  # notified only when the group is complete
                if self.waiting == seen:
                    break  # nobody came for a while: do not wait out the whole window
        finally:
            self.gathering = False
        if not self.syncing:
            self._fsync_group()

    def _fsync_group(self) -> None:
        """(sync_cond held, no fsync in flight.) fdatasync everything written so far, write
        the listeners' durable batches, wake the waiters covered, and return with sync_cond
        held."""
        cond = self.sync_cond
        self.syncing = True
        low = self.synced
        cond.release()
        try:
            with self.write_mutex:  # fd and position of the same file, together
                if self.closed:
                    raise StorageError(f"WAL stream {self.dir} is closed")
                fd, target = self.fd, self.written
                records = self.records_written - self.records_synced
                self.records_synced = self.records_written
            self._fsync(fd)
            if records:
                self.group_records.observe(records)
        except BaseException as e:
            # write_mutex first (the order _rotate and close take them): every record already
            # written to the failed file is lost, also those written while the fsync ran (the
            # kernel may have dropped their pages; a later fsync "succeeding" proves nothing),
            # and any later append sees ``poisoned`` and starts a new file
            with self.write_mutex:
                cond.acquire()
                self.syncing = False
                if isinstance(e, StorageError) and not self.closed:
                    end = target
                    if fd == self.fd:  # (a rotation since: the current file is not the failed
                        end = self.written  # one, and the rotation marked the rest lost)
                        self.poisoned = e
                        self.poison_end = end
                    self.lost.append((low, end))
            self._close_retired()
            wake, self.sleepers = self.sleepers, []  # everyone looks again (and raises)
            for s in wake:
                s.lock.release()
            raise
        cond.acquire()
        self.syncing = False
        self.synced = max(self.synced, target)
        # the next group: every thread in sync() now, also those that came during the fsync
        # (counting only those it served would stick at n-1 once one thread came late)
        self.last_group = self.waiting
        self._close_retired()
        covered: list[_Sleeper] = []
        lost: list[_Sleeper] = []
        rest: list[_Sleeper] = []
        for s in self.sleepers:
            if self.durable(s.position):
                covered.append(s)
            else:
                (lost if s.position <= self.synced else rest).append(s)
        self.sleepers = rest  # arrived during the fsync: the caller hands on to one of them
        self.waiting -= len(covered)
        cond.release()
        try:
            for log in list(self.listeners):
                log.after_wal_sync()
        finally:
            for s in covered:
                s.covered = True
                s.lock.release()
            for s in lost:
                s.lock.release()
            cond.acquire()

    def files_before(self, boundary: int) -> list[str]:
        """WAL files that end at or before stream position ``boundary``."""
        limit = os.path.join(self.dir, f"{boundary:020d}{SUFFIX}")
        return [p for p in stream_files(self.dir) if p < limit]

    def close(self, delete: bool) -> None:
        if self.closed:
            return
        with self.write_mutex:  # no append or fsync starts on the fd once it is closed
            self.closed = True
            preparer = self.preparer
        if preparer is not None:
            preparer.join()  # (it stops at its next chunk and removes its file)
        if self.prepared is not None:
            try:
                os.unlink(self.prepared[0])
            except OSError:
                pass
            self.prepared = None
        with self.sync_cond:
            self._close_retired()
        os.close(self.fd)
        if delete:
            guard.remove_tree(self.data_dir, self.dir)
        os.close(self.lock_fd)
