"""Layer 5 — storage: the data dir's metadata and the partition object.

May import: ``engine.segments``, ``engine.crypto``, ``engine.fs``, ``engine.format`` and the
base modules (``errors``, ``clock``, ``failpoint``, ``progress``). Never wal, groups, txn,
tiering, maintenance or the façade: those change a partition only through ``PartitionLog``'s
public calls (``mutation``, ``replace_segments``, ``set_tier``, ``advance_start``, the
producer state's ``write_snapshot``/``index_aborts``...), and hand in what storage needs (the
WAL stream, the hot and cold caches, the producer hook, the counts) as objects typed by the
protocols of ``ports``.

- data dir, catalog and topics: ``datadir``, ``catalog``, ``config`` (topic configs),
  ``topics``, ``summary`` (a partition's offsets without opening it)
- a partition: ``log`` (``PartitionLog``, the only object that writes its files) composed of
  ``partition_lock``, ``loader`` (returns a ``LoadedLog``), ``log_start``, ``pipeline``
  (through ``AppendOwner``) with ``holds``, ``reader`` (through ``ReadSource``),
  ``tier_view``, ``sealing``, ``key_usage`` (the data key versions its segments use); the
  files themselves are ``engine.segments``'
- ``ports``: what the layers above hand a log; ``partitions``: the logs an engine has open;
  ``budget``: the file descriptors they may hold; ``finder``: ``LogFinder``, the logs of
  topics by name (what the services above storage are handed)

Inside the folder nothing imports ``log`` but ``partitions`` and ``finder``: the parts it composes know it
only by their protocols (no import circle; tests/unit/storage/test_storage_parts.py).
"""
