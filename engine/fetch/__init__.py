"""Layer 8 — the read path above storage: a partition's batches decoded as Records, columns or
Arrow tables (read_committed filtered), several partitions streamed, and offsets
(``Engine.offsets``).

May import: ``engine.txn`` (the last stable offset, aborted transactions), ``engine.storage``,
``engine.segments``, ``engine.format`` and the base modules.

- ``records``: Records, columns and Arrow tables of a partition
- ``streaming``: several partitions streamed as column batches (``Engine.stream``)
- ``positions``: ``Position``, ``resolve``, offsets by time, ``list_offsets``
- ``offsets``: ``Offsets`` (``Engine.offsets``); ``results``: what it returns, typed
"""
