"""Layer 1 — the record format: batches, codecs and their Arrow layout. Bytes in, bytes out.

No file or network I/O, no locks, no clock. May import: ``engine.errors`` only.

- ``records``: ``Record``, the 72-byte batch header, encoding a batch, checking its CRC32C,
  finding and decoding the columns of its body (docs/FORMAT.md has every byte).
- ``codecs``: gzip, snappy, lz4, zstd behind ``compress``/bounded ``decompress``.
- ``arrow``: a batch body as pyarrow arrays without copying.
"""
