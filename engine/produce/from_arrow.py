"""``Engine.produce_arrow``: a pyarrow Table (or RecordBatch) stored without a Python step
per row.

Columns: ``value`` (binary or string, required; null = a tombstone), and optionally ``key``
(binary or string), ``timestamp`` (an integer of ms since the epoch, or an Arrow timestamp;
null = now), ``headers`` (a list of ``{key: string, value: binary}`` structs, or a map) and
``partition`` (an integer; null = the default partitioner's choice). Keyed rows go where
``Engine.produce`` puts them (Kafka's murmur2, computed in C over the key column's
buffers), keyless rows to one sticky partition per call. Each partition's rows, in table
order, become batches cut at the topic's ``max.message.bytes``, their columns copied
straight from the Arrow buffers into the batch (engine.format.native.arrow_body). Only the
``headers`` column, when present, is converted to Python objects.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .. import clock
from ..errors import InvalidArgument, RecordTooLarge
from ..format import native
from ..format.encode import encode_batch, finish_batch
from ..format.records import (
    ATTR_CODEC,
    ATTR_KEY_NULLS,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    ATTR_UNIFORM_TIMESTAMP,
    ATTR_VALUE_NULLS,
    HEADER_SIZE,
    SEQ_MASK,
    EncodedBatch,
    arrow,
)
from ..storage.catalog import TopicMeta
from ..storage.partitions import check_partition
from .partitioner import StickyPartitioner

COLUMNS = ("key", "value", "timestamp", "headers", "partition")
MAX_ROWS = 1 << 20  # rows per batch at most (the format's offset deltas allow more)
ROW_OVERHEAD = 16  # two int32 offsets, and room for bitmaps and padding


def columns(table: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(key, value, timestamp, headers, partition)`` arrays (None when absent), checked."""
    pa = arrow()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise InvalidArgument(f"produce_arrow takes a pyarrow Table or RecordBatch, not "
                              f"{type(table).__name__}")
    names = table.column_names
    unknown = [n for n in names if n not in COLUMNS]
    if unknown or "value" not in names or len(set(names)) != len(names):
        raise InvalidArgument(
            f"produce_arrow needs a 'value' column and takes only {', '.join(COLUMNS)}; got "
            f"{', '.join(names) or 'no columns'} (select or rename the columns first)")

    def col(name: str) -> Any:
        return table.column(name).combine_chunks() if name in names else None

    return (_binary(col("key"), "key"), _binary(col("value"), "value"),
            _timestamps(col("timestamp")), col("headers"), _partitions(col("partition")))


def _binary(arr: Any, name: str) -> Any:
    pa = arrow()
    if arr is None:
        return None
    t = arr.type
    if t == pa.binary():
        return arr
    if t in (pa.string(), pa.large_binary(), pa.large_string()) or pa.types.is_binary_view(t) \
            or pa.types.is_string_view(t):
        try:
            return arr.cast(pa.binary())  # (string -> binary: the same buffers)
        except pa.ArrowInvalid as e:
            raise InvalidArgument(f"column {name!r} is over 2 GiB: produce it in parts ({e})"
                                  ) from None
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    raise InvalidArgument(f"column {name!r} is {t}; produce_arrow takes binary or string "
                          f"(cast it first, e.g. pc.cast(col, pa.binary()))")


def _timestamps(arr: Any) -> Any:
    pa, pc = arrow(), _compute()
    if arr is None:
        return None
    t = arr.type
    if pa.types.is_timestamp(t):
        arr = arr.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
    elif pa.types.is_integer(t):
        arr = arr.cast(pa.int64())
    elif not pa.types.is_null(t):
        raise InvalidArgument(f"column 'timestamp' is {t}; use ms since the epoch (int64) or "
                              "an Arrow timestamp")
    else:
        arr = pa.nulls(len(arr), pa.int64())
    if arr.null_count:
        arr = pc.fill_null(arr, clock.now_ms())
    if len(arr):
        lo, hi = pc.min_max(arr).values()
        if lo.as_py() < 0 or hi.as_py() >= 1 << 62:
            raise InvalidArgument("record timestamps must be non-negative integers (ms since "
                                  "epoch)")
    return arr


