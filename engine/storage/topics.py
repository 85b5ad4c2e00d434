"""Topic administration: create, delete, alter configs, add partitions (``topics.json``).

Every change holds ``catalog.lock`` and rewrites the catalog atomically. A topic's partition
dirs are made before the catalog names them (a crash leaves debris that the next create of
the name removes) and trashed after it stops naming them (a crash leaves files only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..crypto import keyops
from ..crypto.keyset import KeySet
from ..crypto.topic import Vault
from ..errors import (
    InvalidArgument,
    InvalidConfig,
    StorageError,
    TopicExists,
    UnknownTopic,
    disk_full,
    plural,
)
from ..fs import durable, guard
from ..fs.locks import DEFAULT_WAIT, LockWait, flocked
from ..segments import filenames, tier_manifest
from . import datadir
from .catalog import Catalog, TopicMeta, check_topic_name
from .config import KEYS, TopicConfig, check_combination, validate

MAX_PARTITIONS = 10_000


class Topics:
    def __init__(self, data_dir: str, lock_wait: LockWait = DEFAULT_WAIT,
                 vault: Vault | None = None) -> None:
        self.data_dir = data_dir
        self.catalog = Catalog(data_dir, lock_wait)
        self.vault = vault if vault is not None else Vault(None)

    def get(self, name: str, create_hint: bool = False) -> TopicMeta:
        """Metadata of an existing topic (raises UnknownTopic, which says how to list the
        topics, and names a close one; ``create_hint``: how to create it, for a writer)."""
        meta = self.catalog.get(name)
        if meta is None:
            check_topic_name(name)
            if create_hint:
                raise UnknownTopic(f"topic {name!r} does not exist; create it with "
                                   f"'rivven topic create {name}'")
            import difflib

            close = difflib.get_close_matches(name, list(self.catalog.topics), n=1)
            raise UnknownTopic(f"topic {name!r} does not exist"
                               + (f" (did you mean {close[0]!r}?)" if close else "")
                               + "; 'rivven topic list' lists the topics")
        return meta

    def cached(self, name: str) -> TopicMeta | None:
        """The topic as last read, without looking at the file (None when unknown)."""
        return self.catalog.topics.get(name)

    def all(self) -> list[TopicMeta]:
        self.catalog.refresh()
        return [self.catalog.topics[n] for n in sorted(self.catalog.topics)]

    def matching(self, names: Sequence[str], regex: bool = False) -> list[TopicMeta]:
        """The topics named (those that exist), or with ``regex`` those a name matches whole
        (rpk's ``topic list -r``: each expression is anchored at both ends)."""
        if not regex:
            wanted = set(names)
            return [t for t in self.all() if t.name in wanted]
        try:
            pats = [re.compile(n) for n in names]
        except re.error as e:
            raise InvalidArgument(f"invalid regular expression {e.pattern!r}: {e}") from None
        return [t for t in self.all() if any(p.fullmatch(t.name) for p in pats)]

    def ensure(self, name: str, partitions: int, config: dict[str, str],
               exists_ok: bool = True) -> tuple[TopicMeta, bool]:
        """Create a topic, saying whether this call created it (with ``exists_ok`` an
        existing one is returned as it is; without, TopicExists)."""
        cfg = self._checked_new(name, partitions, config)
        with self.catalog.mutate() as topics:
            if name in topics:
                if exists_ok:
                    return topics[name], False
                raise TopicExists(f"topic {name!r} already exists; use --if-not-exists to ignore")
            meta = TopicMeta.new(name, partitions, cfg)
            meta = meta.changed(keys=self._keys_for(meta, cfg))
            tdir = os.path.join(self.data_dir, "topics", name)
            if os.path.lexists(tdir):  # debris of a create that crashed before the catalog write
                datadir.trash(self.data_dir, tdir, name)
            for p in range(partitions):
                datadir.make_partition(self.data_dir, name, p)
            durable.fsync_dir(os.path.join(self.data_dir, "topics"))
            topics[name] = meta
        return meta, True

    def check_new(self, name: str, partitions: int, config: dict[str, str]) -> TopicMeta:
        """What ``ensure(name, partitions, config, exists_ok=False)`` would create, nothing
        written (Kafka's validate_only): the same errors (TopicExists when it exists)."""
        cfg = self._checked_new(name, partitions, config)
        if self.catalog.get(name) is not None:
            raise TopicExists(f"topic {name!r} already exists")
        meta = TopicMeta.new(name, partitions, cfg)
        return meta.changed(keys=self._keys_for(meta, cfg))

    def _checked_new(self, name: str, partitions: int, config: dict[str, str]
                     ) -> dict[str, str]:
        """A new topic's name, partition count and configs checked; the configs normalized."""
        check_topic_name(name)
        if not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidArgument(
                f"invalid partition count {partitions}: use 1 to {MAX_PARTITIONS}")
        cfg = validate(config)
        check_combination(cfg)
        return cfg

    def delete(self, name: str, before_removal: Callable[[TopicMeta], Any] | None = None
               ) -> Any:
        """Remove a topic and its files; returns what ``before_removal(meta)`` returned (it
        runs under the catalog lock, before the files go)."""
        with self.catalog.locked() as topics:
            meta = self._existing(topics.pop(name, None), name)
            self._check_dirs(meta)  # (before anything changes: the topic stays as it is)
            # The catalog goes first: a crash after it leaves only files, which the next
            # create of this name (under this same lock) moves to trash.
            try:
                self.catalog.write(topics)
            except StorageError as e:
                if not disk_full(e):
                    raise
                # A full disk (even the space reserve used up): the files go first, which
                # frees the space the catalog needs. A crash in between leaves the topic
                # named with no files; 'topic delete' again finishes it.
                kept = self._remove_files(meta, before_removal)
                self.catalog.write(topics)
                return kept
            return self._remove_files(meta, before_removal)

    def _existing(self, meta: TopicMeta | None, name: str) -> TopicMeta:
        """``meta``, the catalog's entry of ``name`` (under its lock); when there is none the
        usual UnknownTopic, naming how to list the topics."""
        if meta is None:
            self.get(name)  # raises the usual error
            raise UnknownTopic(f"topic {name!r} does not exist (deleted meanwhile)")
        return meta

    def _check_dirs(self, meta: TopicMeta) -> None:
        """Every partition dir of ``meta``, its topic dir and ``topics/`` are real directories
        (UnexpectedLink names the first link): a partition dir linked elsewhere would have its
        target's lock file unlinked and its tier manifest read as this topic's."""
        for p in range(meta.partitions):
            guard.check_own_dir(filenames.partition_dir(self.data_dir, meta.name, p), 3)

    def _remove_files(self, meta: TopicMeta, before_removal: Callable[[TopicMeta], Any] | None
                      ) -> Any:
        """(catalog lock held.) Mark each partition gone for writers (its lock file unlinked
        while held: an append in flight finishes first), then trash the topic's files."""
        name = meta.name
        for p in range(meta.partitions):
            lock = os.path.join(filenames.partition_dir(self.data_dir, name, p), filenames.LOCK_FILE)
            try:
                fd = guard.open_file(lock, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                with flocked(fd, lock, self.catalog.lock_wait):
                    guard.remove_tree(self.data_dir, lock)  # (no link on the way: checked again)
            finally:
                os.close(fd)
        kept = before_removal(meta) if before_removal is not None else None
        tdir = os.path.join(self.data_dir, "topics", name)
        if os.path.lexists(tdir):
            datadir.trash(self.data_dir, tdir, name)
        return kept

    def alter_config(self, name: str, updates: dict[str, str], delete: Sequence[str],
                     replace: bool = False, validate_only: bool = False,
                     append: dict[str, str] | None = None,
                     subtract: dict[str, str] | None = None) -> TopicMeta:
        """Set ``updates`` and return ``delete`` to their defaults; with ``replace`` the
        topic's configs become ``updates`` alone (Kafka's AlterConfigs). ``append`` and
        ``subtract`` add and remove comma-separated values of list configs, from their
        current value (Kafka's IncrementalAlterConfigs), under the catalog lock.
        ``validate_only``: every check, nothing written; the metadata the topic would have."""
        updates = validate(updates)
        validate({k: KEYS[k].default if k in KEYS else "" for k in delete})  # unknown keys
        lists = {**(append or {}), **(subtract or {})}
        for k in lists:
            validate({k: KEYS[k].default if k in KEYS else ""})  # unknown keys
            if KEYS[k].kind != "list":
                op = "append" if k in (append or {}) else "subtract"
                raise InvalidConfig(f"Config value {op} is not allowed for config key: {k} "
                                    "(not a list: set it instead)")
        with (self.catalog.locked() if validate_only else self.catalog.mutate()) as topics:
            meta = self._existing(topics.get(name), name)
            cfg = {} if replace else dict(meta.config)
            cfg.update(updates)
            for k in delete:
                cfg.pop(k, None)
            for k, v in (append or {}).items():
                old = [x for x in cfg.get(k, KEYS[k].default).split(",") if x]
                cfg[k] = ",".join(old + [x for x in v.split(",") if x not in old])
            for k, v in (subtract or {}).items():
                gone = v.split(",")
                cfg[k] = ",".join(x for x in cfg.get(k, KEYS[k].default).split(",")
                                  if x and x not in gone)
            cfg.update(validate({k: cfg[k] for k in lists}))
            check_combination(cfg)
            if TopicConfig.from_overrides(cfg).compacted:
                cold: int = sum(len(tier_manifest.load(
                    filenames.partition_dir(self.data_dir, name, p),
                    tier_manifest.home(self.data_dir, name, meta.id, p,
                                       meta.typed.remote_storage_uri)))
                    for p in range(meta.partitions))
                if cold:
                    raise InvalidConfig(
                        f"topic {name!r} has {cold} segment(s) in the cold store, which compaction "
                        f"would never clean: bring them back first with 'rivven tier restore "
                        f"{name} --from 0', then set cleanup.policy")
            topics[name] = changed = meta.changed(config=cfg, keys=self._keys_for(meta, cfg))
        return changed if validate_only else self.get(name)

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicMeta:
        """Grow the topic to ``total`` partitions; ``validate_only``: the checks alone."""
        with (self.catalog.locked() if validate_only else self.catalog.mutate()) as topics:
            meta = self._existing(topics.get(name), name)
            if not isinstance(total, int) or total <= meta.partitions or total > MAX_PARTITIONS:
                raise InvalidArgument(
                    f"topic {name!r} has {plural(meta.partitions, 'partition')}; --total must be larger "
                    f"(at most {MAX_PARTITIONS}), partitions can never be removed")
            if validate_only:
                return meta.changed(partitions=total)
            for p in range(meta.partitions, total):
                datadir.make_partition(self.data_dir, name, p)
            topics[name] = meta.changed(partitions=total)
        return self.get(name)


    # ---------------------------------------------------------------- data keys
    def _keys_for(self, meta: TopicMeta, cfg: dict[str, str]) -> KeySet | None:
        """(catalog lock held.) The data keys the topic's encryption configs ``cfg`` call
        for (engine.crypto.keyops.for_config): made with the keyring's master keys."""
        typed = TopicConfig.from_overrides(cfg)
        if not typed.encryption_enable and (meta.keys is None or not typed.encryption_key_id):
            return meta.keys
        return keyops.for_config(meta.keys, typed.encryption_enable, typed.encryption_key_id,
                                 typed.encryption_cipher, self.vault.master, meta.name, meta.id)

    def rotate_key(self, name: str) -> TopicMeta:
        """A new data key for the topic, its current version from now on."""
        with self.catalog.mutate() as topics:
            meta = self._existing(topics.get(name), name)
            cfg = meta.typed
            if not cfg.encryption_enable:
                raise InvalidConfig(
                    f"topic {name!r} is not encrypted: turn encryption on first ('rivven topic "
                    f"alter-config {name} --set encryption.enable=true --set "
                    "encryption.key.id=KEYID')")
            topics[name] = meta.changed(keys=keyops.rotated(
                meta.keys, self.vault.master, cfg.encryption_key_id, meta.id,
                cfg.encryption_cipher))
        return self.get(name)

    def rewrap_keys(self, to_id: str, names: Sequence[str] | None = None) -> list[TopicMeta]:
        """Every data key of every topic that has some (or of ``names``) wrapped under master
        key ``to_id``, which becomes their ``encryption.key.id``: one catalog write."""
        with self.catalog.mutate() as topics:
            if names is not None:
                for n in names:
                    if n not in topics:
                        self.get(n)
            picked = [m for n, m in sorted(topics.items())
                      if m.keys is not None and (names is None or n in names)]
            self.vault.master(to_id)  # (missing: say so before any unwrap)
            for m in picked:
                assert m.keys is not None  # (picked: topics with keys)
                topics[m.name] = m.changed(
                    keys=keyops.rewrapped(m.keys, self.vault.master, to_id, m.name, m.id),
                    config={**m.config, "encryption.key.id": to_id})
        return [self.get(m.name) for m in picked]


def not_applied(meta: TopicMeta, partitions: int, config: dict[str, str]) -> list[str]:
    """What a create of an existing topic asked that the topic does not have:
    ``partitions`` (another count), ``config`` (a value it does not hold)."""
    want = validate(config)
    return ((["partitions"] if partitions != meta.partitions else [])
            + (["config"] if any(meta.config.get(k) != v for k, v in want.items()) else []))
