"""Spark jobs over rivven data dirs: a topic reader (source), the compaction transform
(transform), the job entry point (job) and the ``spark-submit`` launcher (submit).

Importing this package does not import pyspark; its modules do.
"""
