"""Layer 9 — maintenance: retention and delete-records, log compaction, tiering runs and
re-encryption (``Engine.maintenance``, ``Engine.keys``).

May import: ``engine.tiering``, ``engine.fetch`` (positions), ``engine.txn``,
``engine.groups`` (sealed commit metadata), ``engine.storage``, ``engine.segments``,
``engine.crypto``, ``engine.counters``, ``engine.fs``, ``engine.format`` and the base modules.

Plans and writes; changes a partition only through ``PartitionLog``'s ``advance_start``,
``replace_segments`` and ``set_tier``.

- ``retention``: which sealed segments go (time, size, below the log start); delete-records
- ``compaction``: the cleanable range, the plan, the swap, the in-process pass, explain
- ``cleaner``: the survivors of a pass and writing cleaned segments (also in Spark executors)
- ``reencrypt``: every batch of a topic under its current data key; unused keys dropped
- ``admin``: ``Maintenance`` (``Engine.maintenance``); ``keys``: ``Keys`` (``Engine.keys``)
- ``scheduler``: retention, compaction and tiering in the background from the topics' configs
  (``rivven serve``, ``rivven maintain``), one pass per partition at a time, failures backing off
- ``results``: what they return, typed
"""
