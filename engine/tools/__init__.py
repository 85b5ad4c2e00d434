"""Layer 5 — tools for operators: verify, inspect, repair (``rivven segment ...``).

May import: ``engine.tiering`` (cold copies), ``engine.storage``, ``engine.format`` and the base
modules. Verification returns findings as data and changes nothing; repair is a separate,
explicit step.

- ``verify``: every batch, index entry and boundary of segment files checked
- ``inspect``: segments as rows, one segment batch by batch
- ``repair``: torn tails cut and indexes rebuilt by hand
"""
