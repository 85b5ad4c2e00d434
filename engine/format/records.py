"""Records and the record batch header: its layout, reading and checking it (CRC32C). Pure
functions over bytes, no file I/O; encoding is in ``encode``, decoding in ``decode``.

A batch is a fixed 72-byte header followed by a columnar body (docs/FORMAT.md has every byte):

    0  base_offset int64        8  batch_length int32 (bytes after this field)
    12 magic uint8 (1 or 2)     13 reserved uint8, 14 reserved uint16
    16 crc uint32               20 attributes uint16, 22 key_version uint16
    24 last_offset_delta int32  28 record_count int32
    32 first_timestamp int64    40 max_timestamp int64
    48 producer_id int64        56 producer_epoch int16, 58 reserved int16
    60 base_sequence int32      64 body_length int32 (uncompressed)
    68 stored_length int32      72 body (stored_length bytes), zero padding to a multiple of 8

All integers are little-endian. The CRC32C runs over bytes [20, end) and then over [0, 16), so
every byte except the CRC itself is covered, yet the base offset can be assigned after encoding
by re-checksumming only 16 bytes. The body's key and value columns use Arrow's binary layout
(validity bitmap, n+1 int32 offsets, data), each buffer padded to 8 bytes, so a decompressed
body becomes pyarrow arrays without copying. An encrypted batch (``ATTR_ENCRYPTED``, its data
key's version in ``key_version``) stores its body sealed (engine.format.sealed); the header
stays plaintext.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import CorruptRecordError, plural
from . import crc

MAGIC = 1  # a plain batch: the producer fields are -1 (every batch of format 1)
MAGIC_PRODUCER = 2  # format 2: producer id, epoch and base sequence mean something
MAX_EPOCH = (1 << 15) - 1
SEQ_MASK = 0x7FFFFFFF  # record sequences wrap from 2^31-1 to 0
HEADER = struct.Struct("<qiBBHIHHiiqqqhhiii")
HEADER_SIZE = HEADER.size  # 72
LENGTH_PREFIX = 12  # base_offset + batch_length: what must be read to know a batch's size
CRC_FROM = 20
KEY_VERSION_AT = 22  # uint16: the data key version of an encrypted batch, else 0
# an encrypted body: salt (16) + nonce (12) + ciphertext + tag (16) (engine.format.sealed)
SEAL_OVERHEAD = 44

ATTR_CODEC = 0x0007
# the records' timestamps are the time they were appended (the topic's message.timestamp.type
# was LogAppendTime): Kafka's timestamp type bit, at the same place
ATTR_LOG_APPEND_TIME = 0x0008
ATTR_TRANSACTIONAL = 0x0010
ATTR_CONTROL = 0x0020
ATTR_HAS_HEADERS = 0x0040
ATTR_KEY_NULLS = 0x0080
ATTR_VALUE_NULLS = 0x0100
ATTR_EXPLICIT_OFFSETS = 0x0200
ATTR_UNIFORM_TIMESTAMP = 0x0400
ATTR_HEADER_VALUE_NULLS = 0x0800
ATTR_ENCRYPTED = 0x1000  # the stored body is sealed (engine.format.sealed); key_version >= 1
ATTR_KNOWN = 0x1FFF
ATTR_TXN_BITS = ATTR_TRANSACTIONAL | ATTR_CONTROL  # only in a magic-2 batch

# A batch can never be larger than this, whatever a length field on disk claims.
MAX_BATCH_BYTES = (1 << 31) - 1 - 64
# Offsets relative to a segment's base are int32 (index entries): a batch's offsets span at
# most this many, and a base offset leaves room for them within int64.
MAX_RELATIVE_OFFSET = (1 << 31) - 1
MAX_BASE_OFFSET = (1 << 63) - 1 - MAX_RELATIVE_OFFSET
_BASE_CRC = struct.Struct("<q")
_new_tuple = tuple.__new__
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")


class Record(NamedTuple):
    """One record. ``key``/``value`` are bytes or None (a None value is a tombstone).

    ``headers`` is a sequence of ``(str, bytes | None)`` pairs. ``timestamp`` (ms since the epoch)
    defaults to the time of the produce call; ``offset`` and ``partition`` are set on reads.
    """

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset: int | None = None
    partition: int | None = None


class ColumnBatch(NamedTuple):
    """Consecutive records of one partition as columns (``Consumer.poll_batches``,
    ``Engine.stream``): the cheap way to stream, no object per record."""

    topic: str
    partition: int
    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[Any]


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    body_length: int
    stored_length: int
    key_version: int = 0  # an encrypted batch's data key version (>= 1), else 0

    @property
    def size(self) -> int:
        return self.batch_length + LENGTH_PREFIX

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_encrypted(self) -> bool:
        return bool(self.attributes & ATTR_ENCRYPTED)

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (sequences wrap from 2^31-1 to 0)."""
        return (self.base_sequence + self.last_offset_delta) & SEQ_MASK


