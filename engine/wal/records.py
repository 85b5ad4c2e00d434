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
records); a record that runs past the end or fails its CRC is a torn tail.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..format import crc
from ..format.records import check_crc, read_header

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
    nb = name.encode()
    crc32c = crc.crc32c
    head = PAYLOAD.pack(topic_id, partition, time.time_ns(), len(nb)) + nb
    value = crc32c(batch, crc32c(head, crc32c(_TYPE_BYTES)))
    length = len(head) + len(batch)
    return b"".join((FRAME.pack(length, TYPE_BATCH, value), head, batch,
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
        length, rtype, stored = FRAME.unpack_from(data, pos)
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
        if crc.crc32c(payload, crc.crc32c(data[pos + 4:pos + 8])) != stored:
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


def check_record_batch(rec: WalRecord) -> None:
    """The batch inside a WAL record must itself be whole and CRC-valid."""
    h = read_header(rec.batch, 0, f" in WAL {rec.path} at position {rec.position}")
    if h.size != len(rec.batch):
        raise CorruptRecordError(f"WAL record at {rec.path}:{rec.position} holds a batch of "
                                 f"{len(rec.batch)} bytes, its header says {h.size}")
    check_crc(rec.batch, 0, h, f" in WAL {rec.path} at position {rec.position}")
