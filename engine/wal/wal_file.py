"""The WAL's file format: framed records, each holding one batch of one partition.

A WAL file is named by the stream position of its first byte (20 digits, ``.wal``). A record is

    0  length  uint32   bytes of payload
    4  type    uint8    1 = record batch
    5  reserved 3 bytes (0)
    8  crc     uint32   CRC32C of bytes [4, 8) and the payload
    12 payload, then zero padding to a multiple of 8

A batch payload is ``topic id (16 bytes) | partition uint32 | write time ns uint64 |
name length uint16 | topic name | batch bytes`` — the batch exactly as it goes to the segment,
offsets assigned. A zero length ends a file (zero-filled or preallocated tails are never
records); a record that runs past the end or fails its CRC is a torn tail. A record whose frame
is intact but whose payload is not a valid batch record (a name longer than the record, a
partition out of range, a name not UTF-8, a batch header out of range or of the wrong size)
is damage (``WalTail.inner``): no crash writes that.

``WalTail`` semantics, which replay and ``rivven wal list|verify|recover`` rely on:
``zero`` — the records end in a clean zero fill (not a problem); ``incomplete`` — the file
ends inside a record, or a record fails its CRC with only zeros after it (a write in flight or
cut short by a crash, in a plain or a zero-filled file); otherwise damage. Files are read a
chunk at a time, holes of sparse files are skipped unread.
"""

from __future__ import annotations

import errno
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptRecordError, plural
from ..format import crc
from ..format.records import CRC_FROM, HEADER_SIZE, BatchHeader, check_crc, read_header
from ..storage.topics import MAX_PARTITIONS

SUFFIX = ".wal"
FRAME = struct.Struct("<IB3xI")
FRAME_SIZE = FRAME.size  # 12
TYPE_BATCH = 1
PAYLOAD = struct.Struct("<16sIQH")
MAX_RECORD = 1 << 31
_TYPE_BYTES = bytes([TYPE_BATCH, 0, 0, 0])  # bytes [4, 8) of a batch record's frame
_ZEROS = bytes(8)


def encode_batch_record(topic_id: bytes, partition: int, name: str, batch: bytes | bytearray
                        ) -> bytes:
    return b"".join(batch_record_parts(topic_id, partition, name, batch))


def batch_record_parts(topic_id: bytes, partition: int, name: str, batch: bytes | bytearray
                       ) -> list:
    """A batch record as the buffers to write one after the other (``os.pwritev``: the
    batch is not copied)."""
    nb = name.encode()
    crc32c = crc.crc32c
    head = PAYLOAD.pack(topic_id, partition, time.time_ns(), len(nb)) + nb
    value = crc32c(batch, crc32c(head, crc32c(_TYPE_BYTES)))
    length = len(head) + len(batch)
    return [FRAME.pack(length, TYPE_BATCH, value), head, batch,
            _ZEROS[:-(FRAME_SIZE + length) & 7]]


@dataclass
class WalRecord:
    path: str
    position: int
    type: int
    topic_id: bytes
    partition: int
    write_ns: int
    topic: str
    header: BatchHeader  # the batch's header, checked (read_header) and matching its size
    batch_position: int  # where the batch bytes start in the file
    batch_length: int
    loaded: memoryview | None = None  # the batch bytes when read with the record

    @property
    def batch(self) -> memoryview:
        """The batch bytes (read from the file now when the record was too large to hold)."""
        if self.loaded is None:
            with open(self.path, "rb") as f:
                f.seek(self.batch_position)
                data = f.read(self.batch_length)
            if len(data) != self.batch_length:
                raise CorruptRecordError(f"WAL {self.path} shrank under a read of its record at "
                                         f"position {self.position}", self.path, self.position)
            return memoryview(data)
        return self.loaded

    @property
    def size(self) -> int:
        n = self.batch_position - self.position + self.batch_length
        return n + (-n & 7)


class WalTail(Exception):
    """Where a WAL file's valid records end: ``zero`` (clean zero fill), ``incomplete`` (a
    record that runs past the end: a write in flight or torn by a crash) or damage. Damage
    with ``inner`` is a record whose frame (CRC included) is intact but whose payload is not a
    valid batch record: it was written like this, no crash tears a record that way, and replay
    refuses to go past it (``rivven wal recover`` cuts it)."""

    def __init__(self, position: int, reason: str, zero: bool, incomplete: bool = False,
                 inner: bool = False) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason
        self.zero = zero
        self.incomplete = incomplete
        self.inner = inner


READ_CHUNK = 1 << 20  # bytes read at a time
MAX_IN_MEMORY = 16 << 20  # a larger record's CRC is computed piece by piece, its batch read
# only when asked for (WalRecord.batch): memory stays flat whatever a length field claims


class _Reader:
    """Bytes of one file at positions, through one buffer of READ_CHUNK (or one record)."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.start = 0
        self.buf = memoryview(b"")

    def get(self, pos: int, n: int) -> memoryview:
        """Bytes [pos, pos + n) (fewer only at the end of the file)."""
        off = pos - self.start
        if 0 <= off and off + n <= len(self.buf):
            return self.buf[off:off + n]
        want = min(max(n, READ_CHUNK), self.size - pos)
        self.buf = memoryview(os.pread(self.fd, want, pos))
        self.start = pos
        return self.buf[:n]


def _zeros_from(fd: int, start: int, end: int) -> bool:
    """Is every byte in [start, end) zero? Holes of a sparse file are skipped unread
    (SEEK_DATA/SEEK_HOLE); data is read a chunk at a time (``count`` runs in C: ``any`` over a
    64 MiB zero-filled tail takes most of a second)."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return True  # nothing but holes from ``pos`` to the end of the file
            data, hole = pos, end  # (no SEEK_DATA here: read everything)
        pos = data
        while pos < min(hole, end):
            chunk = os.pread(fd, min(READ_CHUNK, min(hole, end) - pos), pos)
            if not chunk:
                return True
            if chunk.count(0) != len(chunk):
                return False
            pos += len(chunk)
        pos = max(pos, hole)
    return True


