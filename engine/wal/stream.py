"""Write-ahead log: one stream per writing process, group commit, scan/verify, replay.

Layout: ``wal/<stream>/stream.lock`` (flock held while the process lives) and WAL files named
by the stream position of their first byte (20 digits, ``.wal``). A record is

    0  length  uint32   bytes of payload
    4  type    uint8    1 = record batch
    5  reserved 3 bytes (0)
    8  crc     uint32   CRC32C of bytes [4, 8) and the payload
    12 payload, then zero padding to a multiple of 8

A batch payload is ``topic id (16 bytes) | partition uint32 | write time ns uint64 |
name length uint16 | topic name | batch bytes`` — the batch exactly as it goes to the segment,
offsets assigned. A zero length ends a file (zero-filled or preallocated tails are never
records); a record that runs past the end or fails its CRC is a torn tail.

A busy stream whose fsyncs are small writes into zero-filled files prepared ahead by a
background thread (``next.tmp`` until a rotation renames it): overwriting blocks that are
already allocated and inside the file's size, an fdatasync has no metadata to commit, which on
ext4 makes it about a third cheaper. (For large fsyncs the extra zeros cost more than that.)
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptRecordError, StorageError
from ..format import records
from ..storage import files
from ..storage.locks import open_lock_file, try_lock

SUFFIX = ".wal"
LOCK = "stream.lock"
RECOVERY_LOCK = "recovery.lock"
FRAME = struct.Struct("<IB3xI")
FRAME_SIZE = FRAME.size  # 12
TYPE_BATCH = 1
PAYLOAD = struct.Struct("<16sIQH")
MAX_RECORD = 1 << 31
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


_TYPE_BYTES = bytes([TYPE_BATCH, 0, 0, 0])  # bytes [4, 8) of a batch record's frame
_ZEROS = bytes(8)


def encode_batch_record(topic_id: bytes, partition: int, name: str, batch: bytes | bytearray
                        ) -> bytes:
    nb = name.encode()
    crc32c = records.crc32c
    head = PAYLOAD.pack(topic_id, partition, time.time_ns(), len(nb)) + nb
    crc = crc32c(batch, crc32c(head, crc32c(_TYPE_BYTES)))
    length = len(head) + len(batch)
    return b"".join((FRAME.pack(length, TYPE_BATCH, crc), head, batch,
                     _ZEROS[:-(FRAME_SIZE + length) & 7]))


@dataclass
class WalRecord:
    path: str
    position: int
    type: int
    topic_id: bytes
    partition: int
    write_ns: int
    topic: str
    batch: memoryview
    batch_position: int  # where the batch bytes start in the file

    @property
    def size(self) -> int:
        n = FRAME_SIZE + PAYLOAD.size + len(self.topic.encode()) + len(self.batch)
        return n + (-n & 7)


class WalTail(Exception):
    """Where a WAL file's valid records end: ``zero`` (clean zero fill), ``incomplete`` (a
    record that runs past the end: a write in flight or torn by a crash) or damage."""

    def __init__(self, position: int, reason: str, zero: bool, incomplete: bool = False) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason
        self.zero = zero
        self.incomplete = incomplete


def _zeros_from(data: bytes, start: int) -> bool:
    """Is every byte from ``start`` on zero? (``count`` runs in C; ``any`` over a 64 MiB
    zero-filled tail takes most of a second.)"""
    return data.count(0, start) == len(data) - start


def scan_file(path: str) -> Iterator[WalRecord]:
    """Records of one WAL file; raises WalTail where the valid records end (not at EOF)."""
    with open(path, "rb") as f:
        data = f.read()
    mv = memoryview(data)
    pos = 0
    size = len(data)
    while pos < size:
        if pos + FRAME_SIZE > size:
            raise WalTail(pos, f"{size - pos} trailing bytes, less than a record frame",
                          not any(data[pos:]), incomplete=True)
        length, rtype, crc = FRAME.unpack_from(data, pos)
        if length == 0:
            if not _zeros_from(data, pos):
                raise WalTail(pos, "zero length followed by non-zero bytes", False)
            return
        end = pos + FRAME_SIZE + length
        if length > MAX_RECORD:
            raise WalTail(pos, f"impossible record length {length}", False)
        if end > size:
            raise WalTail(pos, f"record of {length} bytes runs past the end of the file", False,
                          incomplete=True)
        payload = mv[pos + FRAME_SIZE:end]
        if records.crc32c(payload, records.crc32c(data[pos + 4:pos + 8])) != crc:
            # followed by nothing but zeros: a write in flight or torn by a crash in a
            # zero-filled file (the same as a record running past the end of an unfilled one)
            raise WalTail(pos, "CRC mismatch", False, incomplete=_zeros_from(data, end))
        if rtype != TYPE_BATCH or length < PAYLOAD.size:
            raise WalTail(pos, f"unknown record type {rtype}", False)
        pad_end = end + (-(FRAME_SIZE + length) & 7)
        if any(data[end:pad_end]):
            raise WalTail(pos, "non-zero padding after the record", False)
        tid, part, wns, nlen = PAYLOAD.unpack_from(payload, 0)
        name = bytes(payload[PAYLOAD.size:PAYLOAD.size + nlen]).decode("utf-8", "replace")
        yield WalRecord(path, pos, rtype, tid, part, wns, name,
                        payload[PAYLOAD.size + nlen:], pos + FRAME_SIZE + PAYLOAD.size + nlen)
        pos = pad_end


def pid_alive(stream: str) -> bool:
    pid = stream.partition("-")[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


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

    def __init__(self, data_dir: str, segment_bytes: int) -> None:
        self.root = os.path.join(data_dir, "wal")
        if not os.path.isdir(self.root):
            os.makedirs(self.root, exist_ok=True)
            files.fsync_dir(data_dir)
        self.id = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.dir = os.path.join(self.root, self.id)
        os.makedirs(self.dir)
        self.lock_fd = open_lock_file(os.path.join(self.dir, LOCK))
        if not try_lock(self.lock_fd):
            raise StorageError(f"cannot lock new WAL stream {self.dir}")
        files.fsync_dir(self.root)
        self.segment_bytes = segment_bytes
        self.write_mutex = threading.Lock()
        self.sync_cond = threading.Condition(threading.Lock())  # guards the sync state
        self.arrive_cond = threading.Condition(self.sync_cond._lock)  # the gatherer waits here
        self.syncing = False
        self.gathering = False
        # threads waiting for an fsync, each on its own lock: the syncer wakes exactly the
        # ones it covered (they then return without touching sync_cond) and at most one more
        self.sleepers: list[_Sleeper] = []
        # partition logs with batches waiting for an fsync: the syncer writes them to their
        # segments before it wakes their threads (see PartitionLog.after_wal_sync)
        self.listeners: set = set()
        self.written = 0  # stream position after the last appended byte
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
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(f"cannot create WAL file {path}: {e.strerror} "
                               f"(errno {e.errno})") from e
        try:
            files.fsync_dir(self.dir)
        except OSError as e:
            os.close(fd)
            os.unlink(path)
            raise StorageError(f"cannot fsync WAL dir {self.dir}: {e.strerror}") from e
        self.fd = fd
        self.file_start = start
        self.zeroed = zeroed
        self.file_fsyncs = self.fsyncs  # fsyncs before this file's first

    def append(self, record: bytes) -> int:
        """Write a framed record; returns the stream position its durability needs."""
        with self.write_mutex:
            if self.closed:  # its fd number may belong to another file by now
                raise StorageError(f"WAL stream {self.dir} is closed")
            pos = self.written - self.file_start
            if (self.poisoned is not None or pos >= self.segment_bytes
                    or (pos and self.prepared is not None and pos + len(record) > self.zeroed)):
                self._rotate()  # (a prepared file waits: take it once this one is used up)
                pos = 0
            try:
                n = os.pwrite(self.fd, record, pos)
                if n != len(record):
                    raise OSError(28, "short write")
            except OSError as e:
                # leave no partial record behind: cut the file back to where it was
                try:
                    os.ftruncate(self.fd, pos)
                    self.zeroed = min(self.zeroed, pos)
                except OSError:
                    pass
                raise StorageError(f"cannot write WAL {self.dir}: {e.strerror or e} "
                                   f"(errno {e.errno})") from e
            self.written += len(record)
            pos += len(record)
            if (self.preparer is None and self.prepared is None
                    and pos >= max(PREPARE_AFTER, self.zeroed // 2)
                    and pos <= PREPARE_MAX_BYTES_PER_FSYNC * (self.fsyncs - self.file_fsyncs)
                    and self.prepare_skip != self.file_start):
                self._start_preparing()
            return self.written

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
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
        except OSError:
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
            os.fdatasync(fd)
            self.fsyncs += 1
        except OSError as e:
            raise StorageError(f"cannot fsync WAL {self.dir}: {e.strerror} (errno {e.errno})") from e

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
            self._fsync(fd)
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
            shutil.rmtree(self.dir, ignore_errors=True)
        os.close(self.lock_fd)


def dead_streams(data_dir: str, own: str | None = None) -> list[tuple[str, int]]:
    """``(stream_dir, lock_fd)`` for streams whose lock could be taken: their process is gone.
    The caller holds those locks until it closes the fds."""
    root = os.path.join(data_dir, "wal")
    out = []
    if not os.path.isdir(root):
        return out
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if name == own or not os.path.isdir(d) or name == RECOVERY_LOCK:
            continue
        fd = open_lock_file(os.path.join(d, LOCK))  # (re)created if a crash removed it
        if not try_lock(fd):
            os.close(fd)  # its process is alive
        elif not stream_files(d):
            shutil.rmtree(d, ignore_errors=True)  # a half-made or half-removed stream
            os.close(fd)
        else:
            out.append((d, fd))
    return out


def all_streams(data_dir: str) -> list[str]:
    root = os.path.join(data_dir, "wal")
    if not os.path.isdir(root):
        return []
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if os.path.isdir(os.path.join(root, n))]


def check_record_batch(rec: WalRecord) -> None:
    """The batch inside a WAL record must itself be whole and CRC-valid."""
    from ..format.records import check_crc, read_header

    h = read_header(rec.batch, 0, f" in WAL {rec.path} at position {rec.position}")
    if h.size != len(rec.batch):
        raise CorruptRecordError(f"WAL record at {rec.path}:{rec.position} holds a batch of "
                                 f"{len(rec.batch)} bytes, its header says {h.size}")
    check_crc(rec.batch, 0, h, f" in WAL {rec.path} at position {rec.position}")


def merge_by_offset(recs: list[tuple]) -> list[tuple[int, int, int, int, bytes]]:
    """``(write_ns, base, count, last_delta, max_ts, bytes)`` from any number of streams to
    ``(base, count, last_delta, max_ts, bytes)`` in offset order.

    Two records can claim the same offsets only when a writer died after logging a batch it
    never acknowledged and a later writer reused the offsets; the later write wins.
    """
    chosen: list[tuple] = []
    cluster: list[tuple] = []
    cluster_end = -1
    # clusters of records whose offset ranges overlap; only inside one does anything compete
    for r in sorted(recs, key=lambda r: (r[1], -r[0])) + [None]:
        if r is not None and r[1] <= cluster_end:
            cluster.append(r)
            cluster_end = max(cluster_end, r[1] + r[3])
            continue
        if len(cluster) == 1:
            chosen.append(cluster[0])
        elif cluster:
            taken: list[tuple[int, int]] = []
            for c in sorted(cluster, key=lambda c: -c[0]):  # later write wins
                lo, hi = c[1], c[1] + c[3]
                if not any(lo <= b and a <= hi for a, b in taken):
                    taken.append((lo, hi))
                    chosen.append(c)
        if r is not None:
            cluster = [r]
            cluster_end = r[1] + r[3]
    chosen.sort(key=lambda r: r[1])
    return [(r[1], r[2], r[3], r[4], r[5]) for r in chosen]


def stream_info(stream_dir: str) -> dict:
    """One stream: files, bytes, records, whether its process looks alive.

    Liveness here comes from the pid in the stream's name, not from probing its lock: a probe
    would briefly make a dead stream look live to a process opening the data dir.
    """
    fs = stream_files(stream_dir)
    live = pid_alive(os.path.basename(stream_dir))
    records = 0
    used = 0  # up to where the records end (a zero-filled file is longer)
    parts: set[tuple[str, int]] = set()
    torn = None
    for f in fs:
        try:
            for rec in scan_file(f):
                records += 1
                used += rec.size
                parts.add((rec.topic, rec.partition))
        except WalTail as t:
            if not t.zero and not (live and f == fs[-1] and not settled_findings(
                    f, [{"position": t.position, "message": t.reason}])):
                torn = {"file": f, "position": t.position, "reason": t.reason}
        except FileNotFoundError:
            pass  # deleted by a checkpoint meanwhile
    return {"stream": os.path.basename(stream_dir), "path": stream_dir, "live": live,
            "files": len(fs), "bytes": used, "records": records,
            "partitions": sorted(f"{t}-{p}" for t, p in parts), "torn_tail": torn}


SETTLE_TRIES = 10  # re-reads of a live stream's current file before a finding counts
SETTLE_S = 0.05  # ... this far apart (a stalled writer is not damage)


def file_findings(path: str) -> list[dict] | None:
    """The problems of one WAL file (framing, CRC, the batch inside); None once it is gone."""
    try:
        return [{"file": path, "position": r["position"], "message": r["error"]}
                for r in inspect_file(path) if "error" in r]
    except FileNotFoundError:
        return None


def settled_findings(path: str, found: list[dict]) -> list[dict]:
    """(The current file of a live stream.) The findings that stay put while the file is read
    again: a write in flight (a record not all there yet, or zeros before bytes a later write
    put further on) is gone or has moved on within microseconds; damage stays where it is."""
    for _ in range(SETTLE_TRIES):
        if not found:
            break
        time.sleep(SETTLE_S)
        again = file_findings(path)
        if again is None:
            return []
        seen = {(x["position"], x["message"]) for x in found}
        found = [x for x in again if (x["position"], x["message"]) in seen]
    return found


def verify_stream(stream_dir: str, live: bool) -> list[dict]:
    """Every problem in a stream's files. Only the current file of a live stream can hold a
    write in flight (a rotated file was fdatasynced and is never written again), so only its
    findings must first stay put (``settled_findings``)."""
    fs = stream_files(stream_dir)
    out = []
    for f in fs:
        found = file_findings(f)
        if found and live and f == fs[-1]:
            found = settled_findings(f, found)
        out += found or []
    return out


def inspect_file(path: str) -> Iterator[dict]:
    """One row per WAL record (and a final row for a torn tail)."""
    from ..format.records import read_header

    try:
        for rec in scan_file(path):
            row = {"position": rec.position, "topic": rec.topic, "partition": rec.partition,
                   "topic_id": rec.topic_id.hex(), "write_time_ns": rec.write_ns,
                   "bytes": rec.size, "crc_ok": True}
            try:
                h = read_header(rec.batch, 0)
                check_record_batch(rec)
                row |= {"base_offset": h.base_offset, "last_offset": h.last_offset,
                        "count": h.record_count}
            except CorruptRecordError as e:
                row |= {"crc_ok": False, "error": str(e)}
            row["_record"] = rec
            yield row
    except WalTail as t:
        if not t.zero:
            yield {"position": t.position, "error": t.reason, "incomplete": t.incomplete}


def torn_tail(path: str) -> int | None:
    """Where the valid records of a WAL file end, when non-zero bytes follow them."""
    try:
        for _ in scan_file(path):
            pass
    except WalTail as t:
        return None if t.zero else t.position
    return None


def truncate_torn_tail(path: str) -> int | None:
    """Cut a file of a dead stream where its valid records end; returns the cut position."""
    pos = torn_tail(path)
    if pos is not None:
        with open(path, "r+b") as f:
            f.truncate(pos)
            os.fsync(f.fileno())
    return pos
