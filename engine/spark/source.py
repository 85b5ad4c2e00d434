"""A Spark reader for rivven topics (PySpark's Python Data Source API, Arrow batches).

    spark.dataSource.register(RivvenDataSource)
    df = (spark.read.format("rivven").option("path", "/data").option("topic", "orders")
          .load())          # topic, partition, offset, timestamp, key, value, headers

Options: ``path`` (data dir) and ``topic`` (required); ``partitions`` ("0,2"); ``endOffsets``
(JSON ``{"0": 1200}``: read below these offsets only); ``splitBytes`` (default 64 MiB);
``keyring`` (an encrypted topic's keyring file; default ``RIVVEN_KEYRING`` where the driver
runs: engine.spark.keys); ``isolationLevel`` (read_uncommitted, read_committed);
``lastPerKey`` ("true": per split and partition only the last record of each key, for a
keys-only schema; a compaction pass needs no more); ``decode`` ("value", "key" or
"key,value": registry-encoded columns as the schema's typed values, with ``valueSubject`` /
``keySubject``, ``valueSchemaId`` / ``keySchemaId`` and ``decodeErrors``: schema_columns).
A user schema with a subset of the columns reads only those (``tombstone`` boolean is also
available: value is null), e.g. ``.schema("partition int, offset long, key binary")``.
Splits are whole segments, and large segments are cut at offset-index positions, so the
work spreads over executors; decoding (and every CRC check) happens in the executors.
Timestamps are epoch milliseconds (long).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

SCHEMA = ("topic string, partition int, offset long, timestamp long, key binary, value binary, "
          "headers array<struct<key: string, value: binary>>")
COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "tombstone")
ROWS_PER_BATCH = 65536


class Piece:
    """Batches of one segment file that start in ``[start, end)`` (byte positions)."""

    def __init__(self, topic: str, partition: int, path: str, base: int, start: int, end: int,
                 end_offset: int | None, aborted: list[list[int]] | None = None,
                 keys: Any = None) -> None:
        self.topic, self.partition, self.path, self.base = topic, partition, path, base
        self.start, self.end, self.end_offset = start, end, end_offset
        # [[producer id, first, last]...]: transactions whose records are left out
        self.aborted = aborted
        self.keys = keys  # an encrypted topic's data keys (engine.crypto.topic.StaticKeys)


class SegmentSplit(InputPartition):
    """One task's work: consecutive pieces of segments, about ``splitBytes`` in all (a task
    costs a Python worker start-up, so small segments share one)."""

    def __init__(self, pieces: list[Piece]) -> None:
        super().__init__((pieces[0].partition, pieces[0].base, pieces[0].start))
        self.pieces = pieces


def splits_for(data_dir: str, topic: str, partitions: list[int] | None,
               end_offsets: dict[int, int], split_bytes: int, splits: int = 0,
               aborted: dict[int, list[list[int]]] | None = None, keys: Any = None
               ) -> list[SegmentSplit]:
    """Pieces of at most ``split_bytes`` (segments cut at index positions), packed into
    splits of about ``split_bytes`` each, or into about ``splits`` equal splits; the records
    of the ``aborted`` transactions of a partition are left out of its pieces; ``keys`` open
    an encrypted topic's batches."""
    from ..segments import durable_end, filenames
    from ..segments.index import OffsetIndex, max_entries

    tdir = os.path.join(data_dir, "topics", topic)
    if not os.path.isdir(tdir):
        raise ValueError(f"topic {topic!r} does not exist in {data_dir}")
    if partitions is None:
        partitions = sorted(int(d.split("-", 1)[1]) for d in os.listdir(tdir)
                            if d.startswith("partition-"))
    out = []
    for p in partitions:
        pdir = filenames.partition_dir(data_dir, topic, p)
        end = end_offsets.get(p)
        # no further than the durable end: a writer's bytes past it may be lost yet
        pub = durable_end.read_published(pdir)
        if pub is not None:
            end = pub[2] if end is None else min(end, pub[2])
        for base in filenames.segment_bases(pdir):
            if end is not None and base >= end:
                break
            path = filenames.path(pdir, base, filenames.LOG)
            size = os.path.getsize(path)
            limit = durable_end.visible(pub, base)
            if limit is not None:
                size = min(size, limit)
            cuts = [0]
            if size > split_bytes:  # cut at index entries (batch starts) near each split_bytes
                idx = OffsetIndex(filenames.path(pdir, base, filenames.INDEX), writable=False,
                                  max_entries=max_entries(size))
                try:
                    for pos in idx.values:
                        if 0 < pos < size and pos - cuts[-1] >= split_bytes:
                            cuts.append(pos)
                finally:
                    idx.close()
            cuts.append(size)
            for a, b in zip(cuts, cuts[1:]):
                out.append(Piece(topic, p, path, base, a, b, end, (aborted or {}).get(p), keys))
    target = split_bytes
    if splits > 0:
        target = max(1, sum(p.end - p.start for p in out) // splits)
    packed: list[list[Piece]] = []
    size = 0
    for piece in out:
        n = piece.end - piece.start
        if not packed or size + n // 2 > target:  # close a split once it is about full
            packed.append([])
            size = 0
        packed[-1].append(piece)
        size += n
    return [SegmentSplit(ps) for ps in packed]


def read_split(split: SegmentSplit, columns: list[str], last_per_key: bool = False,
               decoders: Any = None) -> Iterator[Any]:
    """Arrow record batches (``columns`` only) of one split; with ``last_per_key`` only the
    last record of each key per partition within the split (see ``last_per_key``); with
    ``decoders`` (schema_columns.Decoders) the decoded columns' values."""
    cols = columns if decoders is None or "offset" in columns else [*columns, "offset"]

    def out(batches: Iterator[Any], piece: Piece) -> Iterator[Any]:
        if decoders is None:
            yield from batches
        else:
            for b in batches:
                yield decoders.batch(b, piece.topic, piece.partition, columns)

    if not last_per_key:
        for piece in split.pieces:
            yield from out(read_piece(piece, cols), piece)
    else:
        run: list[Any] = []
        for i, piece in enumerate(split.pieces):
            if i and piece.partition != split.pieces[i - 1].partition:
                yield from out(_last_per_key(run, cols), split.pieces[i - 1])
                run = []
            run.extend(read_piece(piece, cols))
        yield from out(_last_per_key(run, cols), split.pieces[-1])


LAST_PER_KEY_COLUMNS = {"topic", "partition", "offset", "key", "tombstone"}


def _last_per_key(batches: list[Any], columns: list[str]) -> Iterator[Any]:
    """The batches of one partition (in offset order) reduced to the last record per key:
    Arrow's hash aggregation (C++), so only about one row per distinct key crosses into the
    JVM. Records without a key pass through untouched (whoever reads them refuses them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batches:
        return
    t = pa.Table.from_batches(batches)
    missing = pc.is_null(t["key"])
    nulls = None
    if pc.any(missing).as_py():
        nulls, t = t.filter(missing), t.filter(pc.invert(missing))
    aggs = [("offset", "max")] + [("tombstone", "last")] * ("tombstone" in columns)
    # use_threads=False keeps input order, so "last" is the record with the highest offset
    g = t.group_by("key", use_threads=False).aggregate(aggs)
    n = g.num_rows
    arrays = {"key": g["key"], "offset": g["offset_max"]}
    if "tombstone" in columns:
        arrays["tombstone"] = g["tombstone_last"]
    if "topic" in columns:
        arrays["topic"] = pa.array([t["topic"][0].as_py() if len(t) else None] * n, pa.string())
    if "partition" in columns:
        arrays["partition"] = pa.array([t["partition"][0].as_py() if len(t) else None] * n,
                                       pa.int32())
    out = pa.Table.from_arrays([arrays[c] for c in columns], schema=t.schema)
    if nulls is not None:
        out = pa.concat_tables([out, nulls])
    yield from out.to_batches(max_chunksize=ROWS_PER_BATCH)


def sealed_claim(directory: str) -> Any:
    """Where a partition records that every batch is sealed (none when damaged: the engine
    reports that file)."""
    from ..errors import DamagedMetadata
    from ..segments import sealed_range

    try:
        return sealed_range.read(directory)
    except DamagedMetadata:
        return ()


def read_piece(split: Piece, columns: list[str]) -> Iterator[Any]:
    import pyarrow as pa

    from ..format.arrow import batch_columns, offsets_column
    from ..format.decode import body_of, layout
    from ..segments.damage import refuse_damage
    from ..segments.segment import Segment
    from ..txn.isolation import Aborted, hidden

    seg = Segment(os.path.dirname(split.path), split.base, writable=False)
    aborted = Aborted.from_ranges(split.aborted) if split.aborted else None
    opener = None
    if split.keys is not None:  # (a plaintext batch where the partition has only sealed ones:
        #                          damage, as on every read path; engine.segments.sealed_range)
        pdir = os.path.dirname(split.path)  # (read again before refusing: a writer that
        #                                      turned encryption off narrows it first)
        opener = split.keys.opener_for(split.partition, sealed_claim(pdir),
                                       lambda: sealed_claim(pdir))
    parts: list[tuple[int, int, tuple[Any, ...]]] = []
    rows = 0
    want_values = "value" in columns or "tombstone" in columns
    try:
        for ref in seg.iter_batches(split.start, seg.file_size(),
                                    damaged=refuse_damage(seg.path, "a Spark job's read")):
            h = ref.header
            if ref.position >= split.end or (split.end_offset is not None
                                             and h.base_offset >= split.end_offset):
                break
            if hidden(h, aborted):
                continue  # a transaction marker, or a batch of an aborted transaction
            where = f" at position {ref.position} of {split.path}"
            body = body_of(ref.buf, ref.start, h, where, opener)
            cols = batch_columns(body, h, layout(body, h, where), where)
            parts.append((h.base_offset, h.record_count, cols))
            rows += h.record_count
            if rows >= ROWS_PER_BATCH:
                yield _record_batch(pa, split, parts, columns, want_values, offsets_column)
                parts, rows = [], 0
        if parts:
            yield _record_batch(pa, split, parts, columns, want_values, offsets_column)
    finally:
        seg.close()


def _record_batch(pa: Any, split: Piece, parts: list, columns: list[str],
                  want_values: bool, offsets_column: Any) -> Any:
    n = sum(c for _, c, _ in parts)
    arrays: dict[str, Any] = {
        "offset": _flat(pa, offsets_column([(b, c, cols[0]) for b, c, cols in parts]))}

    def col(k: int) -> Any:
        return pa.concat_arrays([cols[k] for _, _, cols in parts])

    if "timestamp" in columns:
        arrays["timestamp"] = col(1).cast(pa.int64())
    if "key" in columns:
        arrays["key"] = col(2)
    if want_values:
        values = col(3)
        if "value" in columns:
            arrays["value"] = values
        if "tombstone" in columns:
            arrays["tombstone"] = values.is_null()
    if "headers" in columns:
        arrays["headers"] = col(4)
    if "topic" in columns:
        arrays["topic"] = pa.array([split.topic] * n, pa.string())
    if "partition" in columns:
        arrays["partition"] = pa.array([split.partition] * n, pa.int32())
    batch = pa.RecordBatch.from_arrays([arrays[c] for c in columns], names=columns)
    if split.end_offset is not None and n and arrays["offset"][-1].as_py() >= split.end_offset:
        import pyarrow.compute as pc
        batch = batch.filter(pc.less(arrays["offset"], split.end_offset))
    return batch


def _flat(pa: Any, arr: Any) -> Any:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


class RivvenReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        from .schema_columns import check_types, decode_options, plan_decoding

        self.options = {k.lower(): v for k, v in options.items()}  # Spark options ignore case
        self.columns = [f.name for f in schema.fields]
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown:
            raise ValueError(f"unknown rivven column(s) {unknown}: use {', '.join(COLUMNS)}")
        self.last_per_key = self.options.get("lastperkey", "false").lower() == "true"
        if self.last_per_key and not ({"key", "offset"} <= set(self.columns)
                                      <= LAST_PER_KEY_COLUMNS):
            raise ValueError("lastPerKey reads key and offset, and only "
                             f"{', '.join(sorted(LAST_PER_KEY_COLUMNS))}")
        from .keys import for_topic

        # (here, in the driver: the keyring is read where it lives; the keys go to the
        # executors inside this pickled reader)
        self.keys = for_topic(self.options["path"], self.options["topic"],
                              self.options.get("keyring"))
        # (the driver: the reader schemas from the registry, shipped in this pickled reader)
        wants, null = decode_options(self.options, [self.options["topic"]])
        self.decoding = plan_decoding(self.options["path"], self.options.get("keyring"),
                                      [w for w in wants if w.column in self.columns], null)
        check_types(schema, self.decoding)

    def partitions(self) -> list[SegmentSplit]:
        o = self.options
        parts = o.get("partitions")
        ends = {int(k): int(v) for k, v in json.loads(o.get("endoffsets", "{}")).items()}
        aborted = {int(k): v for k, v in json.loads(o.get("aborted", "{}")).items()}
        wanted = [int(p) for p in parts.split(",")] if parts else None
        level = o.get("isolationlevel", "read_uncommitted")
        if level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolationLevel {level!r}: use read_uncommitted or read_committed")
        if level == "read_committed":
            ends, aborted = _committed_view(o["path"], o["topic"], wanted, ends, aborted)
        return splits_for(o["path"], o["topic"], wanted, ends,
                          int(o.get("splitbytes", 64 << 20)), int(o.get("splits", 0)), aborted,
                          self.keys)

    def read(self, partition: SegmentSplit) -> Iterator[Any]:  # type: ignore[override]
        from .schema_columns import Decoders

        decoders = Decoders(self.decoding) if self.decoding else None
        return read_split(partition, self.columns, self.last_per_key, decoders)


def _committed_view(path: str, topic: str, partitions: list[int] | None,
                    ends: dict[int, int], aborted: dict[int, list[list[int]]]
                    ) -> tuple[dict[int, int], dict[int, list[list[int]]]]:
    """(In the driver.) read_committed: each partition's end no further than its last
    stable offset, and its aborted transactions, as a read-only engine sees them."""
    from engine import Engine

    with Engine.open(path, read_only=True) as eng:
        for p, v in eng.offsets.stable_view(topic, partitions).items():
            lso = v["last_stable_offset"]
            ends[p] = min(ends.get(p, lso), lso)
            aborted[p] = aborted.get(p, []) + v["aborted"]
    return ends, aborted


def schema_struct() -> StructType:
    """``SCHEMA`` as a StructType."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                       StructField("offset", LongType()), StructField("timestamp", LongType()),
                       StructField("key", BinaryType()), StructField("value", BinaryType()),
                       StructField("headers", ArrayType(header))])


class RivvenDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rivven"

    def schema(self) -> str | StructType:
        """The columns; with ``decode``, the decoded ones typed from the registry (the
        subject's latest version: engine.spark.schema_columns)."""
        from .schema_columns import decode_options, plan_decoding, replace_types, topics_named

        o = {k.lower(): v for k, v in self.options.items()}
        wants, null = decode_options(o, topics_named(o))
        if not wants:
            return SCHEMA
        if not o.get("path"):
            raise ValueError("the rivven source needs .option('path', ...)")
        return replace_types(schema_struct(), plan_decoding(o["path"], o.get("keyring"), wants,
                                                            null))

    def reader(self, schema: StructType) -> RivvenReader:
        """``spark.read.format("rivven")``: a topic as a batch DataFrame."""
        for k in ("path", "topic"):
            if k not in self.options:
                raise ValueError(f"the rivven source needs .option({k!r}, ...)")
        return RivvenReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """``df.write.format("rivven")...save()``: all rows visible at once, or none
        (engine.spark.sink)."""
        if overwrite:
            raise ValueError("the rivven sink appends: use .mode('append') (a topic is a log; "
                             "rivven delete-records or topic delete remove records)")
        from .sink import RivvenBatchWriter

        return RivvenBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802
        """``df.writeStream.format("rivven")``: each micro-batch visible once, exactly."""
        from .sink import RivvenStreamWriter

        return RivvenStreamWriter(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> Any:  # noqa: N802
        """``spark.readStream.format("rivven")`` (engine.spark.stream_source)."""
        from .stream_source import RivvenStreamReader

        return RivvenStreamReader(dict(self.options), [f.name for f in schema.fields], schema)
