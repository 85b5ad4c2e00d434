"""Layer 6 — the produce and read paths the façade delegates to.

May import: every layer below it (``engine.wal``, ``engine.storage``, ``engine.format``, ...)
and the base modules; never the façade.

- ``produce``: ``ProduceRequest`` and ``Producer`` (partitioning, batching, appends)
- ``partitioner``: Kafka's murmur2 for keys, sticky partitions otherwise
- ``read``: records, columns and Arrow tables from a partition; offsets by time or position
"""
