"""Layer 8 — the read path above storage: a partition's batches decoded as Records, columns or
Arrow tables (read_committed filtered), several partitions streamed, and offsets: the log's
start and end, the first offset at a time, the offset a ``Position`` names.

May import: ``engine.txn`` (the last stable offset, aborted transactions), ``engine.storage``,
``engine.segments``, ``engine.format`` and the base modules; never the façade.

- ``records``: Records, columns and Arrow tables of a partition; ``stream`` over several
- ``positions``: ``Position``, ``resolve``, offsets by time, ``list_offsets``
"""
