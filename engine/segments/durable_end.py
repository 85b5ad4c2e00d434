"""``.end``: the partition's durable end, published for readers in every process.

Large appends are written once, straight to the active segment, so its file holds bytes
before their fdatasync; a reader must not take the file size as the end. The writer publishes
(active segment base, position, next offset) here after each fsync and before it
acknowledges; readers never read past it. The file is memory-mapped by every process that
opens the partition (a read costs no syscall), as SQLite's ``-shm``: shared memory through
the page cache, never fsynced, never trusted for recovery.

Layout (docs/FORMAT.md): two copies of a 64-byte record, written one after the other, so a
writer killed in the middle of one leaves the other whole (SQLite's wal-index header does the
same). Each record: magic, base, position, next offset, the boot id it was written under, a
publication count, CRC32C of the bytes before it.

A record written under another boot id is ignored: after a reboot the page cache started
empty, so the files hold what reached the disk and their size is the end again until a writer
publishes. A writer rebuilds the record from the files when it takes the partition's flock
(engine.segments.segment_set), so one behind the files (a writer killed between its fsync and
its publication) is caught up, and one is never ahead of what was fsynced.
"""

from __future__ import annotations

import mmap
import os
import struct

from ..errors import StorageError
from ..format import crc
from ..fs import guard
from . import filenames

NAME = filenames.DURABLE_END
RECORD = struct.Struct("<8sQQQ16sQI4x")  # magic, base, position, next, boot, count, crc
MAGIC = b"RVNEND1\0"
SIZE = 2 * RECORD.size
CRC_AT = RECORD.size - 8  # the CRC covers the bytes before it
TRIES = 64  # torn reads in a row (a writer mid-copy) before the last good one is kept

Published = tuple[int, int, int]  # (segment base, position, next offset)

_boot: bytes | None = None


def boot_id() -> bytes:
    """This boot's id (Linux: /proc/sys/kernel/random/boot_id), 16 bytes; zeros elsewhere."""
    global _boot
    if _boot is None:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as f:
                _boot = bytes.fromhex(f.read().strip().replace(b"-", b"").decode())[:16]
        except (OSError, ValueError):
            _boot = b""
        _boot = _boot.ljust(16, b"\0")
    return _boot


def encode(base: int, position: int, next_offset: int, count: int) -> bytes:
    rec = RECORD.pack(MAGIC, base, position, next_offset, boot_id(), count, 0)
    return rec[:CRC_AT] + struct.pack("<I4x", crc.crc32c(rec[:CRC_AT]))


def decode(buf: bytes | mmap.mmap, at: int) -> Published | None | bool:
    """The record at ``at``: its (base, position, next); None when it was never written or
    was written under another boot; False when torn (a writer mid-copy, or killed in it)."""
    magic, base, pos, nxt, boot, _, check = RECORD.unpack_from(buf, at)
    if magic != MAGIC:
        return None if magic == bytes(8) else False
    if crc.crc32c(buf[at:at + CRC_AT]) != check:
        return False
    if boot != boot_id():
        return None
    return base, pos, nxt


class DurableEnd:
    """The mapped ``.end`` of one partition directory; ``writable``: this process may publish
    (it creates the file); a reader maps it once it exists."""

    def __init__(self, directory: str, writable: bool) -> None:
        self.path = os.path.join(directory, NAME)
        self.writable = writable
        self.mm: mmap.mmap | None = None
        self.last: Published | None = None  # the last good record read or published
        self.count = 0
        # the first copy's bytes as last decoded, and what they said: most reads find the
        # same bytes again and need no CRC
        self._raw = b""
        self._got: Published | None = None

    def _map(self) -> bool:
        writable = self.writable
        try:
            try:
                fd = guard.open_file(self.path, os.O_RDWR | os.O_CREAT) if writable else \
                    os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
            except PermissionError:
                if not writable:
                    raise
                writable = False  # (a reader that may not write here: it only reads it)
                fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size < SIZE:
                if not writable:
                    return False  # (being created: the next look maps it)
                os.ftruncate(fd, SIZE)
            self.mm = mmap.mmap(fd, SIZE, access=mmap.ACCESS_WRITE if writable
                                else mmap.ACCESS_READ)
        finally:
            os.close(fd)
        return True

    def read(self) -> Published | None:
        """What is published: (active segment base, position, next offset); None when
        nothing valid is (no file yet, or written under another boot: the files are the
        truth). A copy torn by a writer mid-update is read again, then its twin."""
        mm = self.mm
        if mm is None:
            if not self._map():
                return None
            mm = self.mm
        for _ in range(TRIES):
            raw = mm[:RECORD.size]  # type: ignore[index]
            if raw == self._raw:
                return self._got
            got = decode(raw, 0)
            if got is not False:
                self._raw, self._got = raw, got  # type: ignore[assignment]
            else:
                got = decode(mm, RECORD.size)  # type: ignore[arg-type]
            if got is not False:
                if got is not None:
                    self.last = got  # type: ignore[assignment]
                return got  # type: ignore[return-value]
        return self.last  # both torn over and over: a writer killed mid-copy; keep the last

    def publish(self, base: int, position: int, next_offset: int) -> None:
        """(flock held, the bytes below ``position`` durable.) Publish the end: the first
        copy, then its twin (a kill between them leaves one whole)."""
        if self.last == (base, position, next_offset) and self.mm is not None:
            return
        if self.mm is None and not self._map():
            raise StorageError(f"{self.path} could not be made: its partition is gone (the "
                               "topic deleted?)")
        self.count += 1
        rec = encode(base, position, next_offset, self.count)
        mm = self.mm
        try:
            mm[0:RECORD.size] = rec  # type: ignore[index]
            mm[RECORD.size:SIZE] = rec  # type: ignore[index]
        except TypeError:  # (mapped read-only: this process may not write the file)
            raise StorageError(f"{self.path} cannot be written by this process; give it "
                               "the data dir's owner and mode") from None
        self.last = self._got = (base, position, next_offset)
        self._raw = rec

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass
            self.mm = None


def visible(pub: Published | None, base: int) -> int | None:
    """How many bytes of the segment at ``base`` a reader may read by the publication
    ``pub``: all of a sealed one (fsynced when it was sealed: None, its file size), up to the
    position in the active one, nothing of one newer than the publication (just rolled; a
    reader keeps what its index vouches for). None too when nothing is published."""
    if pub is None or pub[0] > base:
        return None
    return pub[1] if pub[0] == base else 0


def read_published(directory: str) -> Published | None:
    """The published end of a partition directory, read once (the Spark source's driver)."""
    try:
        fd = os.open(os.path.join(directory, NAME), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        buf = os.pread(fd, SIZE, 0)
    finally:
        os.close(fd)
    if len(buf) < SIZE:
        return None
    for at in (0, RECORD.size):
        got = decode(buf, at)
        if got is not False:
            return got  # type: ignore[return-value]
    return None
