"""Layer 13 — Kafka's wire protocol over a data dir (``rivven serve``): the listener, the
request handlers, the group coordinator, a front end at the height of the command line that
uses the engine's data path and services only.

May import: ``engine.spark`` (the compaction job of the background maintenance),
``engine.maintenance`` (its scheduler), ``engine.security`` (the ACL model, SCRAM),
``engine.schemas`` (the schema registry's listener beside the Kafka one), ``engine.format`` and
the base modules.

Importing this package imports neither kafka-python nor asyncio's server: ``serve`` does.
"""
