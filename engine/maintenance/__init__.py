"""Layer 5 — maintenance: retention and log compaction.

May import: ``engine.tiering`` (cold retention), ``engine.storage``, ``engine.format`` and the
base modules. Plans and writes; changes a partition only through ``PartitionLog``'s
``advance_start`` and ``replace_segments``.

- ``retention``: which sealed segments go (time, size, below the log start); delete-records
- ``compaction``: the cleanable range, the plan, the swap, the in-process pass, explain
- ``cleaner``: the survivors of a pass and writing cleaned segments (also in Spark executors)
"""
