"""Record batches as pyarrow arrays without copying (pyarrow is imported only when used).

Keys and values are already in Arrow's binary layout inside a batch body, so each column is a
``from_buffers`` over the body; only offsets (base + deltas) are computed, vectorized.
"""

from __future__ import annotations

import struct
from typing import Any

from .records import BatchHeader, Layout, arrow, binary_array

_cache: dict[str, Any] = {}


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


def batch_to_arrow(body: Any, h: BatchHeader, lay: Layout, where: str = "") -> Any:
    """One batch as a ``pyarrow.RecordBatch`` with the schema of ``schema()``."""
    pa = arrow()
    import pyarrow.compute as pc

    n = h.record_count
    buf = pa.py_buffer(body)
    base = pa.scalar(h.base_offset, pa.int64())
    if lay.offset_deltas >= 0:
        deltas = pa.Array.from_buffers(pa.int32(), n, [None, buf.slice(lay.offset_deltas, 4 * n)])
        offsets = pc.add(deltas.cast(pa.int64()), base)
    else:
        offsets = pc.add(_arange(n), base)
    if lay.timestamps >= 0:
        ts = pa.Array.from_buffers(pa.timestamp("ms"), n, [None, buf.slice(lay.timestamps, 8 * n)])
    else:
        ts = pa.repeat(pa.scalar(h.first_timestamp, pa.timestamp("ms")), n)
    keys = binary_array(buf, n, lay.key_validity, lay.key_offsets, lay.key_data, lay.key_end, where)
    values = binary_array(buf, n, lay.value_validity, lay.value_offsets, lay.value_data,
                          lay.value_end, where)
    htype = schema().field("headers").type
    if lay.header_lists >= 0:
        hc = lay.header_count
        hk = binary_array(buf, hc, -1, lay.hkey_offsets, lay.hkey_data, lay.hkey_end, where)
        hk = hk.view(pa.string())
        hv = binary_array(buf, hc, lay.hvalue_validity, lay.hvalue_offsets, lay.hvalue_data,
                          lay.hvalue_end, where)
        child = pa.StructArray.from_arrays([hk, hv], fields=list(htype.value_type))
        lists = buf.slice(lay.header_lists, 4 * (n + 1))
    else:
        child = pa.StructArray.from_arrays(
            [pa.array([], pa.string()), pa.array([], pa.binary())], fields=list(htype.value_type))
        lists = _zeros(4 * (n + 1))
    headers = pa.Array.from_buffers(htype, n, [None, lists], children=[child])
    if lay.header_lists >= 0:
        headers.validate(full=True)
    return pa.RecordBatch.from_arrays([offsets, ts, keys, values, headers], schema=schema())
