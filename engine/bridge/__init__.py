"""Layer 13 — copies between a data dir and a Kafka-protocol cluster (``rivven kafka
export | import | mirror``), exactly once and resumable: a front end at the height of the
command line, a peer of ``engine.kafka``, that uses the engine's public read and produce
paths and services only; the cluster through confluent-kafka (librdkafka).

May import: ``engine`` (the façade's ``Engine``, for types), ``engine.storage`` (``Reach``:
where a read_committed scan stepped over markers and aborted batches), ``engine.fetch``
(``Position``), ``engine.spark`` (the launcher of ``rivven spark export|import``'s job:
spark_copy.py) and the base modules; the mirror's metrics go to the engine's meter.

Importing this package imports no confluent-kafka: each call that talks to a cluster does.
"""
