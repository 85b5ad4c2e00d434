"""Layer 9 — tools for operators: verify, inspect, repair (``Engine.segments``, ``rivven
segment ...``).

May import: ``engine.tiering`` (cold copies), ``engine.storage``, ``engine.segments``,
``engine.crypto``, ``engine.fs``, ``engine.format`` and the base modules.

Verification returns findings as data and changes nothing; repair is a separate, explicit step.

- ``verify``: every batch, index entry and boundary of segment files checked
- ``inspect``: segments as rows, one segment batch by batch, a topic described
- ``repair``: torn tails cut and indexes rebuilt by hand
- ``openers``: openers of encrypted batches for tools that read files by path
- ``admin``: ``Segments`` (``Engine.segments``); ``results``: what it returns, typed
"""
