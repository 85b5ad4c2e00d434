"""The aborted-transaction index of a segment: ``<base>.txnindex`` beside its ``.log``.

One 40-byte entry per transaction whose ABORT marker is in the segment (docs/FORMAT.md):
``producer_id q, first_offset q, last_offset q, lso q`` then a CRC32C of those 32 bytes
``I`` and 4 reserved zero bytes. ``first_offset`` is the transaction's first offset in the
partition (maybe in an earlier segment), ``last_offset`` its marker's offset, ``lso`` the last
stable offset once it ended. A read_committed read of offsets from ``o`` on consults the
entries of the segment holding ``o`` and of every later one (Kafka's fetch does the same).

The file exists only for a segment with an aborted transaction. Entries are appended in
marker order by the writer that takes the next producer-state snapshot, just before it, and
fsynced (engine.txn.hook); aborts after the newest snapshot come from the log's tail. A torn
last entry (a crash mid-append) is cut by a writer and ignored by a reader; an entry whose
CRC does not match, or one out of order, is damage: reported (``DamagedMetadata``), never
used. ``Present`` says which segments have the file without an open per segment.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterable
from typing import NamedTuple

from ..errors import DamagedMetadata, os_error, plural
from ..format.crc import crc32c
from ..fs import guard
from . import filenames

ENTRY = struct.Struct("<qqqqII")
ENTRY_SIZE = ENTRY.size  # 40
_BODY = struct.Struct("<qqqq")
MAX_ENTRIES = 1 << 24  # a segment holds at most one marker per batch; this bounds a read


class AbortedTxn(NamedTuple):
    """A transaction an ABORT marker ended: its data lies in ``[first_offset, last_offset]``
    (``last_offset`` is the marker's); ``last_stable_offset`` is the LSO once it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


RACY_NS = 100_000_000  # a listing this close to the dir's mtime may miss a file made in that tick


class Present:
    """Which segments of a partition dir have a ``.txnindex``: one listdir, kept while the
    dir's inode and mtime stay the same, so a read_committed read does not try to open the
    file of every later segment. As git treats a racy index, a listing taken within
    ``RACY_NS`` of the mtime is not kept (a file made in the same clock tick would leave the
    mtime unchanged); a stale answer costs a listdir, never a missed file."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self._stamp: tuple[int, int] | None = None
        self._bases: frozenset[int] = frozenset()

    def bases(self) -> frozenset[int]:
        st = os.stat(self.dir)
        stamp = (st.st_ino, st.st_mtime_ns)
        if stamp == self._stamp:
            return self._bases
        found = frozenset(p[0] for p in map(filenames.parse, os.listdir(self.dir))
                          if p is not None and p[1] == filenames.TXNINDEX)
        self._bases = found
        self._stamp = stamp if time.time_ns() - st.st_mtime_ns > RACY_NS else None
        return found


def encode(e: AbortedTxn) -> bytes:
    body = _BODY.pack(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
    return body + struct.pack("<II", crc32c(body), 0)


def read_entries(path: str, base_offset: int, next_offset: int | None = None
                 ) -> tuple[list[AbortedTxn], int]:
    """The entries of ``path`` (none when the file does not exist) and the byte length they
    take (a torn tail after it is ignored). Each entry is checked: its CRC, ``producer_id``
    >= 0, ``first_offset <= last_offset``, ``last_offset`` inside the segment (from
    ``base_offset``, below ``next_offset`` when known), markers in increasing order."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return [], 0
    except OSError as e:
        raise os_error(e, "open", path) from e
    try:
        size = os.fstat(fd).st_size
        whole = size - size % ENTRY_SIZE
        if whole // ENTRY_SIZE > MAX_ENTRIES:
            raise DamagedMetadata(f"{path} is {plural(size, 'byte')}: more entries than any segment can "
                                  "have; delete it and reopen the partition to rebuild it")
        data = os.pread(fd, whole, 0)
    finally:
        os.close(fd)
    out: list[AbortedTxn] = []
    last = base_offset - 1
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        pid, first, lastoff, lso, crc, reserved = ENTRY.unpack_from(data, pos)
        problem = None
        if crc32c(data[pos: pos + 32]) != crc or reserved:
            problem = "its CRC does not match"
        elif pid < 0 or first < 0 or first > lastoff or lso < 0:
            problem = "its fields are out of range"
        elif lastoff <= last or (next_offset is not None and lastoff >= next_offset):
            problem = (f"its marker offset {lastoff} is not after the previous one and inside "
                       "the segment")
        if problem:
            raise DamagedMetadata(f"{path}: entry at byte {pos}: {problem}; delete the file "
                                  "and reopen the partition to rebuild it from the log")
        out.append(AbortedTxn(pid, first, lastoff, lso))
        last = lastoff
    return out, len(out) * ENTRY_SIZE


class TxnIndex:
    """The ``.txnindex`` of one segment, for a writer: load, append, sync, cut."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries, length = read_entries(path, base_offset)
        self.fd = -1
        if os.path.lexists(path) and os.lstat(path).st_size != length:
            self._open()
            os.ftruncate(self.fd, length)  # a torn last entry: the append a crash cut short
        self.dirty = False

    def _open(self) -> None:
        if self.fd < 0:
            self.fd = guard.open_file(self.path, os.O_RDWR | os.O_CREAT)

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            return  # (already there: a marker seen again while catching up)
        self._open()
        try:
            os.pwrite(self.fd, encode(entry), len(self.entries) * ENTRY_SIZE)
        except OSError as e:
            raise os_error(e, "write", self.path) from e
        self.entries.append(entry)
        self.dirty = True

    def sync(self) -> None:
        if self.dirty and self.fd >= 0:
            try:
                os.fsync(self.fd)
            except OSError as e:
                raise os_error(e, "fsync", self.path) from e
            self.dirty = False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def write_entries(directory: str, base_offset: int, entries: Iterable[AbortedTxn]) -> None:
    """Append ``entries`` to the ``.txnindex`` of the segment at ``base_offset`` in
    ``directory`` (made when missing), fsynced."""
    ix = TxnIndex(filenames.path(directory, base_offset, filenames.TXNINDEX), base_offset)
    try:
        for e in entries:
            ix.append(e)
        ix.sync()
    finally:
        ix.close()


def overlapping(entries: list[AbortedTxn], start: int, end: int) -> dict[int, list[tuple[int, int]]]:
    """``{producer id: [(first, last)...]}`` of the aborted transactions with data in offsets
    ``[start, end)``: what a read_committed read of that range leaves out."""
    out: dict[int, list[tuple[int, int]]] = {}
    for e in entries:
        if e.last_offset >= start and e.first_offset < end:
            out.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))
    return out