def _partitions(arr: Any) -> Any:
    pa = arrow()
    if arr is None:
        return None
    if not (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
        raise InvalidArgument(f"column 'partition' is {arr.type}; it takes partition numbers")
    return arr.cast(pa.int64()) if not pa.types.is_null(arr.type) else None


def _compute() -> Any:
    import pyarrow.compute as pc

    return pc


def assign(meta: TopicMeta, key: Any, part_col: Any, partition: int | None,
           sticky: StickyPartitioner) -> Any:
    """Partition per row: an int32 array, or an int when every row goes to one."""
    pa, pc = arrow(), _compute()
    count = meta.partitions
    if partition is not None:
        check_partition(meta, partition)
        return partition
    if part_col is not None and part_col.null_count == 0:
        chosen = part_col
    else:
        base: Any
        if key is None or key.null_count == len(key):
            base = sticky.next(count)
        elif count == 1:
            base = 0
        else:
            other = sticky.next(count) if key.null_count else 0
            validity, offsets, data = key.buffers()
            raw = native.arrow_key_partitions(validity if key.null_count else None, 0, offsets,
                                              data, key.offset, len(key), count, other)
            if raw is None:
                raise InvalidArgument("column 'key' could not be read (damaged Arrow buffers?)")
            base = pa.Array.from_buffers(pa.int32(), len(key), [None, pa.py_buffer(raw)])
        if part_col is None:
            return base
        fill = pa.scalar(base, pa.int64()) if isinstance(base, int) else base.cast(pa.int64())
        chosen = pc.if_else(pc.is_null(part_col), fill, part_col)
    lo, hi = pc.min_max(chosen).values()
    for p in (lo.as_py(), hi.as_py()):
        check_partition(meta, p)
    return chosen.cast(pa.int32())


def groups(parts: Any) -> list[tuple[int, Any]]:
    """``[(partition, row indices or None for all rows)]`` in partition order."""
    pc = _compute()
    if isinstance(parts, int):
        return [(parts, None)]
    order = pc.array_sort_indices(parts)  # (stable: rows keep their order within a partition)
    ordered = parts.take(order)
    runs = pc.run_end_encode(ordered)
    ends = runs.run_ends.to_pylist()
    values = runs.values.to_pylist()
    if len(values) == 1:
        return [(values[0], None)]
    out, start = [], 0
    for p, end in zip(values, ends):
        out.append((p, order.slice(start, end - start)))
        start = end
    return out


Stamp = tuple[int, int, int, int]  # producer id, epoch, first sequence, attribute flags


def batches(key: Any, value: Any, ts: Any, headers: Any, codec: int, limit: int, topic: str,
            stamp: Stamp | None = None) -> list[EncodedBatch]:
    """One partition's rows as batches of at most ``limit`` bytes, in row order; with
    ``stamp`` format 2 (a transaction's), each batch's sequence its first row's."""
    n = len(value)
    koffs = _offsets(key) if key is not None else None
    voffs = _offsets(value)
    per_row = ROW_OVERHEAD + (8 if ts is not None else 0)

    def size(a: int, b: int) -> int:  # (bytes of rows a..b as a batch, near enough)
        kb = koffs[b] - koffs[a] if koffs is not None else 0
        return HEADER_SIZE + 64 + per_row * (b - a) + kb + voffs[b] - voffs[a]

    out = []
    a = 0
    while a < n:
        hi = min(n, a + MAX_ROWS)
        if size(a, hi) <= limit:
            b = hi
        else:  # the last row that still fits
            b = bisect_right(range(a + 1, hi + 1), limit, key=lambda x: size(a, x)) + a
            if b == a:
                raise _too_large(a, size(a, a + 1), limit, topic)
        out.extend(_encode_fitting(key, value, ts, headers, a, b, codec, limit, topic, stamp))
        a = b
    return out


def min_max(arr: Any) -> tuple[int, int]:
    """The smallest and largest value of an int64 column (not empty)."""
    lo, hi = _compute().min_max(arr).values()
    return lo.as_py(), hi.as_py()


def _offsets(arr: Any) -> memoryview:
    """An Arrow binary array's int32 offsets, from its first row."""
    mv = memoryview(arr.buffers()[1])
    return mv[:len(mv) // 4 * 4].cast("i")[arr.offset:]


def _encode_fitting(key: Any, value: Any, ts: Any, headers: Any, a: int, b: int, codec: int,
                    limit: int, topic: str, stamp: Stamp | None = None) -> list[EncodedBatch]:
    """Rows a..b as batches under ``limit``: halved until they fit (headers are not in the
    estimate), a single row over it refused."""
    enc = _encode(key, value, ts, headers, a, b, codec, stamp)
    if len(enc) <= limit:
        return [enc]
    if b - a == 1:
        raise _too_large(a, len(enc), limit, topic)
    mid = (a + b) // 2
    return (_encode_fitting(key, value, ts, headers, a, mid, codec, limit, topic, stamp)
            + _encode_fitting(key, value, ts, headers, mid, b, codec, limit, topic, stamp))


def _fields(stamp: Stamp | None, a: int) -> tuple[int, int, int, int]:
    """``(producer id, epoch, sequence, flags)`` of the batch whose first row is ``a``."""
    if stamp is None:
        return -1, -1, -1, 0
    pid, epoch, seq, flags = stamp
    if pid < 0:  # (no producer: only the timestamp flag)
        return -1, -1, -1, flags
    return pid, epoch, (seq + a) & SEQ_MASK, flags


def _encode(key: Any, value: Any, ts: Any, headers: Any, a: int, b: int, codec: int,
            stamp: Stamp | None = None) -> EncodedBatch:
    pc = _compute()
    n = b - a
    if ts is not None:
        lo, hi = pc.min_max(ts.slice(a, n)).values()
        first, max_ts = ts[a].as_py(), hi.as_py()
        uniform = lo.as_py() == max_ts == first
    else:
        first = max_ts = clock.now_ms()
        uniform = True
    fields = _fields(stamp, a)
    if headers is not None and headers.slice(a, n).null_count != n:
        enc = _with_headers(key, value, ts, headers, a, b, codec, first, fields)
    else:
        enc = _plain(key, value, ts if not uniform else None, a, n, codec, first, max_ts, fields)
    return enc


def _plain(key: Any, value: Any, ts: Any, a: int, n: int, codec: int, first: int,
           max_ts: int, fields: tuple[int, int, int, int] = (-1, -1, -1, 0)) -> EncodedBatch:
    pid, epoch, seq, flags = fields
    attrs = (codec & ATTR_CODEC) | (flags & (ATTR_TRANSACTIONAL | ATTR_LOG_APPEND_TIME))
    specs: list = []
    if ts is None:
        attrs |= ATTR_UNIFORM_TIMESTAMP
    else:
        specs.append(("fixed", ts.buffers()[1], (ts.offset + a) * 8, n * 8))
    if key is None or key.slice(a, n).null_count == n:
        specs.append(("null", n))
        attrs |= ATTR_KEY_NULLS
    else:
        specs.append(_spec(key, a, n))
        if key.slice(a, n).null_count:
            attrs |= ATTR_KEY_NULLS
    specs.append(_spec(value, a, n))
    if value.slice(a, n).null_count:
        attrs |= ATTR_VALUE_NULLS
    buf = native.arrow_body(HEADER_SIZE, specs)
    if buf is None:
        raise InvalidArgument("an Arrow column could not be read (damaged buffers?)")
    return finish_batch(buf, memoryview(buf)[HEADER_SIZE:], attrs, n, n - 1, first, max_ts,
                        codec, pid, epoch, seq)


def _spec(arr: Any, a: int, n: int) -> tuple:
    validity, offsets, data = arr.buffers()
    nulls = arr.slice(a, n).null_count > 0
    return ("binary", validity if nulls else None, 0, offsets, data, arr.offset + a, n)


def _with_headers(key: Any, value: Any, ts: Any, headers: Any, a: int, b: int, codec: int,
                  first: int, fields: tuple[int, int, int, int] = (-1, -1, -1, 0)
                  ) -> EncodedBatch:
    """Rows with headers: the general encoder (headers are lists of pairs in Python)."""
    n = b - a
    hs: list[list[tuple[str, bytes | None]]] = []
    for h in headers.slice(a, n).to_pylist():
        if h is None:
            hs.append([])
        elif isinstance(h, dict):
            hs.append([(h["key"], h["value"])])
        else:
            pairs = []
            for item in h:
                k, v = (item["key"], item["value"]) if isinstance(item, dict) else item
                pairs.append((k, v.encode() if isinstance(v, str) else v))
            hs.append(pairs)
    keys = key.slice(a, n).to_pylist() if key is not None else [None] * n
    values = value.slice(a, n).to_pylist()
    stamps: Any = ts.slice(a, n).to_pylist() if ts is not None else first
    pid, epoch, seq, flags = fields
    return encode_batch(keys, values, stamps, hs, codec, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, flags=flags)


def _too_large(row: int, size: int, limit: int, topic: str) -> RecordTooLarge:
    err = RecordTooLarge(f"row {row} is about {size} bytes as a batch, over max.message.bytes="
                         f"{limit} of topic {topic!r}; raise it with 'rivven topic alter-config "
                         f"{topic} --set max.message.bytes=N'")
    err.index = row  # type: ignore[attr-defined]
    return err
