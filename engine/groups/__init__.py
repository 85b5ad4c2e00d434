"""Layer 6 — consumer groups: members, partition leases, committed offsets, administration
(``Engine.groups``).

May import: ``engine.storage`` (the catalog), ``engine.crypto`` (sealed commit metadata),
``engine.counters``, ``engine.fs``, ``engine.format`` and the base modules.

Reads of the log come in through what the caller hands over (``consumer.Source``, the
callables of ``admin.GroupAdmin``).

- ``membership``: member files and partition leases (flocks the kernel drops with a process)
- ``offset_store``: a group's committed offsets (append-only, CRC-framed, fdatasynced)
- ``consumer``: ``Consumer``, a group member reading its partitions
- ``admin``: ``GroupAdmin`` (``Engine.groups``): list, describe, reset offsets, delete
- ``results``: what ``GroupAdmin`` returns, typed
"""
