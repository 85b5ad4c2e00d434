"""Layer 2 — storage: everything on disk under ``topics/`` and the files beside it.

May import: ``engine.format`` and the base modules (``errors``, ``clock``, ``failpoint``).
Never maintenance, tiering, wal, groups or the façade: those change a partition only through
``PartitionLog``'s public calls (``mutation``, ``replace_segments``, ``set_tier``,
``advance_start``), and hand in what storage needs (the WAL stream, the hot and cold caches)
as objects.

- data dir, catalog and topics: ``datadir``, ``catalog``, ``config`` (topic configs),
  ``settings`` (engine settings), ``topics``
- a partition: ``log`` (``PartitionLog``) composed of ``partition_lock``, ``segment_set``,
  ``loader``, ``pipeline`` (+ ``holds``), ``reader``, ``tier_view``, ``checkpoint``, ``swap``
- files: ``files`` (names, order, fsync), ``locks``, ``index``, ``segment``, ``tier_manifest``
- ``partitions``: the logs an engine has open
"""
