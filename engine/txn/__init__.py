"""Layer 7 — producer state and transactions: sequence checks, epochs, snapshots, the
transaction coordinator, read_committed (docs/TRANSACTIONS.md), and ``Engine.txn``.

May import: ``engine.groups``, ``engine.storage``, ``engine.segments``, ``engine.counters``,
``engine.fs``, ``engine.format`` and the base modules.

Storage reaches this layer only through the ``ProducerHook`` it is handed.

- ``state``, ``snapshot``, ``hook``: a partition's producer state, its snapshots, the hook
- ``pids``: producer ids; ``txn_store``: each transactional id's durable state
- ``coordinator``: init, partitions joining, offsets, commit/abort, timeouts, recovery
- ``markers``, ``fences``, ``isolation``, ``decisions``: markers, KIP-447 fences,
  read_committed, two-phase commits under a decision key
- ``admin``: producers of partitions, hanging transactions
- ``transactions``: ``Transactions`` (``Engine.txn``); ``results``: what it returns, typed
"""
