"""Layer 3.5 — exactly-once: producer ids, the producer state of a partition, snapshots, the
transaction coordinator, read_committed (docs/TRANSACTIONS.md).

May import: ``engine.wal``, ``engine.groups``, ``engine.storage``, ``engine.format`` and the
base modules. Tiering, maintenance, tools and client import it; storage reaches it only
through the ``ProducerHook`` it is handed.
"""
