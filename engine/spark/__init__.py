"""Layer 12 — Spark: the ``rivven`` data source and its streaming source, the exactly-once
sinks, the jobs ``spark-submit`` runs and the launcher.

May import: ``engine`` (the façade), ``engine.maintenance``, ``engine.tiering``, ``engine.txn``,
``engine.storage``, ``engine.segments``, ``engine.crypto``, ``engine.fs``, ``engine.format``,
``engine.schemas`` and the base modules.

Importing this package does not import pyspark; its modules that need it do, and ``import
engine`` imports none of them.
"""
