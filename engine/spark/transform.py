"""The pure transform of a compaction pass: records DataFrame -> survivors DataFrame."""

from __future__ import annotations

from typing import Any

NO_KEY = ("has no key: a compacted topic needs a key on every record (set cleanup.policy=delete "
          "or delete the records with 'rivven delete-records')")


def survivors(df: Any, tombstone_bounds: dict[int, int] | None = None) -> Any:
    """The rows of ``df`` that survive one pass over a cleanable range.

    ``df`` has ``topic, partition, offset, key`` and ``value`` (or a boolean ``tombstone``),
    plus any other columns, which are carried along. Per (topic, partition, key) the row with
    the highest offset survives; a surviving tombstone whose offset is below its partition's
    ``tombstone_bounds`` entry (see engine.compaction.tombstone_bound) is removed too. A row
    without a key fails the job with an error naming its partition and offset.
    """
    from pyspark.sql import functions as F

    tomb = F.col("tombstone") if "tombstone" in df.columns else F.col("value").isNull()
    checked = df.withColumn("key", F.when(F.col("key").isNull(), F.raise_error(F.concat(
        F.lit("record at offset "), F.col("offset").cast("string"), F.lit(" of "),
        F.col("topic"), F.lit("-"), F.col("partition").cast("string"), F.lit(" " + NO_KEY))))
        .otherwise(F.col("key"))).withColumn("_tomb", tomb)
    cols = [c for c in checked.columns if c not in ("topic", "partition", "key")]
    grouped = checked.groupBy("topic", "partition", "key")
    if set(cols) <= {"offset", "tombstone", "_tomb"}:  # keys only: two plain aggregates
        last = grouped.agg(F.max("offset").alias("offset"),
                           *[F.max_by(c, "offset").alias(c) for c in cols if c != "offset"])
    else:
        last = (grouped.agg(F.max_by(F.struct(*cols), "offset").alias("_last"))
                .select("topic", "partition", "key", "_last.*"))
    bounds = tombstone_bounds or {}
    if bounds:
        bound = F.coalesce(F.try_element_at(F.create_map(*[F.lit(x) for kv in sorted(bounds.items())
                                                       for x in kv]), F.col("partition")),
                           F.lit(0))
        last = last.filter(~(F.col("_tomb") & (F.col("offset") < bound)))
    return last.drop("_tomb").select(*df.columns)