class EncodedBatch:
    """Batch bytes with the base offset still to be assigned (see ``assign``)."""

    __slots__ = ("buf", "count", "first_timestamp", "max_timestamp", "last_offset_delta", "_tail_crc")

    def __init__(self, buf: bytearray, count: int, first_ts: int, max_ts: int, last_delta: int,
                 tail_crc: int) -> None:
        self.buf = buf
        self.count = count
        self.first_timestamp = first_ts
        self.max_timestamp = max_ts
        self.last_offset_delta = last_delta
        self._tail_crc = tail_crc

    def __len__(self) -> int:
        return len(self.buf)

    def copy(self) -> EncodedBatch:
        """The same batch in a buffer of its own (a retry: the first buffer may be in use)."""
        return EncodedBatch(bytearray(self.buf), self.count, self.first_timestamp,
                            self.max_timestamp, self.last_offset_delta, self._tail_crc)

    def assign(self, base_offset: int) -> bytearray:
        """Write the base offset and the final CRC into the header; 16 bytes are re-checksummed."""
        buf = self.buf
        _BASE_CRC.pack_into(buf, 0, base_offset)
        struct.pack_into("<I", buf, 16, crc.crc32c(memoryview(buf)[:16], self._tail_crc))
        return buf


def read_header(buf: Any, pos: int = 0, where: str = "") -> BatchHeader:
    """Parse and sanity-check a header at ``pos`` (the caller ensures 72 bytes are there).

    Every field a reader computes with is range-checked here, once, so no later arithmetic
    (offsets, sizes, index entries) can leave its range; docs/FORMAT.md, Checks on read, has
    the rules. (One condition on locals: cheaper than the NamedTuple's attributes.)
    """
    (base, blen, magic, _, _, crc_, attrs, kv, delta, count, first_ts, max_ts, pid, epoch, _,
     seq, body, stored) = HEADER.unpack_from(buf, pos)
    size = blen + LENGTH_PREFIX
    if ((magic != MAGIC and (magic != MAGIC_PRODUCER or _producer_problem(attrs, count, pid, epoch, seq)))
            or not HEADER_SIZE <= size <= MAX_BATCH_BYTES + LENGTH_PREFIX or size & 7
            or not size - 8 < HEADER_SIZE + stored <= size or stored < 0 or body < 0
            or not 0 < count <= delta + 1 <= MAX_RELATIVE_OFFSET
            or (delta != count - 1 and not attrs & ATTR_EXPLICIT_OFFSETS)
            or not 0 <= base <= MAX_BASE_OFFSET or attrs & ~ATTR_KNOWN
            or (magic == MAGIC and attrs & ATTR_TXN_BITS)
            or (attrs & ATTR_ENCRYPTED and (not kv or stored < SEAL_OVERHEAD
                                            or attrs & ATTR_CONTROL))
            or (kv and not attrs & ATTR_ENCRYPTED)):
        raise CorruptRecordError(_header_problem(base, size, magic, attrs, delta, count, body,
                                                 stored, pid, epoch, seq, kv) + where)
    return _new_tuple(BatchHeader, (base, blen, magic, crc_, attrs, delta, count, first_ts,
                                    max_ts, pid, epoch, seq, body, stored, kv))


