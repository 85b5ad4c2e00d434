"""A topic's keys in one engine (``TopicKeys``), and the engine's keyring with them (``Vault``).

The catalog holds each topic's data keys wrapped (engine.crypto.keyset); a ``TopicKeys``
unwraps a version with the keyring the first time a batch needs it, keeps it in memory, and
hands out the ``Sealer`` of the current version and an ``Opener`` for every version. It
learns of new versions (a rotation, a rewrap, a drop) from the catalog: the engine passes
each newer catalog entry to ``update``, and ``refresh`` looks at the catalog itself (the
append pipeline does, whenever it takes a partition's flock: a writer never seals with a
version another process dropped meanwhile).
"""

from __future__ import annotations

import functools
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CorruptRecordError, KeyUnavailable
from ..format.records import BatchHeader
from . import ciphers
from .batch import Opener, Sealer, UnknownKeyVersion
from .keyring import Keyring
from .keyset import DataKey, KeySet

METADATA_DOMAIN = b"rivven offset metadata v1\x00"
# where a partition records that every data batch is sealed: ``[start, end)`` ranges, in
# offset order (end None: to the end of the log; engine.segments.sealed_range)
Claim = Sequence[tuple[int, "int | None"]]


class TopicKeys:
    def __init__(self, name: str, topic_id: str, keyset: KeySet | None,
                 keyring: Keyring | None,
                 lookup: Callable[[str], Any] | None = None) -> None:
        self.name = name
        self.id = topic_id
        self.id_bytes = bytes.fromhex(topic_id)
        self.keyset = keyset
        self.keyring = keyring
        self.lookup = lookup  # name -> the topic's catalog entry as it is now (or None)
        self._plain: dict[int, tuple[str, bytes]] = {}
        self._sealers: dict[int, Sealer] = {}
        self._mutex = threading.Lock()
        self.opener = Opener(self.id_bytes, self.key_of)

    def __repr__(self) -> str:
        return f"TopicKeys({self.name!r}, current={self.keyset and self.keyset.current})"

    def update(self, keyset: KeySet | None) -> None:
        """The catalog's key set of this topic (id) as some caller read it. One older than
        what this object holds (a lower current version: a catalog entry cached before a
        rotation) is ignored: a writer never goes back to a version that may be dropped."""
        cur = self.keyset
        if keyset is cur or (cur is not None
                             and (keyset is None or keyset.current < cur.current)):
            return
        self.keyset = keyset

    def refresh(self) -> None:
        """Read the topic's key set from the catalog (one stat when it did not change)."""
        if self.lookup is not None:
            meta = self.lookup(self.name)
            if meta is not None and meta.id == self.id:
                self.update(meta.keys)

    # ---------------------------------------------------------------- keys
    def data_key(self, version: int) -> DataKey:
        ks = self.keyset
        dk = ks.get(version) if ks is not None else None
        if dk is None:
            self.refresh()  # (rotated by another process since we looked)
            ks = self.keyset
            dk = ks.get(version) if ks is not None else None
        if dk is None:
            # what names it (a batch header, a sealed metadata) is damaged or forged, or the
            # catalog lost it: damage either way (exit 3), never a missing keyring (exit 1)
            raise UnknownKeyVersion(
                f"data key version {version} of topic {self.name!r} is not in the catalog: "
                "what names it is damaged, or topics.json was restored from an older copy "
                "(restore one that holds the version)")
        return dk

    def key_of(self, version: int) -> tuple[str, bytes]:
        """``(cipher, data key)`` of a version, unwrapped with the keyring the first time."""
        got = self._plain.get(version)
        if got is not None:
            return got
        dk = self.data_key(version)
        if self.keyring is None:
            raise KeyUnavailable(
                f"topic {self.name!r} is encrypted (data key version {version}, under master "
                f"key {dk.master_key_id!r}) and no keyring was given: pass --keyring FILE or "
                "set RIVVEN_KEYRING (Engine.open(keyring=...))")
        master = self.keyring.get(dk.master_key_id)
        key = ciphers.unwrap(master, dk.master_key_id, self.id_bytes, dk.version, dk.cipher,
                             dk.wrapped, self.name)
        got = (dk.cipher, key)
        with self._mutex:
            self._plain[version] = got
        return got

    def sealer(self) -> Sealer:
        """The sealer of the current data key version."""
        ks = self.keyset
        if ks is None:
            self.refresh()
            ks = self.keyset
            if ks is None:
                raise KeyUnavailable(
                    f"topic {self.name!r} has encryption.enable=true but no data key: run "
                    f"'rivven key rotate {self.name}' (with the keyring holding its "
                    "encryption.key.id)")
        s = self._sealers.get(ks.current)
        if s is None:
            cipher, key = self.key_of(ks.current)
            with self._mutex:
                s = self._sealers.setdefault(ks.current, Sealer(ks.current, cipher, key))
        return s

    # ---------------------------------------------------------------- batches
    def seal_batch(self, plain: Any, partition: int) -> bytearray:
        return self.sealer().seal_batch(plain, self.id_bytes, partition)

    def open_batch(self, buf: Any, pos: int, h: BatchHeader, where: str = "",
                   partition: int = 0) -> bytes:
        return self.opener.open_batch(buf, pos, h, partition, where)

    def opener_for(self, partition: int, claim: Claim = (),
                   now: Callable[[], Claim] | None = None
                   ) -> Callable[[Any, int, BatchHeader, str], bytes]:
        """``body_of``'s opener for one partition of the topic; with ``claim``, the ranges
        ``[start, end)`` at which the partition records that every data batch is sealed,
        a ``SealedOpener`` (``now``: the record as it is now)."""
        base = functools.partial(_open, self.opener, partition)
        if not claim:
            return base
        return SealedOpener(base, f"{self.name}-{partition}", claim, now)

    def portable(self) -> StaticKeys:
        """Every version's key the catalog holds, unwrapped, for another process (a Spark
        task): no keyring there, no catalog."""
        ks = self.keyset
        want = [k.version for k in ks.versions] if ks is not None else []
        return StaticKeys(self.id, {v: self.key_of(v) for v in want},
                          ks.current if ks is not None else 0)

    # ---------------------------------------------------------------- offset metadata
    def seal_text(self, text: str, context: bytes) -> dict[str, Any]:
        """A committed offset's metadata sealed with the current key, as the offsets log
        stores it: ``{"v": version, "s": base64 envelope}``."""
        import base64

        s = self.sealer()
        return {"v": s.version, "s": base64.b64encode(
            s.seal(text.encode("utf-8"), METADATA_DOMAIN + self.id_bytes + context)).decode()}

    def open_text(self, doc: dict[str, Any], context: bytes, what: str) -> str:
        import base64
        import binascii

        try:
            sealed = base64.b64decode(doc["s"], validate=True)
        except (binascii.Error, ValueError):
            raise CorruptRecordError(f"{what} is damaged: its sealed text is not base64"
                                     ) from None
        raw = self.opener.open(doc["v"], sealed, METADATA_DOMAIN + self.id_bytes + context, what)
        return raw.decode("utf-8", "replace")


