"""Kafka's record batch (magic 2) in and out: what a Kafka client sends in a Produce request
and reads in a Fetch response, transcoded to and from rivven's columns. Pure functions over
bytes; every length, count and varint read from the wire is checked before it is used.

A Kafka batch (big-endian; Kafka's ``DefaultRecordBatch``):

    0  baseOffset int64            8  batchLength int32 (bytes after this field)
    12 partitionLeaderEpoch int32  16 magic int8 (2)
    17 crc uint32 (CRC32C of [21, end))
    21 attributes int16 (codec 0-2, timestamp type 3, transactional 4, control 5)
    23 lastOffsetDelta int32       27 baseTimestamp int64     35 maxTimestamp int64
    43 producerId int64            51 producerEpoch int16     53 baseSequence int32
    57 recordsCount int32          61 records (compressed as a whole by the codec)

and each record: length, attributes int8, timestampDelta, offsetDelta, keyLength, key,
valueLength, value, headerCount, then per header keyLength, key, valueLength, value; every
integer of a record a zigzag varint, a length of -1 meaning null.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptRecordError, InvalidArgument, plural
from . import codecs, native
from .crc import crc32c
from .encode import EncodedBody, general_body
from .records import HEADER_SIZE as RIVVEN_HEADER_SIZE

HEAD = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
HEAD_SIZE = HEAD.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_FROM = 21
ATTR_CODEC = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
# what a stored batch's attributes say on the wire (rivven's LogAppendTime bit is Kafka's)
WIRE_ATTRS = ATTR_TRANSACTIONAL | ATTR_CONTROL | ATTR_LOG_APPEND_TIME
# Kafka's codec ids are rivven's (none, gzip, snappy, lz4, zstd = 0..4)
MAX_RECORD_COUNT = 1 << 24  # far past what any client sends in one batch
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
NO_PRODUCER_ID = -1


class KafkaBatch:
    """One batch of a Produce request: its header's fields and its records (decompressed,
    checked), which lay themselves out as rivven batch bodies on demand (``bodies``: in C,
    ``engine.format.native.kafka_body``; ``engine.format.encode.BodySource``). ``keys``,
    ``values``, ``headers`` and ``timestamps`` are read from the records on first use (the
    produce path needs none)."""

    __slots__ = ("base_offset", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "count",
                 "records", "size", "_columns", "_made")

    def __init__(self, base_offset: int, attributes: int, last_offset_delta: int,
                 base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, count: int, records: Any, size: int) -> None:
        self.base_offset = base_offset
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.count = count
        self.records = records
        self.size = size  # the batch's bytes on the wire
        self._columns: tuple | None = None
        self._made: tuple[int, list] | None = None  # (max_body, bodies made by decode)

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    def _cols(self) -> tuple:
        if self._columns is None:
            keys, values, headers, tsd = records(self.records, self.count,
                                                 self.attributes & ATTR_CONTROL != 0,
                                                 self.base_timestamp)
            self._columns = (keys, values, headers, [self.base_timestamp + d for d in tsd])
        return self._columns

    def bodies(self, max_body: int = 0) -> list[EncodedBody]:
        """The records as rivven batch bodies (in C), each of at most about ``max_body``
        bytes (0: one body; a batch larger as rivven's columns than a topic's
        max.message.bytes is cut); each a new buffer. None for a batch of no records."""
        if not self.count:
            return []
        made, self._made = self._made, None
        got = made[1] if made is not None and made[0] == max_body else \
            _to_body(self.records, self.count, self.base_timestamp, RIVVEN_HEADER_SIZE, max_body)
        assert got is not None  # (decode checked them)
        return [EncodedBody(buf, attrs, n, first, top, at)
                for buf, attrs, first, top, at, n in got]

    @property
    def keys(self) -> list[bytes | None]:
        return self._cols()[0]

    @property
    def values(self) -> list[bytes | None]:
        return self._cols()[1]

    @property
    def headers(self) -> list[list[tuple[str, bytes | None]]] | None:
        return self._cols()[2]

    @property
    def timestamps(self) -> list[int]:
        return self._cols()[3]


def split(data: Any) -> list[tuple[int, int]]:
    """``(position, size)`` of each whole batch in ``data`` (a Produce request's records);
    CorruptRecordError for a partial one or a length that cannot be."""
    mv = memoryview(data)
    out = []
    pos, n = 0, len(mv)
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"a record batch is cut short: {plural(n - pos, 'byte')} at position "
                                     f"{pos}, where a batch needs at least {HEAD_SIZE}")
        length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
        size = LOG_OVERHEAD + length
        if length < HEAD_SIZE - LOG_OVERHEAD or pos + size > n:
            raise CorruptRecordError(f"a record batch at position {pos} claims {plural(length, 'byte')} "
                                     f"where {n - pos - LOG_OVERHEAD} follow")
        out.append((pos, size))
        pos += size
    return out


def decode(data: Any, max_bytes: int, max_body: int = -1) -> KafkaBatch:
    """One whole magic-2 batch (as ``split`` found it): checked (magic, CRC32C, counts,
    deltas, every record), decompressed into at most ``max_bytes``. ``max_body`` >= 0: its
    bodies of that bound are made now (in the one pass that checks the records), kept for
    the first ``bodies(max_body)`` (Produce: what the engine asks of an uncompressed
    topic)."""
    mv = memoryview(data)
    if len(mv) < HEAD_SIZE:
        raise CorruptRecordError(f"a record batch of {plural(len(mv), 'byte')} is shorter than its "
                                 f"{HEAD_SIZE}-byte header")
    (base, length, _epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, pepoch,
     base_seq, count) = HEAD.unpack_from(mv, 0)
    if magic != 2:
        raise CorruptRecordError(f"record batch magic {magic}: only magic 2 (Kafka 0.11 and "
                                 "later clients) is accepted")
    if length + LOG_OVERHEAD != len(mv):
        raise CorruptRecordError(f"a record batch's length field says {plural(length, 'byte')} where "
                                 f"{len(mv) - LOG_OVERHEAD} are")
    if crc32c(mv[CRC_FROM:]) != crc:
        raise CorruptRecordError(f"record batch at base offset {base}: CRC mismatch")
    if not 0 <= count <= MAX_RECORD_COUNT or (count and last_delta != count - 1 and
                                              not 0 <= last_delta):
        raise CorruptRecordError(f"record batch claims {plural(count, 'record')} (last offset delta "
                                 f"{last_delta})")
    codec = attrs & ATTR_CODEC
    if codec > codecs.ZSTD:
        raise CorruptRecordError(f"record batch compression codec {codec} is unknown")
    body = mv[HEAD_SIZE:]
    if codec != codecs.NONE:
        body = memoryview(decompress(codec, bytes(body), max_bytes))
    made = None
    if count:  # checked in C (the bodies made now when asked for)
        made = _to_body(body, count, base_ts, RIVVEN_HEADER_SIZE, max_body)
        if made is None:
            records(body, count, attrs & ATTR_CONTROL != 0, base_ts)  # (says where)
            raise CorruptRecordError(f"record batch at base offset {base}: its columns would "
                                     "pass 2 GiB")
    else:
        records(body, 0, False)  # (nothing may follow)
    kb = KafkaBatch(base, attrs, last_delta, base_ts, max_ts, pid, pepoch, base_seq, count,
                    body, len(mv))
    if made and max_body >= 0:
        kb._made = (max_body, made)
    return kb


def _varint(mv: Any, pos: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= end:
            raise CorruptRecordError("a record is cut short inside a varint")
        b = mv[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result >> 64:
                raise CorruptRecordError("a varint runs past 64 bits")
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint runs past 10 bytes")


def _bytes(mv: Any, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _varint(mv, pos, end)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"a record field length is {n}")
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"a record field of {plural(n, 'byte')} runs past its record")
    return bytes(mv[pos:pos + n]), pos + n


def records(mv: Any, count: int, control: bool, base_timestamp: int = 0
            ) -> tuple[list, list, list | None, list[int]]:
    """``(keys, values, headers or None, timestamp deltas)`` of ``count`` records; the offset
    deltas must run 0, 1, 2, ... (what every producer sends) and every timestamp
    (``base_timestamp`` + its delta) must be a 64-bit integer."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    tsd: list[int] = []
    any_headers = False
    pos, total = 0, len(mv)
    for i in range(count):
        length, pos = _varint(mv, pos, total)
        end = pos + length
        if length < 6 or end > total:
            raise CorruptRecordError(f"record {i} claims {plural(length, 'byte')} where "
                                     f"{total - pos} remain")
        pos += 1  # attributes (unused)
        delta, pos = _varint(mv, pos, end)
        if not _I64_MIN <= base_timestamp + delta <= _I64_MAX:
            raise CorruptRecordError(f"record {i} has timestamp delta {delta} from "
                                     f"{base_timestamp}: past a 64-bit time")
        odelta, pos = _varint(mv, pos, end)
        if odelta != i:
            raise CorruptRecordError(f"record {i} has offset delta {odelta}: a producer's "
                                     "batch numbers its records 0, 1, 2, ...")
        k, pos = _bytes(mv, pos, end)
        v, pos = _bytes(mv, pos, end)
        nh, pos = _varint(mv, pos, end)
        if not 0 <= nh <= end - pos:
            raise CorruptRecordError(f"record {i} claims {plural(nh, 'header')}")
        hs: list[tuple[str, bytes | None]] = []
        for _ in range(nh):
            hk, pos = _bytes(mv, pos, end)
            if hk is None:
                raise CorruptRecordError(f"record {i} has a header with a null key")
            hv, pos = _bytes(mv, pos, end)
            try:
                hs.append((hk.decode(), hv))
            except UnicodeDecodeError:
                raise CorruptRecordError(f"record {i} has a header key that is not "
                                         "UTF-8") from None
        if pos != end:
            raise CorruptRecordError(f"record {i}: its fields end {plural(end - pos, 'byte')} before "
                                     "its length says")
        any_headers = any_headers or bool(hs)
        keys.append(k)
        values.append(v)
        headers.append(hs)
        tsd.append(delta)
    if pos != total:
        raise CorruptRecordError(f"{plural(total - pos, 'byte')} follow the last of "
                                 f"{plural(count, 'record')}")
    return keys, values, headers if any_headers else None, tsd


PART_BOUND = 160  # fastcodec.c's: a body's bytes are at most this and its records' bounds


def py_kafka_body(data: Any, count: int, base_ts: int, reserve: int = 0, max_body: int = 0
                  ) -> list[tuple[bytearray, int, int, int, int, int]] | None:
    """fastcodec.c's ``kafka_body`` in Python (engine.format.native): the records of a Kafka
    batch as rivven bodies, read by ``records`` (None where it raises), their columns laid
    out by engine.format.encode; a new body starts where the bound would pass ``max_body``
    (> 0); ``max_body`` < 0: the records checked only (``[]``)."""
    mv = memoryview(data).cast("B")
    if count <= 0 or not 0 <= reserve <= 4096 or count > len(mv) // 7:
        return None
    try:
        keys, values, headers, tsd = records(mv, count, False, base_ts)
    except CorruptRecordError:
        return None
    ts = [base_ts + d for d in tsd]
    cuts: list[int] = []
    bound = 0
    for i in range(count):
        rb = 22 + len(keys[i] or b"") + len(values[i] or b"")
        if headers is not None:
            rb += sum(9 + len(k.encode()) + len(v or b"") for k, v in headers[i])
        if not cuts or (max_body > 0 and bound + rb > max_body):
            cuts.append(i)
            bound = PART_BOUND
        bound += rb
        if bound >= 1 << 31:
            return None
    out: list[tuple[bytearray, int, int, int, int, int]] = []
    if max_body < 0:  # (checked only)
        return out
    for a, b in zip(cuts, [*cuts[1:], count]):
        hs = headers[a:b] if headers is not None else None
        body, attrs, _, first, top = general_body(keys[a:b], values[a:b], ts[a:b], hs, None, 0,
                                                  b - a)
        buf = bytearray(reserve)
        buf += body
        out.append((buf, attrs, first, top, a, b - a))
    return out


def _to_body(data: Any, count: int, base_ts: int, reserve: int, max_body: int = 0
             ) -> list[tuple[bytearray, int, int, int, int, int]] | None:
    fn = native.kafka_body or py_kafka_body  # (RIVVEN_NATIVE=0, or not built: the twin)
    return fn(data, count, base_ts, reserve, max_body)


def decompress(codec: int, data: bytes, max_bytes: int) -> bytes:
    """A Kafka client's compressed records, never more than ``max_bytes`` out (a hostile
    batch cannot make the server allocate without bound)."""
    try:
        if codec == codecs.GZIP:
            d = zlib.decompressobj(47)  # gzip or zlib headers
            out = d.decompress(data, max_bytes + 1)
        elif codec == codecs.SNAPPY:
            out = _snappy(data, max_bytes)
        elif codec == codecs.LZ4:
            import lz4.frame

            dec = lz4.frame.LZ4FrameDecompressor()
            out = dec.decompress(data, max_length=max_bytes + 1)
        else:
            import zstandard

            # (a frame may not state its size: read at most max_bytes + 1 out of it)
            with zstandard.ZstdDecompressor().stream_reader(data) as r:
                out = r.read(max_bytes + 1)
    except CorruptRecordError:
        raise
    except Exception as e:  # every codec library raises its own kind
        raise CorruptRecordError(f"record batch does not decompress ({codecs.IDS[codec]}): "
                                 f"{e}") from None
    if len(out) > max_bytes:
        raise CorruptRecordError(f"record batch decompresses past {plural(max_bytes, 'byte')} "
                                 "(message.max.bytes)")
    return out


_XERIAL = b"\x82SNAPPY\x00"


def _snappy(data: bytes, max_bytes: int) -> bytes:
    """Raw snappy (librdkafka) or xerial's framing (Kafka's Java client)."""
    import snappy

    if not data.startswith(_XERIAL):
        if codecs.snappy_declared_len(data) > max_bytes:
            raise CorruptRecordError("record batch decompresses past its limit")
        return snappy.uncompress(data)
    out = bytearray()
    pos = 16  # magic (8), version (4), compatible version (4)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("snappy (xerial) block length cut short")
        n = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        chunk = data[pos:pos + n]
        if len(chunk) != n or codecs.snappy_declared_len(chunk) > max_bytes - len(out):
            raise CorruptRecordError("snappy (xerial) block cut short or too large")
        out += snappy.uncompress(chunk)
        pos += n
    return bytes(out)


# ---------------------------------------------------------------- out (Fetch)
_SMALL = [native.zigzag(i) for i in range(-1, 4096)]


def _vi(n: int) -> bytes:
    return _SMALL[n + 1] if -1 <= n < 4095 else native.zigzag(n)


def encode(base_offset: int, attributes: int, last_offset_delta: int, base_timestamp: int,
           max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
           offset_deltas: Sequence[int], timestamps: Sequence[int],
           keys: Sequence[bytes | None], values: Sequence[bytes | None],
           headers: Sequence[Sequence[tuple[str, bytes | None]]] | None,
           leader_epoch: int = 0) -> bytes:
    """One uncompressed magic-2 batch as a Fetch response carries it."""
    out = bytearray()
    vi = _vi
    for i, od in enumerate(offset_deltas):
        k, v = keys[i], values[i]
        rec = bytearray(b"\x00")
        rec += vi(timestamps[i] - base_timestamp)
        rec += vi(od)
        if k is None:
            rec += b"\x01"
        else:
            rec += vi(len(k))
            rec += k
        if v is None:
            rec += b"\x01"
        else:
            rec += vi(len(v))
            rec += v
        hs = headers[i] if headers is not None else ()
        rec += vi(len(hs))
        for hk, hv in hs:
            kb = hk.encode()
            rec += vi(len(kb))
            rec += kb
            if hv is None:
                rec += b"\x01"
            else:
                rec += vi(len(hv))
                rec += hv
        out += vi(len(rec))
        out += rec
    return frame(base_offset, attributes & ~ATTR_CODEC, last_offset_delta, base_timestamp,
                 max_timestamp, producer_id, producer_epoch, base_sequence,
                 len(offset_deltas), out, leader_epoch)


def frame(base_offset: int, attributes: int, last_offset_delta: int, base_timestamp: int,
          max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
          count: int, body: Any, leader_epoch: int = 0) -> bytes:
    """The 61-byte header (CRC over it and ``body``) before the records ``body``."""
    head = bytearray(HEAD.pack(base_offset, HEAD_SIZE - LOG_OVERHEAD + len(body), leader_epoch,
                               2, 0, attributes, last_offset_delta, base_timestamp,
                               max_timestamp, producer_id, producer_epoch, base_sequence,
                               count))
    crc = crc32c(body, crc32c(memoryview(head)[CRC_FROM:]))
    _CRC.pack_into(head, 17, crc)
    return bytes(head) + bytes(body)


def from_rivven(h: Any, body: Any, lay: Any, leader_epoch: int = 0) -> bytearray | None:
    """The data batch of header ``h`` (engine.format.records.BatchHeader), its decompressed
    ``body`` laid out as ``lay`` (engine.format.decode.layout), as one uncompressed Kafka
    batch, transcoded in C (``native.kafka_records``): its producer fields when it has them
    (format 2), its transactional flag. None when a column does not check out or a header key
    is not UTF-8: ``encode`` of the decoded columns then says why or replaces it."""
    n = h.record_count
    out = native.kafka_records(body, n, h.first_timestamp, h.last_offset_delta, HEAD_SIZE,
                               *lay)
    if out is None:
        return None
    pid, epoch, seq = _producer(h)
    HEAD.pack_into(out, 0, h.base_offset, len(out) - LOG_OVERHEAD, leader_epoch, 2, 0,
                   h.attributes & WIRE_ATTRS, h.last_offset_delta,
                   h.first_timestamp, h.max_timestamp, pid, epoch, seq, n)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_FROM:]))
    return out