def _producer_problem(attrs: int, count: int, pid: int, epoch: int, seq: int) -> str | None:
    """What is wrong with the producer fields of a magic-2 header, or None."""
    if pid < 0:
        return f"producer id {pid} in a format-2 batch (must be >= 0)"
    if not 0 <= epoch <= MAX_EPOCH:
        return f"producer epoch {epoch} out of range (0..{MAX_EPOCH})"
    if attrs & ATTR_CONTROL:
        if not attrs & ATTR_TRANSACTIONAL or count != 1 or seq != -1:
            return "a control batch must be transactional, hold one record and no sequence"
    elif seq < 0:
        return f"base sequence {seq} out of range (0..{(1 << 31) - 1})"
    return None


def _header_problem(base: int, size: int, magic: int, attrs: int, delta: int, count: int,
                    body: int, stored: int, pid: int = -1, epoch: int = -1, seq: int = -1,
                    key_version: int = 0) -> str:
    """What is wrong with a header read_header refused (the slow path, for the message)."""
    if magic not in (MAGIC, MAGIC_PRODUCER):
        return f"bad magic {magic} (expected {MAGIC} or {MAGIC_PRODUCER})"
    if magic == MAGIC_PRODUCER:
        problem = _producer_problem(attrs, count, pid, epoch, seq)
        if problem:
            return problem
    elif attrs & ATTR_TXN_BITS:
        return f"transactional/control attribute bits {attrs & ATTR_TXN_BITS:#x} in a format-1 batch"
    if not HEADER_SIZE <= size <= MAX_BATCH_BYTES + LENGTH_PREFIX or size & 7:
        return f"bad batch length {size - LENGTH_PREFIX}"
    if not size - 8 < HEADER_SIZE + stored <= size or stored < 0:
        return f"bad stored body length {stored} for a batch of {plural(size, 'byte')}"
    if attrs & ~ATTR_KNOWN:
        return f"unknown attribute bits {attrs:#x}"
    if not 0 <= base <= MAX_BASE_OFFSET:
        return f"base offset {base} out of range (0..{MAX_BASE_OFFSET})"
    if attrs & ATTR_ENCRYPTED:
        if not key_version:
            return "an encrypted batch with key version 0 (data key versions start at 1)"
        if attrs & ATTR_CONTROL:
            return "an encrypted control batch (transaction markers are never encrypted)"
        if stored < SEAL_OVERHEAD:
            return (f"stored body of {plural(stored, 'byte')} is too short for an encrypted "
                    f"batch (at least {SEAL_OVERHEAD})")
    elif key_version:
        return f"key version {key_version} in a batch that is not encrypted"
    return (f"bad counts (records {count}, last delta {delta}, body {body}"
            f"{'' if attrs & ATTR_EXPLICIT_OFFSETS else ', offsets not explicit'})")


def batch_crc(buf: Any, pos: int, size: int) -> int:
    mv = memoryview(buf)
    return crc.crc32c(mv[pos: pos + 16], crc.crc32c(mv[pos + CRC_FROM: pos + size]))


def crc_intact(buf: Any, pos: int = 0) -> bool:
    """Do the bytes at ``pos`` hold a whole batch whose CRC matches, whatever its fields say?
    (Such a batch is on disk as someone wrote it: damage, never a write a crash tore.)"""
    if len(buf) - pos < HEADER_SIZE:
        return False
    size = _I32.unpack_from(buf, pos + 8)[0] + LENGTH_PREFIX
    if not HEADER_SIZE <= size <= len(buf) - pos:
        return False
    return batch_crc(buf, pos, size) == _U32.unpack_from(buf, pos + 16)[0]


def check_crc(buf: Any, pos: int, h: BatchHeader, where: str = "") -> None:
    actual = batch_crc(buf, pos, h.size)
    if actual != h.crc:
        raise CorruptRecordError(
            f"CRC mismatch in batch at offsets {h.base_offset}..{h.last_offset}: stored "
            f"{h.crc:#010x}, computed {actual:#010x}{where}"
        )


_pa: Any = None


def arrow() -> Any:
    """pyarrow, imported on first use so that ``import engine`` stays light."""
    global _pa
    if _pa is None:
        import pyarrow

        _pa = pyarrow
    return _pa
