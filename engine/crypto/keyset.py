"""A topic's data keys as the catalog stores them: every version, wrapped by a master key.

In ``topics.json``, an encrypted topic's entry holds::

    "keys": {"current": 2, "versions": [
        {"version": 1, "cipher": "aes-256-gcm", "master_key_id": "k1",
         "wrapped": "<base64 of 60 bytes>", "created_ms": 1795721663098}, ...]}

``current`` is the version new batches are sealed with. A version stays until no batch of the
topic uses it (``rivven key reencrypt`` drops the others). Pure data: no key is unwrapped here
(engine.crypto.topic does that).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import plural
from .ciphers import CIPHERS, WRAPPED_BYTES
from .keyring import KEY_ID

MAX_VERSION = 0xFFFF  # the batch header's key_version is a uint16
MAX_INT = (1 << 63) - 1


@dataclass(frozen=True)
class DataKey:
    version: int
    cipher: str
    master_key_id: str
    wrapped: bytes  # nonce | AES-256-GCM(master key, data key) | tag
    created_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "cipher": self.cipher,
                "master_key_id": self.master_key_id,
                "wrapped": base64.b64encode(self.wrapped).decode(),
                "created_ms": self.created_ms}


@dataclass(frozen=True)
class KeySet:
    current: int
    versions: tuple[DataKey, ...]  # ascending by version
    _by_version: dict[int, DataKey] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_version.update({k.version: k for k in self.versions})

    def get(self, version: int) -> DataKey | None:
        return self._by_version.get(version)

    @property
    def current_key(self) -> DataKey:
        return self._by_version[self.current]

    def next_version(self) -> int:
        return max(k.version for k in self.versions) + 1

    def added(self, key: DataKey) -> KeySet:
        """This set with ``key`` as the new current version."""
        return KeySet(key.version, (*self.versions, key))

    def replaced(self, keys: Iterable[DataKey]) -> KeySet:
        """This set with its versions replaced by ``keys`` (the same version numbers)."""
        return KeySet(self.current, tuple(sorted(keys, key=lambda k: k.version)))

    def without(self, versions: Iterable[int]) -> KeySet:
        """This set without ``versions`` (never the current one)."""
        drop = set(versions) - {self.current}
        return KeySet(self.current, tuple(k for k in self.versions if k.version not in drop))

    def to_json(self) -> dict[str, Any]:
        return {"current": self.current, "versions": [k.to_json() for k in self.versions]}

    @classmethod
    def from_json(cls, doc: Any, bad: Callable[[str], Exception]) -> KeySet:
        """The key set of a catalog entry's ``keys``, every field checked (``bad(reason)``
        is the error to raise)."""
        if not isinstance(doc, dict) or set(doc) != {"current", "versions"}:
            raise bad("keys is not an object of current and versions")
        vs = doc["versions"]
        if not isinstance(vs, list) or not 1 <= len(vs) <= MAX_VERSION:
            raise bad(f"keys.versions is not a list of 1 to {MAX_VERSION} data keys")
        out = []
        for v in vs:
            out.append(_key(v, bad))
            if len(out) > 1 and out[-1].version <= out[-2].version:
                raise bad("keys.versions are not in ascending version order")
        cur = doc["current"]
        if not _is_int(cur) or cur not in {k.version for k in out}:
            raise bad(f"keys.current {cur!r} is not one of its versions")
        return cls(cur, tuple(out))


def _key(v: Any, bad: Callable[[str], Exception]) -> DataKey:
    want = {"version", "cipher", "master_key_id", "wrapped", "created_ms"}
    if not isinstance(v, dict) or set(v) != want:
        raise bad(f"a data key is not an object of {', '.join(sorted(want))}")
    ver = v["version"]
    if not _is_int(ver) or not 1 <= ver <= MAX_VERSION:
        raise bad(f"data key version {ver!r} is not an integer in 1..{MAX_VERSION}")
    if v["cipher"] not in CIPHERS:
        raise bad(f"data key {ver}: cipher {v['cipher']!r} is not one of {', '.join(CIPHERS)}")
    mid = v["master_key_id"]
    if not isinstance(mid, str) or not KEY_ID.fullmatch(mid):
        raise bad(f"data key {ver}: invalid master_key_id {str(mid)[:60]!r}")
    try:
        wrapped = base64.b64decode(v["wrapped"], validate=True) \
            if isinstance(v["wrapped"], str) else b""
    except (binascii.Error, ValueError):
        wrapped = b""
    if len(wrapped) != WRAPPED_BYTES:
        raise bad(f"data key {ver}: wrapped is not base64 of {plural(WRAPPED_BYTES, 'byte')}")
    ms = v["created_ms"]
    if not _is_int(ms) or not 0 <= ms <= MAX_INT:
        raise bad(f"data key {ver}: created_ms {ms!r} is not a time in ms")
    return DataKey(ver, v["cipher"], mid, wrapped, ms)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
