"""The bytes of an encrypted ("sealed") batch: its layout and what its AEAD binds. The ciphers
themselves are engine.crypto's; this module only lays out bytes (docs/FORMAT.md, "Encrypted
batches").

A sealed batch is an ordinary batch (same 72-byte header, CRC32C, padding) whose stored body
(the body after compression) is replaced by an envelope::

    salt (16) | nonce (12) | AEAD ciphertext of the stored body | tag (16)

with ``ATTR_ENCRYPTED`` set, ``key_version`` (bytes 22-23) the topic's data key version,
``stored_length`` the envelope's length (``SEAL_OVERHEAD`` more than the plaintext's), and
``batch_length``, padding and CRC to match. The salt picks the writer's session key (derived
from the data key), the nonce counts that session's batches (engine.crypto.batch). Nothing a
scan, index, retention pass, ``segment verify`` or recovery reads changes: they work without
any key, and the CRC covers the ciphertext.

The associated data (``aad``) binds the batch to its place::

    DOMAIN | topic id (16 bytes) | partition (uint32) | header[0:16] | header[20:72]

that is every header byte but the CRC (base offset, lengths, magic, attributes, key version,
counts, timestamps, producer fields): a batch copied to another topic, partition or offset,
or with any header field changed, fails to decrypt.
"""

from __future__ import annotations

import struct
from typing import Any

from . import crc
from .records import (
    ATTR_ENCRYPTED,
    CRC_FROM,
    HEADER_SIZE,
    KEY_VERSION_AT,
    LENGTH_PREFIX,
    MAX_BATCH_BYTES,
    SEAL_OVERHEAD,
    BatchHeader,
)

DOMAIN = b"rivven batch v1\x00"
SALT = 16
NONCE = 12
TAG = 16
assert SALT + NONCE + TAG == SEAL_OVERHEAD
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")


def sealed_frame(plain: Any, key_version: int) -> tuple[bytearray, memoryview]:
    """The sealed batch for the plaintext batch ``plain`` (its base offset assigned), all but
    its envelope: a buffer with the final header (CRC still to come, ``finish``), and the
    plaintext stored body to seal into ``buf[HEADER_SIZE:]``."""
    stored_len = _I32.unpack_from(plain, 68)[0]
    body = memoryview(plain)[HEADER_SIZE:HEADER_SIZE + stored_len]
    total = HEADER_SIZE + stored_len + SEAL_OVERHEAD
    total += -total & 7
    if total > MAX_BATCH_BYTES:
        raise ValueError(f"a sealed batch of {total} bytes is larger than the format allows")
    buf = bytearray(total)  # (zeros: the padding)
    buf[:HEADER_SIZE] = memoryview(plain)[:HEADER_SIZE]
    _I32.pack_into(buf, 8, total - LENGTH_PREFIX)
    attrs = _U16.unpack_from(buf, 20)[0] | ATTR_ENCRYPTED
    _U16.pack_into(buf, 20, attrs)
    _U16.pack_into(buf, KEY_VERSION_AT, key_version)
    _I32.pack_into(buf, 68, stored_len + SEAL_OVERHEAD)
    return buf, body


def aad(buf: Any, pos: int, topic_id: bytes, partition: int) -> bytes:
    """The associated data of the sealed batch at ``pos`` of ``buf`` (its header final)."""
    mv = memoryview(buf)
    return b"".join((DOMAIN, topic_id, _U32.pack(partition), mv[pos:pos + 16],
                     mv[pos + CRC_FROM:pos + HEADER_SIZE]))


def envelope(buf: Any, pos: int, h: BatchHeader) -> tuple[bytes, bytes, memoryview]:
    """``(salt, nonce, ciphertext + tag)`` of the sealed batch at ``pos`` (header ``h``,
    checked by ``read_header``: ``stored_length >= SEAL_OVERHEAD``)."""
    start = pos + HEADER_SIZE
    mv = memoryview(buf)
    return (bytes(mv[start:start + SALT]), bytes(mv[start + SALT:start + SALT + NONCE]),
            mv[start + SALT + NONCE:start + h.stored_length])


def finish(buf: bytearray) -> bytearray:
    """Write the CRC32C of a batch whose every other byte is final."""
    mv = memoryview(buf)
    _U32.pack_into(buf, 16, crc.crc32c(mv[:16], crc.crc32c(mv[CRC_FROM:])))
    return buf


def plain_batch(buf: Any, pos: int, stored: Any) -> bytearray:
    """The plaintext batch of the sealed batch at ``pos`` of ``buf``, given its opened stored
    body: the same header fields, unencrypted, CRC'd."""
    n = len(stored)
    total = HEADER_SIZE + n
    total += -total & 7
    out = bytearray(total)
    out[:HEADER_SIZE] = memoryview(buf)[pos:pos + HEADER_SIZE]
    _I32.pack_into(out, 8, total - LENGTH_PREFIX)
    _U16.pack_into(out, 20, _U16.unpack_from(out, 20)[0] & ~ATTR_ENCRYPTED)
    _U16.pack_into(out, KEY_VERSION_AT, 0)
    _I32.pack_into(out, 68, n)
    out[HEADER_SIZE:HEADER_SIZE + n] = stored
    return finish(out)
