"""Encoding a batch: columns in, batch bytes out (the layout is in engine.format.records)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, NamedTuple, Protocol

from ..errors import InvalidArgument
from . import codecs, crc, native
from .records import (
    ATTR_CODEC,
    ATTR_CONTROL,
    ATTR_EXPLICIT_OFFSETS,
    ATTR_HAS_HEADERS,
    ATTR_HEADER_VALUE_NULLS,
    ATTR_KEY_NULLS,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    ATTR_UNIFORM_TIMESTAMP,
    ATTR_VALUE_NULLS,
    CRC_FROM,
    HEADER,
    HEADER_SIZE,
    LENGTH_PREFIX,
    MAGIC,
    MAGIC_PRODUCER,
    MAX_BATCH_BYTES,
    EncodedBatch,
    arrow,
)

_ZEROS = bytes(8)


class EncodedBody(NamedTuple):
    """A batch body laid out elsewhere (a Kafka batch's records, transcoded in C:
    engine.format.kafka_batch) in ``buf`` after HEADER_SIZE bytes of room, where
    ``finish_batch`` packs the header: ``attributes`` are its column flags (ATTR_KEY_NULLS,
    ATTR_UNIFORM_TIMESTAMP, ...), ``record_count`` its records (offset deltas 0, 1, 2, ...),
    ``first`` the index of its first record among those it was cut from."""

    buf: bytearray
    attributes: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    first: int = 0


class BodySource(Protocol):
    """Records that lay themselves out as batch bodies: ``bodies(max_body)`` cut into bodies
    of at most ``max_body`` bytes each (one record may pass it alone; 0: one body), each in
    a new buffer; none for no records."""

    def bodies(self, max_body: int = 0) -> list[EncodedBody]: ...


def _pad(parts: list, b: Any) -> int:
    parts.append(b)
    n = len(b)
    if n & 7:
        parts.append(_ZEROS[: 8 - (n & 7)])
    return n + (-n & 7)


def _arrow_column(parts: list, arr: Any) -> bool:
    """A pyarrow binary array is already this layout: copy its buffers (no Python bytes)."""
    pa = arrow()
    if hasattr(arr, "combine_chunks"):  # a ChunkedArray: one array
        arr = arr.combine_chunks()
    if arr.type not in (pa.binary(), pa.string()):  # large_binary/large_string: int64 offsets
        arr = arr.cast(pa.binary())
    n = len(arr)
    validity, offsets, data = arr.buffers()
    if arr.offset or struct.unpack_from("<i", offsets, 0)[0]:
        # a slice (or offsets not starting at 0, as from IPC): make its buffers start at 0
        arr = arr.take(pa.array(range(n), pa.int32()))
        validity, offsets, data = arr.buffers()
    nulls = arr.null_count > 0
    if nulls:
        bits = bytearray(validity.to_pybytes()[: (n + 7) // 8])
        if n & 7:
            bits[-1] &= (1 << (n & 7)) - 1  # Arrow leaves padding bits undefined
        _pad(parts, bytes(bits))
    offs = offsets.to_pybytes()[: 4 * (n + 1)]
    end = struct.unpack_from("<i", offs, 4 * n)[0]
    _pad(parts, offs)
    _pad(parts, data.to_pybytes()[:end] if data is not None else b"")
    return nulls


def _bitmap(items: Sequence[Any]) -> bytes:
    """Arrow validity bitmap (bit i set when item i is not None), LSB first."""
    bits = "".join(["0" if x is None else "1" for x in reversed(items)])
    return int(bits, 2).to_bytes((len(items) + 7) // 8, "little")


def _binary_column(parts: list, items: Sequence[Any]) -> bool:
    """Append an Arrow binary column; returns True when it carries a validity bitmap."""
    if hasattr(items, "buffers") or hasattr(items, "combine_chunks"):
        return _arrow_column(parts, items)
    n = len(items)
    if items.count(None) == n:  # e.g. keyless records: all null, nothing to measure
        _pad(parts, bytes((n + 7) // 8))
        _pad(parts, bytes(4 * (n + 1)))
        return True
    fmt = f"<{n + 1}i"
    try:
        offs = struct.pack(fmt, *accumulate(map(len, items), initial=0))
        nulls = False
    except TypeError:
        if not any(x is None for x in items):
            raise
        _pad(parts, _bitmap(items))
        items = [b"" if x is None else x for x in items]
        offs = struct.pack(fmt, *accumulate(map(len, items), initial=0))
        nulls = True
    _pad(parts, offs)
    _pad(parts, b"".join(items))
    return nulls

# the attribute bits a caller may ask for (the rest follow from the columns)
FLAGS = ATTR_TRANSACTIONAL | ATTR_CONTROL | ATTR_LOG_APPEND_TIME


def encode_batch(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps: int | Sequence[int],
    headers: Sequence[Sequence[tuple[Any, bytes | None]]] | None = None,
    codec: int = codecs.NONE,
    offset_deltas: Sequence[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    flags: int = 0,
) -> EncodedBatch:
    """Encode one batch. ``timestamps`` is one int for all records or one per record. With a
    ``producer_id`` (>= 0) the batch is format 2 (magic 2): idempotent or transactional
    (``flags``), its records numbered from ``base_sequence``. ``flags`` may also carry
    ATTR_LOG_APPEND_TIME (the timestamps are append times), in either format."""
    n = len(values)
    if n == 0 or len(keys) != n:
        raise InvalidArgument("a batch needs at least one record and as many keys as values")
    attrs = (codec & ATTR_CODEC) | (flags & FLAGS)
    plain = None
    if type(timestamps) is int and offset_deltas is None and headers is None:
        # the common produce: the columns in one pass (C), after room for the header
        plain = native.plain_body(keys, values, HEADER_SIZE)
    if plain is not None:
        buf, key_nulls = plain
        body: Any = memoryview(buf)[HEADER_SIZE:]
        last_delta = n - 1
        assert isinstance(timestamps, int)  # (a plain body has one timestamp)
        first_ts = max_ts = timestamps
        attrs |= ATTR_UNIFORM_TIMESTAMP | (ATTR_KEY_NULLS if key_nulls else 0)
    else:
        buf = None
        body, attrs, last_delta, first_ts, max_ts = general_body(
            keys, values, timestamps, headers, offset_deltas, attrs, n)
    return finish_batch(buf, body, attrs, n, last_delta, first_ts, max_ts, codec, producer_id,
                        producer_epoch, base_sequence)


def finish_batch(buf: bytearray | None, body: Any, attrs: int, n: int, last_delta: int,
                 first_ts: int, max_ts: int, codec: int = codecs.NONE, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1) -> EncodedBatch:
    """The batch around an encoded ``body``: compressed with ``codec``, its header packed and
    checksummed. ``buf``: the body already lies in it after HEADER_SIZE bytes of room (then
    ``body`` is a memoryview of that part, released here), else None."""
    body_len = len(body)
    stored = codecs.compress(codec, body) if codec else body
    stored_len = len(stored)
    total = HEADER_SIZE + stored_len
    total += -total & 7
    if total > MAX_BATCH_BYTES:
        raise InvalidArgument(f"batch of {total} bytes is larger than the format allows")
    if buf is None or codec:
        if buf is not None:
            body.release()
        buf = bytearray(HEADER_SIZE)
        buf += stored
    elif isinstance(body, memoryview):
        body.release()  # (the buffer is the batch: no copy)
    if len(buf) < total:
        buf += _ZEROS[: total - len(buf)]
    magic = MAGIC if producer_id < 0 else MAGIC_PRODUCER
    HEADER.pack_into(buf, 0, 0, total - LENGTH_PREFIX, magic, 0, 0, 0, attrs, 0, last_delta, n,
                     first_ts, max_ts, producer_id, producer_epoch, 0, base_sequence, body_len,
                     stored_len)
    tail_crc = crc.crc32c(memoryview(buf)[CRC_FROM:])
    return EncodedBatch(buf, n, first_ts, max_ts, last_delta, tail_crc)


def general_body(keys: Sequence[Any], values: Sequence[Any],
                 timestamps: int | Sequence[int],
                 headers: Sequence[Sequence[tuple[Any, bytes | None]]] | None,
                 offset_deltas: Sequence[int] | None, attrs: int, n: int
                 ) -> tuple[bytes, int, int, int, int]:
    """The general body: ``(body, attributes, last offset delta, first ts, max ts)``."""
    parts: list = []
    if offset_deltas is not None:
        last_delta = offset_deltas[-1]
        if offset_deltas[0] != 0 or last_delta != n - 1:
            attrs |= ATTR_EXPLICIT_OFFSETS
            _pad(parts, struct.pack(f"<{n}i", *offset_deltas))
    else:
        last_delta = n - 1
    if isinstance(timestamps, int):
        first_ts = max_ts = timestamps
        attrs |= ATTR_UNIFORM_TIMESTAMP
    else:
        first_ts = timestamps[0]
        max_ts = max(timestamps)
        if max_ts == first_ts and min(timestamps) == first_ts:
            attrs |= ATTR_UNIFORM_TIMESTAMP
        else:
            _pad(parts, struct.pack(f"<{n}q", *timestamps))
    try:
        if _binary_column(parts, keys):
            attrs |= ATTR_KEY_NULLS
        if _binary_column(parts, values):
            attrs |= ATTR_VALUE_NULLS
        if headers is not None and any(headers):
            attrs |= ATTR_HAS_HEADERS
            _pad(parts, struct.pack(f"<{n + 1}i", *accumulate(map(len, headers), initial=0)))
            flat = [h for hs in headers for h in hs]
            hkeys = [k.encode() if isinstance(k, str) else bytes(k) for k, _ in flat]
            _binary_column(parts, hkeys)
            if _binary_column(parts, [v for _, v in flat]):
                attrs |= ATTR_HEADER_VALUE_NULLS
    except (TypeError, ValueError) as e:
        raise InvalidArgument(
            f"record keys, values and header values must be bytes or None ({e})"
        ) from None
    return b"".join(parts), attrs, last_delta, first_ts, max_ts
