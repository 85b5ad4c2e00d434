"""Making and changing a topic's data keys: the first one, a rotation, a rewrap under another
master key. Pure: the master keys come from ``master(key_id)`` (the engine's keyring), the
results are key sets for the catalog (engine.storage.topics writes them under its lock).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import clock
from . import ciphers
from .keyset import MAX_VERSION, DataKey, KeySet

Master = Callable[[str], bytes]


def new_key(master: Master, master_id: str, topic_id: str, version: int, cipher: str
            ) -> DataKey:
    """A fresh random data key of ``version``, wrapped under ``master_id``."""
    if version > MAX_VERSION:
        raise ValueError(f"a topic has at most {MAX_VERSION} data key versions")
    wrapped = ciphers.wrap(master(master_id), master_id, bytes.fromhex(topic_id), version,
                           cipher, ciphers.new_data_key())
    return DataKey(version, cipher, master_id, wrapped, clock.now_ms())


def rotated(keys: KeySet | None, master: Master, master_id: str, topic_id: str, cipher: str
            ) -> KeySet:
    """``keys`` with a new current version (the first one when None)."""
    if keys is None:
        return KeySet(1, (new_key(master, master_id, topic_id, 1, cipher),))
    return keys.added(new_key(master, master_id, topic_id, keys.next_version(), cipher))


def rewrapped(keys: KeySet, master: Master, to_id: str, topic: str, topic_id: str) -> KeySet:
    """``keys`` with every version wrapped under ``to_id`` (the data keys themselves, and so
    every batch, unchanged): each is unwrapped with its own master key first."""
    tid = bytes.fromhex(topic_id)
    out = []
    for k in keys.versions:
        if k.master_key_id == to_id:
            out.append(k)
            continue
        plain = ciphers.unwrap(master(k.master_key_id), k.master_key_id, tid, k.version,
                               k.cipher, k.wrapped, topic)
        out.append(DataKey(k.version, k.cipher, to_id,
                           ciphers.wrap(master(to_id), to_id, tid, k.version, k.cipher, plain),
                           k.created_ms))
    return keys.replaced(out)


def for_config(keys: KeySet | None, enabled: bool, master_id: str, cipher: str,
               master: Master, topic: str, topic_id: str) -> KeySet | None:
    """The key set a topic's encryption configs call for: a first data key when encryption
    is turned on, a new version when the cipher changed, every version under the configured
    master key when it changed (each needs the master keys involved). Unchanged otherwise."""
    if enabled and (keys is None or keys.current_key.cipher != cipher):
        keys = rotated(keys, master, master_id, topic_id, cipher)
    if keys is not None and master_id and any(k.master_key_id != master_id
                                              for k in keys.versions):
        keys = rewrapped(keys, master, master_id, topic, topic_id)
    return keys
