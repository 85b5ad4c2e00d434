"""Decoding a batch: its body's buffers found and checked, then columns, Records or pyarrow
arrays (zero-copy) made of them — only what the caller asks for."""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import repeat
from typing import Any, NamedTuple

from ..errors import CorruptRecordError, KeyUnavailable, plural
from . import codecs, native
from .records import (
    ATTR_ENCRYPTED,
    ATTR_EXPLICIT_OFFSETS,
    ATTR_HAS_HEADERS,
    ATTR_HEADER_VALUE_NULLS,
    ATTR_KEY_NULLS,
    ATTR_UNIFORM_TIMESTAMP,
    ATTR_VALUE_NULLS,
    HEADER_SIZE,
    BatchHeader,
    Record,
    arrow,
)

_I32 = struct.Struct("<i")
_new_tuple = tuple.__new__

# Opens the stored body of an encrypted batch: ``(buf, pos, header, where) -> plaintext``
# (engine.crypto: the topic's data keys, bound to its partition); raises CorruptRecordError
# when the tag does not verify, KeyUnavailable when a key is missing. An opener with a
# ``plain(header, where)`` method is asked about each plaintext batch too, and raises
# CorruptRecordError where its partition holds only sealed ones (engine.crypto.topic).
Opener = Callable[[Any, int, BatchHeader, str], Any]


class Layout(NamedTuple):
    """Byte positions of the body's buffers (``-1`` when a buffer is absent)."""

    offset_deltas: int
    timestamps: int
    key_validity: int
    key_offsets: int
    key_data: int
    key_end: int
    value_validity: int
    value_offsets: int
    value_data: int
    value_end: int
    header_lists: int
    hkey_offsets: int
    hkey_data: int
    hkey_end: int
    hvalue_validity: int
    hvalue_offsets: int
    hvalue_data: int
    hvalue_end: int
    header_count: int


def _span(n: int) -> int:
    return n + (-n & 7)


