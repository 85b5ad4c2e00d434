"""Layer 1 — the record format: batches, codecs and their Arrow layout. Bytes in, bytes out.

No file or network I/O, no locks, no clock.

May import: ``engine.errors`` only.

- ``records``: ``Record``, ``ColumnBatch``, the 72-byte batch header and its CRC32C check
  (docs/FORMAT.md has every byte)
- ``encode``: columns -> batch bytes; ``decode``: the body's buffers found and checked ->
  columns, Records
- ``arrow``: a batch body as pyarrow arrays without copying
- ``codecs``: gzip, snappy, lz4, zstd behind ``compress``/bounded ``decompress``
- ``crc``: CRC32C (the C library, loaded on first use)
- ``sealed``: an encrypted batch's envelope (no cipher: engine.crypto's)
- ``control``: transaction markers' bodies
- ``native``: the per-record loops in C (``fastcodec.c``), with pure-Python twins
- ``text``, ``textformat``, ``jsonlines``: records as text lines and back (the encodings
  of keys and values, kcat's %-format strings, JSON lines): ``rivven consume``/``produce``

The names most callers need are here too: ``from engine.format import encode_batch``.
"""

from .decode import Layout, body_of, decode_columns, decode_records, layout
from .encode import encode_batch
from .records import (
    HEADER_SIZE,
    BatchHeader,
    ColumnBatch,
    EncodedBatch,
    Record,
    check_crc,
    read_header,
)

__all__ = ["HEADER_SIZE", "BatchHeader", "ColumnBatch", "EncodedBatch", "Layout", "Record",
           "body_of", "check_crc", "decode_columns", "decode_records", "encode_batch",
           "layout", "read_header"]
