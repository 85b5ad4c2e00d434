"""Layer 2 — the file-system rules every layer above follows.

May import: ``engine.format`` (its CRC32C) and the base modules.

- ``guard``: every creation, write open and removal of the engine's files: no links
  followed, the mode policy
- ``durable``: fsync of a file or a directory; atomic replacement of a file
  (``write_atomic``), and the debris a crash leaves of one
- ``reserve``: the data dir's space reserve, given up when the disk is full
- ``jsondoc``: strict JSON for metadata files: CRC32C seals, typed getters, bounded reads
- ``framelog``: append-only files of CRC-framed records: framing, the streamed scan with its
  torn-tail and damage rules, the append that cuts a torn tail
- ``locks``: flock helpers and bounded lock waits (``LockWait``, ``acquire``)
- ``prealloc``: blocks reserved past a file's end without growing it (fallocate KEEP_SIZE)
"""
