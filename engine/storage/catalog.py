"""The topic catalog: ``topics.json``, replaced atomically under ``catalog.lock``.

Readers never lock: they see the old file or the new one. A process notices another process's
change by the file's identity (inode, mtime, size), one ``stat`` per lookup (produce looks
at most every few ms: Engine._produce_meta).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import clock
from ..errors import DataDirError, InvalidTopicName
from . import files
from .config import TopicConfig
from .locks import DEFAULT_WAIT, LockWait, lock_path

CATALOG = "topics.json"
CATALOG_LOCK = "catalog.lock"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


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
    _typed: TopicConfig | None = field(default=None, repr=False, compare=False)

    @property
    def typed(self) -> TopicConfig:
        if self._typed is None:
            self._typed = TopicConfig.from_overrides(self.config)
        return self._typed

    def to_json(self) -> dict:
        return {"id": self.id, "partitions": self.partitions, "config": self.config,
                "created_ms": self.created_ms}

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
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
            out = {}
            for name, t in doc["topics"].items():
                check_topic_name(name)
                parts = int(t["partitions"])
                if not 1 <= parts <= 100_000:
                    raise ValueError(f"topic {name} has {parts} partitions")
                out[name] = TopicMeta(name, str(t["id"]), parts, {str(k): str(v) for k, v in
                                      t.get("config", {}).items()}, int(t.get("created_ms", 0)))
            return out
        except (OSError, ValueError, KeyError, TypeError, AttributeError, InvalidTopicName) as e:
            raise DataDirError(
                f"topic catalog {self.path} is unreadable ({e}); restore it from a backup"
            ) from None

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
        doc = {"format": 1, "topics": {n: t.to_json() for n, t in sorted(topics.items())}}
        files.write_atomic(self.path, json.dumps(doc, indent=1).encode())
        self._stamp = None
        self.refresh()

    @contextmanager
    def mutate(self) -> Iterator[dict[str, TopicMeta]]:
        """Lock, reload, let the caller change the dict, write it back atomically."""
        with self.locked() as topics:
            yield topics
            self.write(topics)