def _producer(h: Any) -> tuple[int, int, int]:
    return ((h.producer_id, h.producer_epoch, h.base_sequence) if h.magic == 2
            else (NO_PRODUCER_ID, -1, -1))


def from_columns(h: Any, columns: tuple) -> bytes:
    """``from_rivven``'s batch from the decoded columns (engine.format.decode.decode_columns:
    offsets, timestamps, keys, values, headers), per record in Python."""
    offsets, ts, keys, values, headers = columns
    base = h.base_offset
    n = len(values)
    deltas = range(n) if isinstance(offsets, range) else [o - base for o in offsets]
    ts = ts if isinstance(ts, tuple | list) else [h.first_timestamp] * n
    hs = headers if isinstance(headers, list) else None
    return encode(base, h.attributes & WIRE_ATTRS, h.last_offset_delta,
                  h.first_timestamp, h.max_timestamp, *_producer(h), deltas, ts, keys, values,
                  hs)


def from_marker(h: Any, commit: bool) -> bytes:
    """A transaction marker (a control batch of header ``h``) as Kafka's control batch."""
    key, value = control_record(commit, 0)
    return encode(h.base_offset, h.attributes & WIRE_ATTRS, 0,
                  h.first_timestamp, h.max_timestamp, *_producer(h), (0,),
                  (h.first_timestamp,), (key,), (value,), None)


def control_record(commit: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """A transaction marker's key and value as Kafka writes them (version 0)."""
    if not -(1 << 31) <= coordinator_epoch < (1 << 31):
        raise InvalidArgument(f"coordinator epoch {coordinator_epoch} out of range")
    return struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, coordinator_epoch)
