"""Layer 8 — the produce path and the producers the façade hands out.

May import: ``engine.txn``, ``engine.groups``, ``engine.wal``, ``engine.storage`` and the
layers below; never the façade.

- ``path``: ``ProduceRequest`` and ``ProducePath`` (check, partition, batch, append)
- ``partitioner``: Kafka's murmur2 for keys, sticky partitions otherwise
- ``arrow``: a pyarrow Table's rows appended straight from its buffers
- ``idempotent``: ``IdempotentProducer`` (``Engine.producer()``): sequenced batches, stored once
- ``transactional``: ``TransactionalProducer`` (``Engine.producer(transactional_id=...)``)
"""
