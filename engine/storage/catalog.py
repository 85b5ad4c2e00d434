"""The topic catalog: ``topics.json``, replaced atomically under ``catalog.lock``.

Readers never lock: they see the old file or the new one. A process notices another process's
change by the file's identity (inode, mtime, size), one ``stat`` per lookup (produce looks
at most every few ms: Engine._produce_meta).

The file is sealed with a CRC32C (``jsondoc.seal``; a file written before seals, with exactly
the keys ``format`` and ``topics``, is still read) and every field is checked on load: a
catalog that fails is ``DamagedMetadata`` naming the file, the topic and the field, and
nothing is done with it.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeGuard

from .. import clock
from ..crypto.keyset import KeySet
from ..errors import DataDirError, InvalidConfig, InvalidTopicName, RivvenError
from ..fs import durable, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path
from ..segments import tier_manifest
from .config import TopicConfig, validate

CATALOG = "topics.json"
CATALOG_LOCK = "catalog.lock"
FORMAT = 1
MAX_PARTITIONS = 100_000  # what a load accepts (creation allows fewer: topics.MAX_PARTITIONS)
_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_ID = re.compile(r"[0-9a-f]{32}")
_WHAT = "topic catalog"
_FIX = "restore it from a backup"


def check_topic_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        shown = name if isinstance(name, str) and len(name) <= 60 else f"{str(name)[:60]}..."
        raise InvalidTopicName(
            f"invalid topic name {shown!r}: use 1-249 characters from A-Z a-z 0-9 . _ - "
            "(not '.' or '..')"
        )


@dataclass
class TopicMeta:
    name: str
    id: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    created_ms: int = 0
    keys: KeySet | None = None  # the data keys (wrapped) of a topic that ever encrypted
    _typed: TopicConfig | None = field(default=None, repr=False, compare=False)

    @property
    def typed(self) -> TopicConfig:
        if self._typed is None:
            self._typed = TopicConfig.from_overrides(self.config)
        return self._typed

    def to_json(self) -> dict:
        out = {"id": self.id, "partitions": self.partitions, "config": self.config,
               "created_ms": self.created_ms}
        if self.keys is not None:
            out["keys"] = self.keys.to_json()
        return out

    def changed(self, **fields: object) -> TopicMeta:
        """A copy with ``fields`` replaced (the typed config made again)."""
        values = {"name": self.name, "id": self.id, "partitions": self.partitions,
                  "config": self.config, "created_ms": self.created_ms, "keys": self.keys}
        values.update(fields)
        return TopicMeta(**values)  # type: ignore[arg-type]

    @classmethod
    def new(cls, name: str, partitions: int, config: dict[str, str]) -> TopicMeta:
        return cls(name, uuid.uuid4().hex, partitions, dict(config), clock.now_ms())


class Catalog:
    def __init__(self, data_dir: str, lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self.data_dir = data_dir
        self.lock_wait = lock_wait
        self.path = os.path.join(data_dir, CATALOG)
        self.lock_path = os.path.join(data_dir, CATALOG_LOCK)
        self.topics: dict[str, TopicMeta] = {}
        self._stamp: tuple[int, int, int] | None = None

    def refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.topics, self._stamp = {}, None
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self.topics = self._load()
            self._stamp = stamp

    def _load(self) -> dict[str, TopicMeta]:
        try:
            raw = jsondoc.read(self.path, _WHAT, fix=_FIX)
        except OSError as e:
            raise DataDirError(f"topic catalog {self.path} is unreadable ({e.strerror or e}); "
                               "fix its permissions or restore it from a backup") from None
        if raw is None:  # removed since the stat: no topics
            return {}
        return parse_catalog(raw, self.path)

    def get(self, name: str) -> TopicMeta | None:
        self.refresh()
        return self.topics.get(name)

    @contextmanager
    def locked(self) -> Iterator[dict[str, TopicMeta]]:
        """Hold ``catalog.lock``; yields a fresh copy of the topics to change and ``write``."""
        with lock_path(self.lock_path, self.lock_wait):
            self._stamp = None
            self.refresh()
            yield dict(self.topics)

    def write(self, topics: dict[str, TopicMeta]) -> None:
        """Replace the catalog atomically (the caller holds ``locked()``)."""
        doc = {"format": FORMAT, "topics": {n: t.to_json() for n, t in sorted(topics.items())}}
        durable.write_atomic(self.path, jsondoc.seal(doc, indent=1))
        self._stamp = None
        self.refresh()

    @contextmanager
    def mutate(self) -> Iterator[dict[str, TopicMeta]]:
        """Lock, reload, let the caller change the dict, write it back atomically."""
        with self.locked() as topics:
            yield topics
            self.write(topics)


def parse_catalog(raw: bytes, path: str) -> dict[str, TopicMeta]:
    """The topics of the bytes of a ``topics.json`` at ``path``, every field checked
    (DamagedMetadata naming the file, the topic and the field otherwise)."""
    doc = jsondoc.unseal(raw, path, _WHAT, _FIX, legacy=("format", "topics"))
    fmt = doc.get("format")
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT:
        raise DataDirError(f"topic catalog {path} has format {fmt}; this rivven reads format "
                           f"{FORMAT}: upgrade rivven")
    jsondoc.get_int(doc, "format", path, _WHAT, FORMAT, FORMAT, _FIX)
    entries = doc.get("topics")
    if not isinstance(entries, dict):
        raise jsondoc.damaged(path, _WHAT, f"topics is {_kind(entries)}, not an object", _FIX)
    return {name: _topic(name, t, path) for name, t in entries.items()}


def _topic(name: str, t: object, path: str) -> TopicMeta:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise jsondoc.damaged(path, _WHAT, f"invalid topic name {jsondoc.shown(name)}", _FIX)

    def bad(reason: str) -> Exception:
        return jsondoc.damaged(path, _WHAT, f"topic {name}: {reason}", _FIX)

    if not isinstance(t, dict):
        raise bad(f"{_kind(t)} where an object belongs")
    tid = t.get("id")
    if not isinstance(tid, str) or not _ID.fullmatch(tid):
        raise bad(f"id is {jsondoc.shown(tid)}, not 32 lowercase hex digits")
    parts = t.get("partitions")
    if not _is_int(parts) or not 1 <= parts <= MAX_PARTITIONS:
        raise bad(f"partitions is {jsondoc.shown(parts)}, not an integer in 1..{MAX_PARTITIONS}")
    created = t.get("created_ms", 0)
    if not _is_int(created) or not 0 <= created <= jsondoc.MAX_INT:
        raise bad(f"created_ms is {jsondoc.shown(created)}, not a time in ms since the epoch")
    cfg = t.get("config", {})
    if not isinstance(cfg, dict):
        raise bad(f"config is {_kind(cfg)}, not an object")
    for k, v in cfg.items():  # every stored value through the config validator
        if not isinstance(v, str):
            raise bad(f"config {k} is {jsondoc.shown(v)}, not a string")
        try:
            validate({k: v})
        except InvalidConfig as e:
            raise bad(f"config {k}: {e}") from None
    keys = KeySet.from_json(t["keys"], bad) if "keys" in t else None
    return TopicMeta(name, tid, parts, dict(cfg), created, keys)


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _kind(v: object) -> str:
    return "missing" if v is None else f"a JSON {type(v).__name__}"


def home_of(pdir: str) -> tier_manifest.Home:
    """The Home of a partition directory ``DATA_DIR/topics/<topic>/partition-<p>``, from the
    topic catalog."""
    pdir = os.path.abspath(pdir)
    tdir = os.path.dirname(pdir)
    data_dir = os.path.dirname(os.path.dirname(tdir))
    topic, name = os.path.basename(tdir), os.path.basename(pdir)
    meta = Catalog(data_dir).get(topic)
    if meta is None or not name.startswith("partition-") or not name[10:].isdigit():
        raise RivvenError(f"{pdir} is not a partition of a topic in {data_dir}")
    return tier_manifest.home(data_dir, topic, meta.id, int(name[10:]),
                              meta.typed.remote_storage_uri)