def layout(body: Any, h: BatchHeader, where: str = "") -> Layout:
    """Find every buffer in a decompressed body, checking each against the body's length."""
    n = h.record_count
    a = h.attributes
    size = len(body)
    pos = 0

    def take(nbytes: int) -> int:
        nonlocal pos
        start = pos
        pos += _span(nbytes)
        if pos > size:
            raise CorruptRecordError(f"body too short for its columns ({plural(size, 'byte')}){where}")
        return start

    def binary(count: int, nulls: bool) -> tuple[int, int, int, int]:
        v = take((count + 7) // 8) if nulls else -1
        o = take(4 * (count + 1))
        first = _I32.unpack_from(body, o)[0]
        dlen = _I32.unpack_from(body, o + 4 * count)[0]
        if first != 0 or dlen < 0:
            raise CorruptRecordError(f"bad column offsets ({first}, {dlen}){where}")
        d = take(dlen)
        return v, o, d, d + dlen

    od = take(4 * n) if a & ATTR_EXPLICIT_OFFSETS else -1
    ts = take(8 * n) if not a & ATTR_UNIFORM_TIMESTAMP else -1
    kv, ko, kd, ke = binary(n, bool(a & ATTR_KEY_NULLS))
    vv, vo, vd, ve = binary(n, bool(a & ATTR_VALUE_NULLS))
    if a & ATTR_HAS_HEADERS:
        hl = take(4 * (n + 1))
        hc = _I32.unpack_from(body, hl + 4 * n)[0]
        if hc < 0 or _I32.unpack_from(body, hl)[0] != 0 or 4 * hc > size:
            raise CorruptRecordError(f"bad header count {hc}{where}")
        _, hko, hkd, hke = binary(hc, False)
        hvv, hvo, hvd, hve = binary(hc, bool(a & ATTR_HEADER_VALUE_NULLS))
    else:
        hl = hko = hkd = hke = hvv = hvo = hvd = hve = -1
        hc = 0
    if pos != size:
        raise CorruptRecordError(f"body has {size - pos} unexplained bytes{where}")
    return Layout(od, ts, kv, ko, kd, ke, vv, vo, vd, ve, hl, hko, hkd, hke, hvv, hvo, hvd, hve, hc)


def body_of(buf: Any, pos: int, h: BatchHeader, where: str = "", opener: Opener | None = None
            ) -> Any:
    """The decompressed body of the (already CRC-checked) batch at ``pos``; an encrypted
    batch's is opened first by ``opener``, a plaintext one is shown to its ``plain``."""
    start = pos + HEADER_SIZE
    if h.attributes & ATTR_ENCRYPTED:
        if opener is None:
            raise KeyUnavailable(
                f"the batch at offsets {h.base_offset}..{h.last_offset} is encrypted (data key "
                f"version {h.key_version}) and this reader holds no keys{where}; open the data "
                "dir with its keyring (--keyring FILE or RIVVEN_KEYRING)")
        stored = opener(buf, pos, h, where)
    else:
        plain = getattr(opener, "plain", None)  # (None for a partition with nothing sealed)
        if plain is not None:
            plain(h, where)
        stored = memoryview(buf)[start: start + h.stored_length]
    if h.codec == codecs.NONE:
        if len(stored) != h.body_length:
            raise CorruptRecordError(f"uncompressed body length mismatch{where}")
        return stored  # (a plaintext batch's: a view, no copy)
    return codecs.decompress(h.codec, stored, h.body_length, where)


def offset_deltas(body: Any, lay: Layout, h: BatchHeader, where: str = "") -> tuple[int, ...]:
    """The explicit offset deltas of a batch (``lay.offset_deltas >= 0``), checked: they
    increase from 0 or more to the header's last delta."""
    n = h.record_count
    deltas = struct.unpack_from(f"<{n}i", body, lay.offset_deltas)
    if (deltas[0] < 0 or any(b <= a for a, b in zip(deltas, deltas[1:]))
            or deltas[-1] != h.last_offset_delta):
        raise CorruptRecordError(f"offset deltas are not increasing from 0 to the last "
                                 f"delta {h.last_offset_delta}{where}")
    return deltas


def check_body(buf: Any, pos: int, h: BatchHeader, where: str = "",
               opener: Opener | None = None) -> None:
    """Everything a reader of the (already CRC-checked) batch at ``pos`` would trip over,
    checked without making records (``rivven segment verify``): the body decompresses to its
    length and lays out exactly, every column's offsets are valid, explicit offset deltas
    increase from 0 to the header's last delta, the timestamps match the header's first and
    max, header keys are UTF-8, and the batch's padding is zero. An encrypted batch's body is
    opened by ``opener`` (its tag checked) first."""
    stored_end = pos + HEADER_SIZE + h.stored_length
    if any(bytes(memoryview(buf)[stored_end:pos + h.size])):
        raise CorruptRecordError(f"non-zero padding after the body{where}")
    body = body_of(buf, pos, h, where, opener)
    lay = layout(body, h, where)
    n = h.record_count
    if lay.offset_deltas >= 0:
        offset_deltas(body, lay, h, where)
    if lay.timestamps >= 0:
        ts = struct.unpack_from(f"<{n}q", body, lay.timestamps)
        first, top = ts[0], max(ts)
    else:
        first = top = h.first_timestamp
    if (first, top) != (h.first_timestamp, h.max_timestamp):
        raise CorruptRecordError(f"timestamps {first}..{top} do not match the header's first "
                                 f"{h.first_timestamp} and max {h.max_timestamp}{where}")
    pa = arrow()
    body_buf = pa.py_buffer(body)
    binary_array(body_buf, n, lay.key_validity, lay.key_offsets, lay.key_data, lay.key_end,
                 where)
    binary_array(body_buf, n, lay.value_validity, lay.value_offsets, lay.value_data,
                 lay.value_end, where)
    if lay.header_lists >= 0:
        hc = lay.header_count
        keys = binary_array(body_buf, hc, -1, lay.hkey_offsets, lay.hkey_data, lay.hkey_end,
                            where)
        try:
            keys.view(pa.string()).validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecordError(f"a header key is not UTF-8{where}") from None
        binary_array(body_buf, hc, lay.hvalue_validity, lay.hvalue_offsets, lay.hvalue_data,
                     lay.hvalue_end, where)
        lo = struct.unpack_from(f"<{n + 1}i", body, lay.header_lists)
        if any(b < a for a, b in zip(lo, lo[1:])) or lo[-1] != hc:
            raise CorruptRecordError(f"bad header list offsets{where}")


def binary_array(buf: Any, n: int, vpos: int, opos: int, dpos: int, dend: int,
                 where: str = "") -> Any:
    """A zero-copy ``pyarrow.BinaryArray`` over a body buffer, its offsets fully validated."""
    pa = arrow()
    validity = buf.slice(vpos, (n + 7) // 8) if vpos >= 0 else None
    try:
        arr = pa.Array.from_buffers(pa.binary(), n, [validity, buf.slice(opos, 4 * (n + 1)),
                                                     buf.slice(dpos, dend - dpos)])
        arr.validate(full=True)
    except pa.ArrowInvalid as e:
        raise CorruptRecordError(f"bad column offsets: {e}{where}") from None
    return arr


def decode_columns(body: bytes, h: BatchHeader, lay: Layout, where: str = ""
                   ) -> tuple[Any, Any, list, list, Any]:
    """(offsets, timestamps, keys, values, headers) of a batch as Python sequences.

    ``timestamps`` and ``headers`` may be ``itertools.repeat`` objects when uniform/absent.
    Keys and values are cut by pyarrow: five times faster than slicing in Python.
    """
    n = h.record_count
    base = h.base_offset
    if lay.offset_deltas >= 0:
        deltas = offset_deltas(body, lay, h, where)
        offsets: Any = [base + d for d in deltas]
    else:
        offsets = range(base, base + n)
    if lay.timestamps >= 0:
        ts: Any = struct.unpack_from(f"<{n}q", body, lay.timestamps)
    else:
        ts = repeat(h.first_timestamp, n)
    buf = arrow().py_buffer(body)
    keys = binary_array(buf, n, lay.key_validity, lay.key_offsets, lay.key_data, lay.key_end,
                        where).to_pylist()
    values = binary_array(buf, n, lay.value_validity, lay.value_offsets, lay.value_data,
                          lay.value_end, where).to_pylist()
    if lay.header_lists >= 0:
        hc = lay.header_count
        hk = binary_array(buf, hc, -1, lay.hkey_offsets, lay.hkey_data, lay.hkey_end,
                          where).to_pylist()
        hv = binary_array(buf, hc, lay.hvalue_validity, lay.hvalue_offsets, lay.hvalue_data,
                          lay.hvalue_end, where).to_pylist()
        pairs = list(zip([k.decode("utf-8", "replace") for k in hk], hv))
        lo = struct.unpack_from(f"<{n + 1}i", body, lay.header_lists)
        if any(b < a for a, b in zip(lo, lo[1:])) or lo[-1] != hc:
            raise CorruptRecordError(f"bad header list offsets{where}")
        headers: Any = [tuple(pairs[a:b]) for a, b in zip(lo, lo[1:])]
    else:
        headers = repeat((), n)
    return offsets, ts, keys, values, headers


def decode_records(body: bytes, h: BatchHeader, lay: Layout, partition: int | None = None,
                   where: str = "") -> list[Record]:
    if lay.offset_deltas < 0 and lay.header_lists < 0 and native.decode_plain is not None:
        recs = native.decode_plain(  # (the common batch, in C: None when a column is off)
            Record, body, h.record_count, h.base_offset, h.first_timestamp, lay.timestamps,
            lay.key_validity, lay.key_offsets, lay.key_data, lay.key_end, lay.value_validity,
            lay.value_offsets, lay.value_data, lay.value_end, partition)
        if recs is not None:
            return recs
    offsets, ts, keys, values, headers = decode_columns(body, h, lay, where)
    return list(map(_new_tuple, repeat(Record),
                    zip(keys, values, headers, ts, offsets, repeat(partition))))
