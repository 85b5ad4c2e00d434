"""The produce path's per-record loops: C (engine/format/fastcodec.c, built by ``pip
install``) when it is there, else the pure-Python versions below, which give identical
results (tests/unit/format/test_native.py). Each answers None where its input is not the
plain case it handles; the caller then takes the general path.

- ``plain_body(keys, values, reserve)``: ``(buffer, key_nulls)``: ``reserve`` zero bytes (room
  for the batch header) and the key and value columns of a batch (keys bytes or None, values
  bytes) exactly as engine.format.encode lays them out;
- ``record_columns(records)``: ``(keys, values)`` of Records with no headers, timestamp or
  partition of their own;
- ``key_partitions(keys, count)``: Kafka's default partition of each key (None for a None key);
- ``arrow_body(reserve, specs)``, ``arrow_key_partitions(...)``: the same from Arrow buffers
  (engine.produce.from_arrow);
- ``decode_plain(Record, body, ...)``: the Records of a batch body without explicit offsets
  or headers (C only: without it engine.format.decode takes its general path);
- ``kafka_body(records, count, base_ts, reserve, max_body)``: ``[(buffer, attributes, first
  ts, max ts, first record, records), ...]``: the records of a Kafka batch (magic 2,
  decompressed) as rivven batch bodies after ``reserve`` zero bytes each, cut where one would
  pass ``max_body`` (0: one); None when one is malformed (C only: its Python twin is
  engine.format.kafka_batch.py_kafka_body, which reads with that module's ``records``);
- ``kafka_records(body, count, first_ts, last_delta, reserve, *layout)``: a rivven batch
  body's records as Kafka's, after ``reserve`` zero bytes (Fetch); None when a column does
  not check out.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from itertools import accumulate, repeat
from typing import Any

_ZEROS = bytes(8)


def _pad(b: bytes) -> bytes:
    return _ZEROS[: -len(b) & 7]


def _column(items: Sequence[Any], n: int) -> list[bytes]:
    """A binary column without nulls: offsets, data (each padded to 8)."""
    offs = struct.pack(f"<{n + 1}i", *accumulate(map(len, items), initial=0))
    data = b"".join(items)
    return [offs, _pad(offs), data, _pad(data)]


def py_plain_body(keys: Sequence[Any], values: Sequence[Any], reserve: int = 0
                  ) -> tuple[bytearray, bool] | None:
    if not 0 <= reserve <= 4096:
        return None
    if type(keys) not in (list, tuple) or type(values) not in (list, tuple):
        return None
    n = len(values)
    if n == 0 or len(keys) != n:
        return None
    if any(type(v) is not bytes for v in values):
        return None
    nulls = keys.count(None)
    if any(type(k) is not bytes for k in keys if k is not None):
        return None
    if sum(map(len, values)) >= 1 << 31 or sum(len(k) for k in keys if k is not None) >= 1 << 31:
        return None
    if nulls == 0:
        parts = _column(keys, n)
    else:
        bits = bytearray((n + 7) // 8)
        for i, k in enumerate(keys):
            if k is not None:
                bits[i >> 3] |= 1 << (i & 7)
        bitmap = bytes(bits)
        parts = [bitmap, _pad(bitmap)]
        if nulls == n:
            zeros = bytes(4 * (n + 1))
            parts += [zeros, _pad(zeros)]
        else:
            parts += _column([b"" if k is None else k for k in keys], n)
    body = bytearray(reserve)
    body += b"".join(parts + _column(values, n))
    if len(body) - reserve >= 1 << 31:
        return None
    return body, nulls > 0


def py_record_columns(records: Any) -> tuple[list, list] | None:
    if type(records) is not list:
        return None
    for r in records:
        if not isinstance(r, tuple) or len(r) != 6:
            return None
        h = r[2]
        if h is not None and (type(h) not in (tuple, list) or len(h)):
            return None
        if r[3] is not None or r[5] is not None:
            return None
    return [r[0] for r in records], [r[1] for r in records]


_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def py_key_partitions(keys: Sequence[Any], count: int) -> list[int | None] | None:
    if count <= 0 or count > 0x7FFFFFFF or type(keys) not in (list, tuple):
        return None
    if any(k is not None and type(k) is not bytes for k in keys):
        return None
    return [None if k is None else (murmur2(k) & 0x7FFFFFFF) % count for k in keys]


def _bits(valid: Any, first: int, n: int) -> bytearray:
    mv = memoryview(valid)
    out = bytearray((n + 7) // 8)
    for i in range(n):
        j = first + i
        if mv[j >> 3] >> (j & 7) & 1:
            out[i >> 3] |= 1 << (i & 7)
    return out


def _binary_spec(spec: tuple) -> tuple[Any, list, int, int] | None:
    """(validity, offsets rebased, first data byte, end) of a "binary" spec, or None."""
    _, valid, bit_offset, offs, data, start, n = spec
    if offs is None or start < 0 or n <= 0 or bit_offset < 0:
        return None
    o = memoryview(offs).cast("B")
    if (start + n + 1) * 4 > len(o):
        return None
    o = o[:(len(o) // 4) * 4].cast("i")
    rows = o[start:start + n + 1].tolist()
    if rows[0] < 0 or any(b < a for a, b in zip(rows, rows[1:])):
        return None
    dlen = len(memoryview(data).cast("B")) if data is not None else 0
    if rows[-1] > rows[0] and rows[-1] > dlen:
        return None
    if valid is not None and (bit_offset + start + n + 7) // 8 > len(memoryview(valid).cast("B")):
        return None
    return valid, rows, rows[0], rows[-1]


def py_arrow_body(reserve: int, cols: list) -> bytearray | None:
    if not 0 <= reserve <= 4096 or type(cols) is not list or len(cols) > 8:
        return None
    out = bytearray(reserve)
    for spec in cols:
        if spec[0] == "fixed":
            _, buf, start, length = spec
            mv = memoryview(buf).cast("B")
            if start < 0 or length < 0 or start + length > len(mv):
                return None
            part = bytes(mv[start:start + length])
            out += part + _pad(part)
        elif spec[0] == "null":
            n = spec[1]
            if n <= 0:
                return None
            out += bytes(-(-((n + 7) // 8) // 8) * 8) + bytes(-(-(4 * (n + 1)) // 8) * 8)
        elif spec[0] == "binary":
            got = _binary_spec(spec)
            if got is None:
                return None
            valid, rows, d0, d1 = got
            n = spec[6]
            if valid is not None:
                bits = bytes(_bits(valid, spec[2] + spec[5], n))
                out += bits + _pad(bits)
            offs = struct.pack(f"<{n + 1}i", *[r - d0 for r in rows])
            data = bytes(memoryview(spec[4]).cast("B")[d0:d1]) if d1 > d0 else b""
            out += offs + _pad(offs) + data + _pad(data)
        else:
            return None
        if len(out) - reserve >= 1 << 31:
            return None
    return out


def py_arrow_key_partitions(valid: Any, bit_offset: int, offs: Any, data: Any, start: int,
                            n: int, count: int, other: int) -> bytes | None:
    got = _binary_spec(("binary", valid, bit_offset, offs, data, start, n))
    if got is None or not 0 < count <= 0x7FFFFFFF or not 0 <= other < count:
        return None
    _, rows, _, _ = got
    d = memoryview(data).cast("B") if data is not None else memoryview(b"")
    bits = _bits(valid, bit_offset + start, n) if valid is not None else None
    parts = []
    for i in range(n):
        if bits is not None and not bits[i >> 3] >> (i & 7) & 1:
            parts.append(other)
        else:
            parts.append((murmur2(bytes(d[rows[i]:rows[i + 1]])) & 0x7FFFFFFF) % count)
    return struct.pack(f"<{n}i", *parts)


def py_acks(partition: int, base: int, count: int) -> list[tuple[int, int]]:
    return list(zip(repeat(partition, count), range(base, base + count)))


# ---------------------------------------------------------------- Kafka record batches
_I64 = (-(1 << 63), (1 << 63) - 1)


def zigzag(n: int) -> bytes:
    """``n`` as Kafka's zigzag varint (a record's integers and lengths)."""
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _col(body: Any, n: int, v: int, o: int, d: int, e: int) -> list[bytes | None] | None:
    """A binary column's items (None where null), or None when its buffers do not check out
    (fastcodec.c's offsets_ok)."""
    size = len(body)
    if o < 0 or o + 4 * (n + 1) > size or d < 0 or e < d or e > size:
        return None
    offs = struct.unpack_from(f"<{n + 1}i", body, o)
    if offs[0] != 0 or offs[n] != e - d or any(b < a for a, b in zip(offs, offs[1:])):
        return None
    if v >= 0 and v + (n + 7) // 8 > size:
        return None
    out: list[bytes | None] = []
    for i in range(n):
        if v >= 0 and not body[v + (i >> 3)] >> (i & 7) & 1:
            out.append(None)
        else:
            out.append(bytes(body[d + offs[i]:d + offs[i + 1]]))
    return out


def _field(x: bytes | None) -> bytes:
    return b"\x01" if x is None else zigzag(len(x)) + x


def py_kafka_records(body: Any, n: int, first_ts: int, last_delta: int, reserve: int,
                     od: int, tsp: int, kv: int, ko: int, kd: int, ke: int, vv: int, vo: int,
                     vd: int, ve: int, hl: int, hko: int, hkd: int, hke: int, hvv: int,
                     hvo: int, hvd: int, hve: int, hc: int) -> bytearray | None:
    """A rivven body's records as Kafka's (fastcodec.c's kafka_records)."""
    body = memoryview(body).cast("B")
    size = len(body)
    if n <= 0 or not 0 <= reserve <= 4096:
        return None
    keys = _col(body, n, kv, ko, kd, ke)
    values = _col(body, n, vv, vo, vd, ve)
    if keys is None or values is None:
        return None
    ts: Any = [0] * n
    if tsp >= 0:
        if tsp + 8 * n > size:
            return None
        ts = [t - first_ts for t in struct.unpack_from(f"<{n}q", body, tsp)]
        if not (_I64[0] <= min(ts) and max(ts) <= _I64[1]):
            return None
    deltas: Any = range(n)
    if od >= 0:
        if od + 4 * n > size:
            return None
        deltas = struct.unpack_from(f"<{n}i", body, od)
        if (deltas[0] < 0 or deltas[-1] != last_delta
                or any(b <= a for a, b in zip(deltas, deltas[1:]))):
            return None
    lists: Any = [0] * (n + 1)
    hkeys: list = []
    hvals: list = []
    if hl >= 0:
        if hc < 0 or hl + 4 * (n + 1) > size:
            return None
        lists = struct.unpack_from(f"<{n + 1}i", body, hl)
        if lists[0] != 0 or lists[n] != hc or any(b < a for a, b in zip(lists, lists[1:])):
            return None
        hk = _col(body, hc, -1, hko, hkd, hke)
        hv = _col(body, hc, hvv, hvo, hvd, hve)
        if hk is None or hv is None:
            return None
        try:
            for k in hk:
                k.decode()  # type: ignore[union-attr]
        except UnicodeDecodeError:
            return None
        hkeys, hvals = hk, hv
    out = bytearray(reserve)
    for i in range(n):
        h0, h1 = lists[i], lists[i + 1]
        rec = b"".join([b"\x00", zigzag(ts[i]), zigzag(deltas[i]), _field(keys[i]), _field(values[i]),
                        zigzag(h1 - h0)] + [_field(hkeys[j]) + _field(hvals[j]) for j in range(h0, h1)])
        out += zigzag(len(rec))
        out += rec
        if len(out) >= 1 << 31:
            return None
    return out


try:  # RIVVEN_NATIVE=0: the pure-Python twins (tests compare the two)
    from . import fastcodec as _c  # type: ignore[attr-defined]

    if os.environ.get("RIVVEN_NATIVE", "1") == "0":
        _c = None
except ImportError:  # (no compiler where it was installed: the same results, slower)
    _c = None

plain_body: Any = _c.plain_body if _c else py_plain_body
record_columns: Any = _c.record_columns if _c else py_record_columns
key_partitions: Any = _c.key_partitions if _c else py_key_partitions
arrow_body: Any = _c.arrow_body if _c else py_arrow_body
arrow_key_partitions: Any = _c.arrow_key_partitions if _c else py_arrow_key_partitions
# (C only: engine.format.decode.decode_records is its Python twin)
decode_plain: Any = _c.decode_plain if _c else None
acks: Any = _c.acks if _c else py_acks
# (C only: engine.format.kafka_batch.py_kafka_body is its Python twin)
kafka_body: Any = _c.kafka_body if _c else None
kafka_records: Any = _c.kafka_records if _c else py_kafka_records
BUILT = _c is not None
