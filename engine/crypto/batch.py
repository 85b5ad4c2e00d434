"""Sealing and opening batch bodies (and other small texts) with a topic's data keys;
engine.format.sealed lays out the bytes.

**No nonce repeats.** A data key never seals anything itself. Each writer *session* draws a
random 16-byte salt, derives its own key ``HKDF-SHA256(data key, salt)`` and numbers what it
seals 0, 1, 2, ...: the nonce is that number (12 bytes, little-endian), and the salt travels in
front of every envelope. Within a session the counter never repeats (it is taken under a
mutex); two sessions share a key only if they draw the same salt (for a billion sessions of
one data key, a chance below 2^-68). So any number of threads and processes, and Spark
executors, can write with one data key at once without coordinating. A session ends, and the
next seal starts a new one, after 2^32 envelopes or 2^36 bytes (within the usage limits of
AES-GCM for one key), in a child process after ``fork`` (it would repeat its parent's
counter), and when the sealer is pickled (a Spark task: each copy starts its own).

Opening derives a session's key once and keeps it (a few thousand, least recently used first
out), so reading a segment costs one AEAD call per batch.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..errors import CorruptRecordError
from ..format.records import HEADER_SIZE, BatchHeader
from ..format.sealed import NONCE, SALT, TAG, aad, envelope, finish, sealed_frame
from .ciphers import aead, invalid_tag, session_key


class UnknownKeyVersion(CorruptRecordError):
    """A batch or a sealed text names a data key version its topic's catalog entry does not
    hold: damage (exit 3), whether of what names it or of the catalog."""


SESSION_SEALS = 1 << 32
SESSION_BYTES = 1 << 36
MAX_OPEN_SESSIONS = 4096
_BODY = HEADER_SIZE + SALT + NONCE  # where a sealed batch's ciphertext starts


class _Session:
    __slots__ = ("salt", "aead", "seals", "bytes", "pid")

    def __init__(self, cipher: str, data_key: bytes) -> None:
        self.salt = os.urandom(SALT)
        self.aead = aead(cipher, session_key(data_key, self.salt))
        self.seals = 0
        self.bytes = 0
        self.pid = os.getpid()


class Sealer:
    """Seals with one data key version (thread-safe; see the module's doc for the nonces)."""

    def __init__(self, version: int, cipher: str, data_key: bytes) -> None:
        self.version = version
        self.cipher = cipher
        self._key = data_key
        self._mutex = threading.Lock()
        self._session: _Session | None = None

    def __getstate__(self) -> dict[str, Any]:  # a copy never continues this session
        return {"version": self.version, "cipher": self.cipher, "key": self._key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["version"], state["cipher"], state["key"])  # type: ignore[misc]

    def _next(self, nbytes: int) -> tuple[_Session, bytes]:
        """A session and a nonce never used with its key."""
        with self._mutex:
            s = self._session
            if (s is None or s.seals >= SESSION_SEALS or s.bytes >= SESSION_BYTES
                    or s.pid != os.getpid()):
                s = self._session = _Session(self.cipher, self._key)
            n = s.seals
            s.seals = n + 1
            s.bytes += nbytes
        return s, n.to_bytes(NONCE, "little")

    def seal_batch(self, plain: Any, topic_id: bytes, partition: int) -> bytearray:
        """The sealed batch of the plaintext batch ``plain`` (base offset assigned): a new
        buffer, CRC'd."""
        buf, body = sealed_frame(plain, self.version)
        s, nonce = self._next(len(body))
        buf[HEADER_SIZE:HEADER_SIZE + SALT] = s.salt
        buf[HEADER_SIZE + SALT:_BODY] = nonce
        out = memoryview(buf)[_BODY:_BODY + len(body) + TAG]
        associated = aad(buf, 0, topic_id, partition)
        into = getattr(s.aead, "encrypt_into", None)
        if into is not None:  # (cryptography 47+: no copy)
            into(nonce, body, associated, out)
        else:
            out[:] = s.aead.encrypt(nonce, bytes(body), associated)
        return finish(buf)

    def seal(self, data: bytes, associated: bytes) -> bytes:
        """``salt | nonce | ciphertext | tag`` of ``data`` (a committed offset's metadata)."""
        s, nonce = self._next(len(data))
        return s.salt + nonce + s.aead.encrypt(nonce, data, associated)


class Opener:
    """Opens what a topic's data keys sealed; ``key_of(version) -> (cipher, data key)``
    finds a version's key (raising KeyUnavailable when the keyring cannot give it,
    UnknownKeyVersion when the catalog has no such version)."""

    def __init__(self, topic_id: bytes, key_of: Callable[[int], tuple[str, bytes]]) -> None:
        self.topic_id = topic_id
        self.key_of = key_of
        self._sessions: OrderedDict[tuple[int, bytes], Any] = OrderedDict()
        self._mutex = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"topic_id": self.topic_id, "key_of": self.key_of}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["topic_id"], state["key_of"])  # type: ignore[misc]

    def _aead(self, version: int, salt: bytes) -> Any:
        k = (version, salt)
        with self._mutex:  # (readers open batches on several threads: engine.produce.ahead)
            a = self._sessions.get(k)
            if a is not None:
                self._sessions.move_to_end(k)  # (least recently used goes first)
                return a
        cipher, key = self.key_of(version)
        a = aead(cipher, session_key(key, salt))
        with self._mutex:
            self._sessions[k] = a
            if len(self._sessions) > MAX_OPEN_SESSIONS:
                self._sessions.popitem(last=False)
        return a

    def open_batch(self, buf: Any, pos: int, h: BatchHeader, partition: int, where: str = ""
                   ) -> bytes:
        """The stored body of the sealed batch at ``pos`` (CorruptRecordError when its tag
        does not verify: damaged, changed, or moved from its topic, partition or offset)."""
        salt, nonce, ct = envelope(buf, pos, h)
        try:
            a = self._aead(h.key_version, salt)
        except UnknownKeyVersion:
            raise UnknownKeyVersion(
                f"the batch at offsets {h.base_offset}..{h.last_offset}{where} names data key "
                f"version {h.key_version}, which its topic's catalog entry does not hold: its "
                "header is damaged or forged, or topics.json was restored from an older copy "
                "(restore one that holds the version); run 'rivven segment verify --decrypt'"
            ) from None
        try:
            return a.decrypt(nonce, ct, aad(buf, pos, self.topic_id, partition))
        except invalid_tag():
            raise CorruptRecordError(
                f"the batch at offsets {h.base_offset}..{h.last_offset} does not decrypt: its "
                f"authentication tag does not verify under data key version {h.key_version} "
                f"(damaged, changed, or moved from another topic, partition or offset){where}; "
                "run 'rivven segment verify --decrypt'") from None

    def open(self, version: int, sealed: bytes, associated: bytes, what: str) -> bytes:
        """The data ``Sealer.seal`` sealed; CorruptRecordError naming ``what`` otherwise."""
        if len(sealed) < SALT + NONCE + TAG:
            raise CorruptRecordError(f"{what} is too short to be sealed")
        a = self._aead(version, sealed[:SALT])
        try:
            return a.decrypt(sealed[SALT:SALT + NONCE], sealed[SALT + NONCE:], associated)
        except invalid_tag():
            raise CorruptRecordError(f"{what} does not decrypt: its authentication tag does "
                                     f"not verify under data key version {version}") from None
