"""Record batches as pyarrow arrays without copying (pyarrow is imported only when used).

Keys and values are already in Arrow's binary layout inside a batch body, so each column is a
``from_buffers`` over the body; only offsets (base + deltas) are computed, vectorized.
"""

from __future__ import annotations

import struct
from typing import Any

from .decode import Layout, binary_array
from .records import BatchHeader, arrow

_cache: dict[Any, Any] = {}  # (str keys, and ("noh", n))


def schema() -> Any:
    s = _cache.get("schema")
    if s is None:
        pa = arrow()
        s = _cache["schema"] = pa.schema([
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms")),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ])
    return s


def empty_table() -> Any:
    return schema().empty_table()


def _arange(n: int) -> Any:
    """An int64 array 0..n-1 (cached, sliced)."""
    pa = arrow()
    a = _cache.get("arange")
    if a is None or len(a) < n:
        size = max(n, 4096)
        a = _cache["arange"] = pa.Array.from_buffers(
            pa.int64(), size, [None, pa.py_buffer(struct.pack(f"<{size}q", *range(size)))])
    return a.slice(0, n)


def _zeros(nbytes: int) -> Any:
    pa = arrow()
    z = _cache.get("zeros")
    if z is None or z.size < nbytes:
        z = _cache["zeros"] = pa.py_buffer(bytes(max(nbytes, 1 << 16)))
    return z.slice(0, nbytes)


def _types() -> dict[str, Any]:
    t = _cache.get("types")
    if t is None:
        pa = arrow()
        import pyarrow.compute as pc

        sch = schema()
        t = _cache["types"] = {
            "int32": pa.int32(), "int64": pa.int64(), "ts": pa.timestamp("ms"),
            "headers": sch.field("headers").type,
            "hfields": list(sch.field("headers").type.value_type),
            "add": pc.get_function("add"), "schema": sch,
        }
    return t


def _no_headers(n: int) -> Any:
    """A list array of n empty header lists (cached per n: most batches have no headers)."""
    key = ("noh", n)
    arr = _cache.get(key)
    if arr is None:
        pa = arrow()
        t = _types()
        child = pa.StructArray.from_arrays(
            [pa.array([], pa.string()), pa.array([], pa.binary())], fields=t["hfields"])
        arr = pa.Array.from_buffers(t["headers"], n, [None, _zeros(4 * (n + 1))], children=[child])
        if len(_cache) < 256:
            _cache[key] = arr
    return arr


def batch_columns(body: Any, h: BatchHeader, lay: Layout, where: str = "") -> tuple[Any, ...]:
    """(offset deltas or None, timestamps, keys, values, headers) arrays of one batch.

    Offsets come back as int32 deltas only when the batch has gaps; contiguous batches are
    numbered by the caller with one vectorized add for a whole table.
    """
    pa = arrow()
    t = _types()
    n = h.record_count
    buf = pa.py_buffer(body)
    deltas = None
    if lay.offset_deltas >= 0:
        deltas = pa.Array.from_buffers(t["int32"], n, [None, buf.slice(lay.offset_deltas, 4 * n)])
    if lay.timestamps >= 0:
        tsbuf = buf.slice(lay.timestamps, 8 * n)
    else:  # one timestamp for all: repeat its 8 bytes (a C memcpy)
        tsbuf = pa.py_buffer(struct.pack("<q", h.first_timestamp) * n)
    ts = pa.Array.from_buffers(t["ts"], n, [None, tsbuf])
    keys = binary_array(buf, n, lay.key_validity, lay.key_offsets, lay.key_data, lay.key_end, where)
    values = binary_array(buf, n, lay.value_validity, lay.value_offsets, lay.value_data,
                          lay.value_end, where)
    if lay.header_lists >= 0:
        hc = lay.header_count
        hk = binary_array(buf, hc, -1, lay.hkey_offsets, lay.hkey_data, lay.hkey_end, where)
        hk = hk.view(pa.string())
        hv = binary_array(buf, hc, lay.hvalue_validity, lay.hvalue_offsets, lay.hvalue_data,
                          lay.hvalue_end, where)
        child = pa.StructArray.from_arrays([hk, hv], fields=t["hfields"])
        headers = pa.Array.from_buffers(t["headers"], n,
                                        [None, buf.slice(lay.header_lists, 4 * (n + 1))],
                                        children=[child])
        try:
            headers.validate(full=True)
        except pa.ArrowInvalid as e:
            from ..errors import CorruptRecordError

            raise CorruptRecordError(f"bad header lists: {e}{where}") from None
    else:
        headers = _no_headers(n)
    return deltas, ts, keys, values, headers


def offsets_column(runs: list[tuple[int, int, Any]]) -> Any:
    """int64 offsets from ``(base_offset, count, deltas-or-None)`` per batch, in order.

    Consecutive contiguous batches become one ``base + arange`` (a single vectorized add).
    """
    pa = arrow()
    t = _types()
    chunks = []
    i = 0
    while i < len(runs):
        base, count, deltas = runs[i]
        if deltas is not None:
            chunks.append(t["add"].call([deltas.cast(t["int64"]), pa.scalar(base, t["int64"])]))
            i += 1
            continue
        total = count
        j = i + 1
        while j < len(runs) and runs[j][2] is None and runs[j][0] == base + total:
            total += runs[j][1]
            j += 1
        chunks.append(t["add"].call([_arange(total), pa.scalar(base, t["int64"])]))
        i = j
    return pa.chunked_array(chunks, t["int64"])


def table(parts: list[tuple[int, int, tuple[Any, ...]]]) -> Any:
    """A ``pyarrow.Table`` from ``(base_offset, count, batch_columns(...))`` per batch."""
    pa = arrow()
    t = _types()
    if not parts:
        return empty_table()
    offsets = offsets_column([(b, n, cols[0]) for b, n, cols in parts])
    columns = [offsets] + [pa.chunked_array([cols[k] for _, _, cols in parts], f.type)
                           for k, f in zip(range(1, 5), list(t["schema"])[1:])]
    return pa.Table.from_arrays(columns, schema=t["schema"])