def _crc_range(fd: int, start: int, end: int, value: int) -> int:
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(READ_CHUNK, end - pos), pos)
        if not chunk:
            break
        value = crc.crc32c(chunk, value)
        pos += len(chunk)
    return value


def frame_crc(fd: int, pos: int, length: int) -> int:
    """The CRC a record frame at ``pos`` with a payload of ``length`` bytes should store."""
    return _crc_range(fd, pos + FRAME_SIZE, pos + FRAME_SIZE + length,
                      crc.crc32c(os.pread(fd, 4, pos + 4)))


def scan_file(path: str, check_batches: bool = False) -> Iterator[WalRecord]:
    """Records of one WAL file; raises WalTail where the valid records end (not at EOF).

    Each record's frame, CRC and padding are checked, then its payload: the topic name (its
    length within the record, UTF-8), the partition number, and the batch's header (fields in
    range, its size the rest of the payload); with ``check_batches`` the batch's own CRC too.
    The file is read a chunk at a time: memory stays flat whatever its size."""
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        rd = _Reader(fd, size)
        pos = 0
        while pos < size:
            if pos + FRAME_SIZE > size:
                raise WalTail(pos, f"{size - pos} trailing bytes, less than a record frame",
                              _zeros_from(fd, pos, size), incomplete=True)
            frame = rd.get(pos, FRAME_SIZE)
            length, rtype, stored = FRAME.unpack_from(frame, 0)
            if length == 0:
                if not _zeros_from(fd, pos, size):
                    raise WalTail(pos, "zero length followed by non-zero bytes", False)
                return
            end = pos + FRAME_SIZE + length
            if length > MAX_RECORD:
                raise WalTail(pos, f"impossible record length {length}", False)
            if end > size:
                raise WalTail(pos, f"record of {plural(length, 'byte')} runs past the end of the file",
                              False, incomplete=True)
            head_crc = crc.crc32c(frame[4:8])
            payload = rd.get(pos + FRAME_SIZE, length) if length <= MAX_IN_MEMORY else None
            value = (crc.crc32c(payload, head_crc) if payload is not None
                     else _crc_range(fd, pos + FRAME_SIZE, end, head_crc))
            if value != stored:
                # followed by nothing but zeros: a write in flight or torn by a crash in a
                # zero-filled file (the same as a record running past the end of an unfilled one)
                raise WalTail(pos, "CRC mismatch", False, incomplete=_zeros_from(fd, end, size))
            if rtype != TYPE_BATCH or length < PAYLOAD.size:
                raise WalTail(pos, f"unknown record type {rtype}", False)
            pad_end = end + (-(FRAME_SIZE + length) & 7)
            if any(rd.get(end, min(pad_end, size) - end)):
                raise WalTail(pos, "non-zero padding after the record", False)
            yield _record(path, fd, rd, pos, length, payload, check_batches)
            pos = pad_end


def _record(path: str, fd: int, rd: _Reader, pos: int, length: int,
            payload: memoryview | None, check_batch: bool) -> WalRecord:
    """The record at ``pos`` (frame and CRC intact) with its payload checked; WalTail
    (``inner``) when the payload is not a valid batch record."""
    p0 = pos + FRAME_SIZE
    fixed = payload[:PAYLOAD.size] if payload is not None else rd.get(p0, PAYLOAD.size)
    tid, part, wns, nlen = PAYLOAD.unpack_from(fixed, 0)
    blen = length - PAYLOAD.size - nlen
    if blen < HEADER_SIZE:
        raise WalTail(pos, f"a topic name of {plural(nlen, 'byte')} leaves {plural(blen, 'byte')} of a "
                      f"{length}-byte record for a batch", False, inner=True)
    if part >= MAX_PARTITIONS:
        raise WalTail(pos, f"partition {part} is out of range (at most {MAX_PARTITIONS - 1})",
                      False, inner=True)
    b0 = p0 + PAYLOAD.size + nlen
    if payload is not None:
        raw_name, batch = payload[PAYLOAD.size:PAYLOAD.size + nlen], payload[b0 - p0:]
        head = batch[:HEADER_SIZE]
    else:
        raw_name, batch = rd.get(p0 + PAYLOAD.size, nlen), None
        raw_name = memoryview(bytes(raw_name))  # (the next get may replace the buffer)
        head = rd.get(b0, HEADER_SIZE)
    try:
        name = bytes(raw_name).decode("utf-8")
    except UnicodeDecodeError:
        raise WalTail(pos, "the topic name is not UTF-8", False, inner=True) from None
    try:
        h = read_header(head, 0)
        if h.size != blen:
            raise CorruptRecordError(f"{plural(blen, 'byte')}, its header says {h.size}")
        if check_batch:
            if batch is not None:
                check_crc(batch, 0, h)
            elif _batch_crc(fd, b0, h.size) != h.crc:
                raise CorruptRecordError("CRC mismatch")
    except CorruptRecordError as e:
        raise WalTail(pos, f"its batch: {e}", False, inner=True) from None
    return WalRecord(path, pos, TYPE_BATCH, tid, part, wns, name, h, b0, blen, batch)


def _batch_crc(fd: int, start: int, size: int) -> int:
    """A batch's CRC (as records.batch_crc) read piece by piece: [20, size), then [0, 16)."""
    return crc.crc32c(os.pread(fd, 16, start), _crc_range(fd, start + CRC_FROM, start + size, 0))

