"""``Keys`` (``Engine.keys``): the encryption keys of a data dir's topics (docs/ENCRYPTION.md):
what each data key covers, rotating a data key, rewrapping every data key under another
master key, and re-encrypting a topic (engine.maintenance.reencrypt)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..crypto.topic import TopicKeys, Vault
from ..errors import InvalidConfig
from ..groups.admin import GroupAdmin
from ..storage.catalog import TopicMeta
from ..storage.finder import LogFinder
from ..storage.topics import Topics
from . import reencrypt
from .results import KeyRange, KeyRotated, KeyStatus, KeyUse, Reencrypted, Rewrapped


def _nothing() -> None:
    pass


class Keys:
    """The topics of ``topics`` (their wrapped data keys in the catalog), unwrapped through
    ``vault`` (the engine's keyring); partitions from ``find``; the groups' sealed commit
    metadata through ``groups``. ``writable()`` raises when the engine is read-only;
    ``checkpoint()`` is the engine's (after a re-encryption this process's WAL may still hold
    batches as they were)."""

    def __init__(self, data_dir: str, topics: Topics, vault: Vault, find: LogFinder,
                 groups: GroupAdmin, writable: Callable[[], None] = _nothing,
                 checkpoint: Callable[[], object] = _nothing) -> None:
        self.data_dir = data_dir
        self.topics = topics
        self.vault = vault
        self.find = find
        self.groups = groups
        self.writable = writable
        self.checkpoint = checkpoint

    def topic_keys(self, topic: str) -> TopicKeys:
        """The data keys of ``topic`` in this engine (unwrapped with its keyring on use)."""
        return self.vault.topic(self.find.topic(topic))

    # ---------------------------------------------------------------- status
    def status(self, topic: str | None = None) -> list[KeyStatus]:
        """Per topic (``topic``, or every topic that encrypts or ever did): its encryption
        configs, its data key versions (cipher, master key, created) and what each covers:
        ``bytes``, ``segments`` and ``ranges`` (runs of consecutive segments of a partition
        and tier: ``partition``, ``tier``, ``base_offset``, ``next_offset``, ``segments``,
        ``bytes``), and the same of ``plaintext`` batches; ``sealed_ranges``: per partition,
        the offset ranges at which it records every data batch sealed. Reads batch headers,
        tier manifests and ``encryption.json`` only: no keyring needed."""
        metas = ([self.find.topic(topic)] if topic is not None else
                 [m for m in self.find.all() if m.keys is not None or m.typed.encryption_enable])
        return [self._status(m) for m in metas]

    def _status(self, meta: TopicMeta) -> KeyStatus:
        cfg = meta.typed
        keys = meta.keys
        found: dict[int, KeyUse] = {}
        sealed: list[list[list[int | None]]] = []
        for log in self.find.logs(meta.name):
            sealed.append([list(s) for s in log.sealed_range.current()])
            last: dict[int, KeyRange] = {}  # the open range of each version
            for row in log.key_usage():
                for v, n in row["key_bytes"].items():
                    k = found.setdefault(v, {"bytes": 0, "segments": 0, "ranges": []})
                    k["bytes"] += n
                    k["segments"] += 1
                    r = last.get(v)
                    if r is not None and r["tier"] == row["tier"] and \
                            r["next_offset"] == row["base_offset"]:
                        r["next_offset"] = row["next_offset"]
                        r["segments"] += 1
                        r["bytes"] += n
                    else:
                        r = last[v] = {"partition": log.partition, "tier": row["tier"],
                                       "base_offset": row["base_offset"],
                                       "next_offset": row["next_offset"], "segments": 1,
                                       "bytes": n}
                        k["ranges"].append(r)
                for v in [v for v in last if v not in row["key_bytes"]]:
                    del last[v]  # (a segment without it ends its run)
        empty: KeyUse = {"bytes": 0, "segments": 0, "ranges": []}
        rows: list[KeyUse] = []
        current = keys.current if keys is not None else None
        for dk in keys.versions if keys is not None else ():
            rows.append({"version": dk.version, "cipher": dk.cipher,
                         "master_key_id": dk.master_key_id, "created_ms": dk.created_ms,
                         "current": dk.version == current,
                         **found.get(dk.version, empty)})
        for v in sorted(set(found) - {0} - {r.get("version") for r in rows}):
            rows.append({"version": v, "cipher": None, "master_key_id": None,  # (damage)
                         "created_ms": None, "current": False, "missing": True,
                         **found[v]})
        return {"topic": meta.name, "topic_id": meta.id, "encryption": cfg.encryption_enable,
                "cipher": cfg.encryption_cipher, "master_key_id": cfg.encryption_key_id or None,
                "current_version": keys.current if keys is not None else None,
                "keys": rows, "plaintext": found.get(0, empty), "sealed_ranges": sealed}

    # ---------------------------------------------------------------- rotate, rewrap
    def rotate(self, topic: str) -> KeyRotated:
        """A new data key for ``topic``: new batches are sealed with it from now on (in every
        process, once it next takes the partition's lock); older batches keep theirs."""
        self.writable()
        before = self.find.topic(topic).keys
        keys = self.topics.rotate_key(topic).keys
        assert keys is not None  # (rotate_key gave it one)
        cur = keys.current_key
        return {"topic": topic, "version": cur.version, "cipher": cur.cipher,
                "master_key_id": cur.master_key_id,
                "previous_version": before.current if before is not None else None}

    def rewrap(self, to: str, topics: Sequence[str] | None = None) -> Rewrapped:
        """Every data key (of ``topics``, default every topic that has some) wrapped anew
        under master key ``to``, which becomes their ``encryption.key.id``: one catalog
        write, no batch rewritten. The keyring must hold ``to`` and the master keys the data
        keys are wrapped under now; the old ones may leave it afterwards."""
        self.writable()
        before = {m.name: m.keys for m in self.find.all() if m.keys is not None}
        metas = self.topics.rewrap_keys(to, topics)
        return {"master_key_id": to, "topics": [
            # (rewrap_keys returns topics that have data keys: mypy cannot know)
            {"topic": m.name, "versions": len(m.keys.versions),  # type: ignore[union-attr]
             "previous_master_key_ids": sorted(
                 {k.master_key_id for k in before[m.name].versions})}
            for m in metas]}

    # ---------------------------------------------------------------- reencrypt
    def reencrypt(self, topic: str, dry_run: bool = False,
                  runner: reencrypt.Runner | None = None) -> Reencrypted:
        """Rewrite every segment of ``topic`` (local and cold) holding a batch under another
        data key than the current one (plaintext ones too; with ``encryption.enable`` off,
        every encrypted batch back to plaintext), then drop the data key versions no batch
        uses any more. Crash-safe: a partition holds its old segments or the new ones.
        ``runner(tasks)`` runs the rewrites (default: in this process; ``rivven spark
        reencrypt`` hands them to Spark; None back: a dry run of the command)."""
        if not dry_run:
            self.writable()
        meta = self.find.topic(topic)
        cfg = meta.typed
        if cfg.encryption_enable and meta.keys is None:
            raise InvalidConfig(f"topic {topic!r} has encryption.enable=true but no data key: "
                                f"run 'rivven key rotate {topic}'")
        target = meta.keys.current if cfg.encryption_enable and meta.keys else 0
        tk = self.topic_keys(topic)
        logs = self.find.logs(topic)
        if meta.keys is not None:
            tk.portable()  # every version unwraps (KeyUnavailable, WrongKey before any work)
        out = reencrypt.reencrypt_topic(self.data_dir, meta, logs, target, dry_run, runner)
        if dry_run:
            return out
        out["metadata_resealed"] = (self.groups.reseal_metadata(topic) if meta.keys is not None
                                    else 0)
        # this process's WAL files may hold batches as they were before (appended before
        # encryption was turned on): a checkpoint deletes them (other processes' go at their
        # next checkpoint, checkpoint.interval.ms at most)
        self.checkpoint()
        out["dropped_versions"], out["kept_versions"] = reencrypt.drop_unused_keys(
            self.topics.catalog, logs, topic, meta.id, self.groups.sealed_versions(topic))
        return out
