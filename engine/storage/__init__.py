"""Layer 5 — storage: the data dir's metadata (catalog, topic configs, the data dir's marker)
and the partition object that composes a partition directory's files (``PartitionLog``).

May import: ``engine.segments``, ``engine.crypto``, ``engine.fs``, ``engine.format`` and the
base modules.

Never wal, groups, txn, tiering, maintenance or the façade: those change a partition only
through ``PartitionLog``'s public calls (``mutation``, ``replace_segments``, ``set_tier``,
``advance_start``), and hand in what storage needs (the WAL stream, the hot and cold caches,
the producer state, counters) as objects (``ports``).

- data dir, catalog and topics: ``datadir``, ``catalog``, ``config`` (topic configs), ``topics``
- a partition: ``log`` (``PartitionLog``) composed of ``partition_lock``, ``loader``,
  ``pipeline`` (+ ``holds``), ``reader``, ``tier_view``; ``budget`` (open files)
- ``partitions``: the logs an engine has open; ``summary``: offsets without opening one
- ``finder``: ``LogFinder``, the logs of topics by name (what the services are handed)
"""
