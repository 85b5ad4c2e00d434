"""Layer 8 — Spark: a topic reader (source), the compaction transform (transform), the job
entry points (job, tier_job) and the ``spark-submit`` launcher (submit).

May import every layer and the façade. Importing this package does not import pyspark; its
modules that need it do, and ``import engine`` imports none of them.
"""
