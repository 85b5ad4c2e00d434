"""Layer 8 — tiered storage: hot (memory), warm (local segments), cold (an object store).

May import: ``engine.storage``, ``engine.segments``, ``engine.counters``, ``engine.fs``,
``engine.format`` and the base modules.

Changes a partition only through ``PartitionLog.set_tier`` / ``replace_segments``.

- ``hot``: recent batches in memory for tailing readers
- ``cold``: the cold store, any fsspec URI (``file://`` by plain OS calls)
- ``cache``: a bounded local cache of cold segments; downloading one, checked
- ``tier``: the tier pass (plan, copy, commit), cold retention
- ``restore``: cold segments back to local disk
- ``status``: where offsets live, cold copies checked, hot cache figures
- ``results``: what the tiering calls of ``Engine.maintenance`` return, typed
"""
