"""The AEADs, data keys wrapped under master keys, and writer session keys.

Every primitive is the ``cryptography`` package's: AES-256-GCM and ChaCha20-Poly1305 (both 32-
byte keys, 12-byte nonces, 16-byte tags) and HKDF-SHA256.

- **Wrapping** (``wrap``/``unwrap``): a data key is stored only as AES-256-GCM under a master
  key, with a random 12-byte nonce, its associated data binding it to its topic id, version,
  cipher and master key id (``nonce | ciphertext | tag``, 60 bytes). A master key wraps a
  handful of data keys in its life: random nonces are far from GCM's 2^32 bound.
- **Sessions** (``session_key``): a batch is never sealed under the data key itself, but
  under a key derived from it and a random 16-byte salt (HKDF-SHA256), one per writer session;
  engine.crypto.batch says why no nonce can repeat.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from ..errors import WrongKey, plural

AES_GCM = "aes-256-gcm"
CHACHA = "chacha20-poly1305"
CIPHERS = (AES_GCM, CHACHA)
KEY_BYTES = 32
WRAP_NONCE = 12
WRAPPED_BYTES = WRAP_NONCE + KEY_BYTES + 16
WRAP_DOMAIN = b"rivven data key v1\x00"
SESSION_INFO = b"rivven batch session v1"

_lib: dict[str, Any] = {}


def lib() -> dict[str, Any]:
    """The ``cryptography`` names, imported on first use (30 ms: ``import engine`` and the
    commands that never meet an encrypted topic skip it)."""
    if not _lib:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        _lib.update({AES_GCM: AESGCM, CHACHA: ChaCha20Poly1305, "InvalidTag": InvalidTag,
                     "HKDF": HKDF, "SHA256": hashes.SHA256})
    return _lib


def invalid_tag() -> type[Exception]:
    """The exception an AEAD raises when a tag does not verify."""
    return lib()["InvalidTag"]


def aead(cipher: str, key: bytes) -> Any:
    """The AEAD object of ``cipher`` over ``key`` (thread-safe, stateless)."""
    return lib()[cipher](key)


def new_data_key() -> bytes:
    return os.urandom(KEY_BYTES)


def _wrap_aad(topic_id: bytes, version: int, cipher: str, master_id: str) -> bytes:
    return b"".join((WRAP_DOMAIN, topic_id, struct.pack("<I", version), cipher.encode(), b"\0",
                     master_id.encode()))


def wrap(master: bytes, master_id: str, topic_id: bytes, version: int, cipher: str,
         data_key: bytes) -> bytes:
    """``data_key`` sealed under ``master`` (AES-256-GCM), bound to where it belongs."""
    nonce = os.urandom(WRAP_NONCE)
    return nonce + aead(AES_GCM, master).encrypt(nonce, data_key,
                                          _wrap_aad(topic_id, version, cipher, master_id))


def unwrap(master: bytes, master_id: str, topic_id: bytes, version: int, cipher: str,
           wrapped: bytes, topic: str) -> bytes:
    """The data key ``wrapped`` holds; WrongKey when ``master`` is not the key that wrapped
    it (or the record was moved or changed)."""
    try:
        key = aead(AES_GCM, master).decrypt(wrapped[:WRAP_NONCE], wrapped[WRAP_NONCE:],
                                            _wrap_aad(topic_id, version, cipher, master_id))
    except invalid_tag():
        raise WrongKey(f"master key {master_id!r} of the keyring does not open data key "
                       f"version {version} of topic {topic!r}: it is not the key that wrapped "
                       f"it; put the right key under id {master_id!r} in the keyring") from None
    if len(key) != KEY_BYTES:  # (authenticated, so never: a wrap always holds 32 bytes)
        raise WrongKey(f"data key version {version} of topic {topic!r} unwraps to "
                       f"{plural(len(key), 'byte')}, not {KEY_BYTES}")
    return key


def session_key(data_key: bytes, salt: bytes) -> bytes:
    """The key of one writer session: HKDF-SHA256(data key, salt)."""
    c = lib()
    return c["HKDF"](c["SHA256"](), KEY_BYTES, salt, SESSION_INFO).derive(data_key)