def _open(opener: Opener, partition: int, buf: Any, pos: int, h: BatchHeader,
          where: str = "") -> bytes:
    return opener.open_batch(buf, pos, h, partition, where)


class PlaintextBatch(CorruptRecordError):
    """A plaintext data batch where its partition records that every batch is sealed: not
    written by rivven (damaged, or forged by someone who could write the data dir)."""


def _covering(claim: Claim, h: BatchHeader) -> tuple[int, int | None] | None:
    for start, end in claim:
        if start < h.next_offset and (end is None or h.base_offset < end):
            return start, end
    return None


class SealedOpener:
    """``body_of``'s opener for a partition that records where every data batch is sealed
    (engine.segments.sealed_range): it opens sealed batches, and ``plain(header, where)``
    (body_of calls it for each plaintext batch) refuses a plaintext data batch in ``claim``
    (the record when the read began), unless the record as it is ``now`` no longer claims it
    (a writer appended it after turning encryption off). Without the first check, a reader
    still inside a segment that a re-encryption replaced meanwhile (and then claimed sealed)
    would take its old batches for forgeries."""

    __slots__ = ("open", "label", "claim", "now")

    def __init__(self, open_: Callable[..., bytes], label: str, claim: Claim,
                 now: Callable[[], Claim] | None) -> None:
        self.open = open_
        self.label = label
        self.claim = claim
        self.now = now

    def __call__(self, buf: Any, pos: int, h: BatchHeader, where: str = "") -> bytes:
        return self.open(buf, pos, h, where)

    def plain(self, h: BatchHeader, where: str = "") -> None:
        if h.is_control or _covering(self.claim, h) is None:
            return
        found = _covering(self.now() if self.now is not None else self.claim, h)
        if found is None:
            return
        start, end = found
        at = f"offsets {start}..{end - 1}" if end is not None else f"offset {start} on"
        raise PlaintextBatch(
            f"the batch at offsets {h.base_offset}..{h.last_offset}{where} is plaintext, but "
            f"every batch of {self.label} at {at} is sealed (encryption.json): rivven did not "
            "write it (damaged, or forged by someone who could write the data dir); run "
            "'rivven segment verify'")


def metadata_context(group: str, partition: int, offset: int) -> bytes:
    """What a sealed offset metadata is bound to besides its topic: group, partition, offset."""
    return group.encode("utf-8") + b"\0" + struct.pack("<Iq", partition, offset)


