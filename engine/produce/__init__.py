"""Layer 8 — the produce path and the producers the façade hands out.

May import: ``engine.txn``, ``engine.groups``, ``engine.storage``, ``engine.fs``,
``engine.format`` and the base modules.

- ``path``: ``ProduceRequest`` and ``ProducePath`` (check, partition, batch, append)
- ``partitioner``: Kafka's murmur2 for keys, sticky partitions otherwise
- ``arrow``: a pyarrow Table's rows appended straight from its buffers
- ``idempotent``: ``IdempotentProducer``: sequenced batches, stored once
- ``transactional``: ``TransactionalProducer``: all or nothing across partitions and offsets
- ``factory``: ``Producers``, what ``Engine.producer`` hands out
"""
