"""Openers of encrypted batches for the tools that read files by path (``segment verify
--decrypt``, ``segment inspect --records``, ``wal inspect --records``): from the catalog of the
data dir the files belong to, and a keyring (engine.crypto)."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..crypto.topic import Vault
from ..format.decode import Opener
from ..storage.catalog import Catalog


class Openers:
    """The openers of one keyring (``vault``) for files of any data dir."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._catalogs: dict[str, Catalog] = {}

    def _catalog(self, data_dir: str) -> Catalog:
        cat = self._catalogs.get(data_dir)
        if cat is None:
            cat = self._catalogs[data_dir] = Catalog(data_dir)
        return cat

    def of_partition_dir(self, directory: str) -> Opener | None:
        """A partition directory (``DATA/topics/<topic>/partition-<n>``) -> the opener of its
        encrypted batches (None when its topic never encrypted, or it is no such dir)."""
        d = os.path.abspath(directory)
        name, part = os.path.basename(os.path.dirname(d)), os.path.basename(d)
        if not part.startswith("partition-") or not part[10:].isdigit():
            return None
        meta = self._catalog(os.path.dirname(os.path.dirname(os.path.dirname(d)))).get(name)
        if meta is None or meta.keys is None:
            return None
        return self.vault.topic(meta).opener_for(int(part[10:]))

    def of_topic_id(self, data_dir: str) -> Callable[[str, int], Opener | None]:
        """``(topic id, partition) -> opener`` for the topics of ``data_dir`` (a WAL record
        names its topic by id)."""
        def find(topic_id: str, partition: int) -> Opener | None:
            cat = self._catalog(os.path.abspath(data_dir))
            cat.refresh()
            meta = next((m for m in cat.topics.values() if m.id == topic_id), None)
            if meta is None or meta.keys is None:
                return None
            return self.vault.topic(meta).opener_for(partition)

        return find