class OffsetMetadata:
    """Committed offsets' metadata strings of encrypted topics, sealed: the offsets log keeps
    ``{"v": data key version, "s": base64 envelope}`` in place of the string, bound to the
    topic id, group, partition and offset. ``keys_of(topic)`` gives the topic's keys and
    whether it encrypts now (None for a topic that never did)."""

    def __init__(self, keys_of: Callable[[str], tuple[TopicKeys, bool] | None]) -> None:
        self.keys_of = keys_of

    def seal(self, group: str, topic: str, partition: int, offset: int, text: str) -> Any:
        if not text:
            return text
        found = self.keys_of(topic)
        if found is None or not found[1]:
            return text
        tk = found[0]
        tk.refresh()  # (never with a version dropped meanwhile)
        return tk.seal_text(text, metadata_context(group, partition, offset))

    def open(self, group: str, topic: str, partition: int, offset: int, stored: Any
             ) -> tuple[str | None, bool]:
        """``(text, sealed)``: the text (None when the keys to open it are not at hand: the
        offsets stay readable without any key)."""
        if isinstance(stored, str):
            return stored, False
        found = self.keys_of(topic)
        if found is None:
            return None, True
        try:
            return found[0].open_text(stored, metadata_context(group, partition, offset),
                                      f"the metadata committed by group {group!r} for "
                                      f"{topic}-{partition} at offset {offset}"), True
        except (KeyUnavailable, UnknownKeyVersion):
            return None, True

    def encrypts(self, topic: str) -> bool:
        """Does ``topic`` encrypt now (its commit metadata is sealed)?"""
        found = self.keys_of(topic)
        return found is not None and found[1]

    def resealed(self, group: str, topic: str, partition: int, offset: int, stored: Any
                 ) -> Any:
        """What a re-encryption keeps of a commit's metadata: sealed with the current key
        (the text when the topic no longer encrypts; a text committed before the topic
        encrypted, sealed); None when it already is. Raises when the keys to open it are
        not at hand."""
        found = self.keys_of(topic)
        if found is None:
            return None
        tk, enabled = found
        if isinstance(stored, str):
            if not enabled or not stored:
                return None
            tk.refresh()  # (never with a version dropped meanwhile)
            return tk.seal_text(stored, metadata_context(group, partition, offset))
        cur = tk.keyset.current if tk.keyset is not None else None
        if enabled and stored.get("v") == cur:
            return None
        ctx = metadata_context(group, partition, offset)
        text = tk.open_text(stored, ctx, f"the metadata committed by group {group!r} for "
                            f"{topic}-{partition} at offset {offset}")
        return tk.seal_text(text, ctx) if enabled else text


class StaticKeys:
    """A topic's unwrapped data keys, carried to a process without a keyring (pickled into
    a Spark task): opens any of them, seals with ``current``."""

    def __init__(self, topic_id: str, keys: dict[int, tuple[str, bytes]], current: int) -> None:
        self.id = topic_id
        self.keys = dict(keys)
        self.current = current
        self.opener = Opener(bytes.fromhex(topic_id), self.key_of)
        self._sealer: Sealer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"id": self.id, "keys": self.keys, "current": self.current}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["id"], state["keys"], state["current"])  # type: ignore[misc]

    def key_of(self, version: int) -> tuple[str, bytes]:
        got = self.keys.get(version)
        if got is None:
            raise KeyUnavailable(f"data key version {version} of topic id {self.id} was not "
                                 "handed to this task (rotated meanwhile?); run the job again")
        return got

    def opener_for(self, partition: int, claim: Claim = (),
                   now: Callable[[], Claim] | None = None
                   ) -> Callable[[Any, int, BatchHeader, str], bytes]:
        base = functools.partial(_open, self.opener, partition)
        if not claim:
            return base
        return SealedOpener(base, f"partition {partition} of topic id {self.id}", claim, now)

    def seal_batch(self, plain: Any, partition: int) -> bytearray:
        if self._sealer is None:
            cipher, key = self.key_of(self.current)
            self._sealer = Sealer(self.current, cipher, key)
        return self._sealer.seal_batch(plain, self.opener.topic_id, partition)


class Vault:
    """The engine's keyring and the ``TopicKeys`` of the topics it met (by topic id)."""

    def __init__(self, keyring: Keyring | None, lookup: Callable[[str], Any] | None = None
                 ) -> None:
        self.keyring = keyring
        self.lookup = lookup
        self._topics: dict[str, TopicKeys] = {}
        self._mutex = threading.Lock()

    def topic(self, meta: Any) -> TopicKeys:
        """The keys of the topic ``meta`` (a catalog entry: name, id, keys)."""
        tk = self._topics.get(meta.id)
        if tk is None:
            with self._mutex:
                tk = self._topics.get(meta.id)
                if tk is None:
                    tk = self._topics[meta.id] = TopicKeys(meta.name, meta.id, meta.keys,
                                                           self.keyring, self.lookup)
        tk.update(meta.keys)
        return tk

    def metadata_keys(self, topic: str) -> tuple[TopicKeys, bool] | None:
        """(``OffsetMetadata``'s ``keys_of``.) A topic's keys (looked up by name) and whether
        it encrypts now; None when it never did, or is gone."""
        meta = self.lookup(topic) if self.lookup is not None else None
        if meta is None or (meta.keys is None and not meta.typed.encryption_enable):
            return None
        return self.topic(meta), meta.typed.encryption_enable

    def master(self, key_id: str) -> bytes:
        """A master key of the keyring (KeyUnavailable naming the fix when there is none)."""
        if self.keyring is None:
            raise KeyUnavailable(f"master key {key_id!r} is needed and no keyring was given: "
                                 "pass --keyring FILE or set RIVVEN_KEYRING "
                                 "(Engine.open(keyring=...))")
        return self.keyring.get(key_id)
