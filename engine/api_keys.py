"""The part of ``Engine`` that manages encryption keys (docs/ENCRYPTION.md): what each topic's
data keys cover, rotating a data key, rewrapping every data key under another master key,
and re-encrypting a topic (engine.maintenance.reencrypt). Mixed into ``Engine``; the
attributes below are the engine's own."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import clock
from .crypto.topic import TopicKeys, Vault
from .errors import InvalidConfig
from .fs import guard
from .maintenance import reencrypt as recrypt
from .storage.catalog import Catalog, TopicMeta
from .storage.topics import Topics
from .tiering import tier as tiering

if TYPE_CHECKING:
    from .storage.log import PartitionLog

Runner = Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]


class KeysApi:
    path: str
    _topics: Topics
    _vault: Vault
    catalog: Catalog

    if TYPE_CHECKING:
        def topic(self, name: str, create_hint: bool = False) -> TopicMeta: ...
        def topics(self, names: Sequence[str] | None = None, regex: bool = False
                   ) -> list[TopicMeta]: ...
        def _logs(self, topic: str | None, partitions: Any = None, retain: bool = True
                  ) -> list[PartitionLog]: ...
        def _writable(self) -> None: ...
        def metadata_versions(self, topic: str) -> set[int]: ...
        def reseal_metadata(self, topic: str) -> int: ...
        def checkpoint(self) -> list[dict[str, Any]]: ...

    def topic_keys(self, topic: str) -> TopicKeys:
        """The data keys of ``topic`` in this engine (unwrapped with its keyring on use)."""
        return self._vault.topic(self.topic(topic))

    def metadata_keys(self, topic: str) -> tuple[TopicKeys, bool] | None:
        """(engine.crypto.topic.OffsetMetadata) A topic's keys and whether it encrypts now;
        None when it never did (or is gone)."""
        meta = self.catalog.get(topic)
        if meta is None or (meta.keys is None and not meta.typed.encryption_enable):
            return None
        return self._vault.topic(meta), meta.typed.encryption_enable

    # ---------------------------------------------------------------- status
    def key_status(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per topic (``topic``, or every topic that encrypts or ever did): its encryption
        configs, its data key versions (cipher, master key, created) and what each covers:
        ``bytes``, ``segments`` and ``ranges`` (runs of consecutive segments of a partition
        and tier: ``partition``, ``tier``, ``base_offset``, ``next_offset``, ``segments``,
        ``bytes``), and the same of ``plaintext`` batches. Reads batch headers and tier
        manifests only: no keyring needed."""
        metas = ([self.topic(topic)] if topic is not None else
                 [m for m in self.topics() if m.keys is not None or m.typed.encryption_enable])
        return [self._status(m) for m in metas]

    def _status(self, meta: TopicMeta) -> dict[str, Any]:
        cfg = meta.typed
        keys = meta.keys
        found: dict[int, dict[str, Any]] = {}
        for log in self._logs(meta.name):
            last: dict[int, dict[str, Any]] = {}  # the open range of each version
            for row in log.key_usage():
                for v, n in row["key_bytes"].items():
                    k = found.setdefault(v, {"bytes": 0, "segments": 0, "ranges": []})
                    k["bytes"] += n
                    k["segments"] += 1
                    r = last.get(v)
                    if r is not None and r["tier"] == row["tier"] and \
                            r["next_offset"] == row["base_offset"]:
                        r.update(next_offset=row["next_offset"], segments=r["segments"] + 1,
                                 bytes=r["bytes"] + n)
                    else:
                        r = last[v] = {"partition": log.partition, "tier": row["tier"],
                                       "base_offset": row["base_offset"],
                                       "next_offset": row["next_offset"], "segments": 1,
                                       "bytes": n}
                        k["ranges"].append(r)
                for v in [v for v in last if v not in row["key_bytes"]]:
                    del last[v]  # (a segment without it ends its run)
        empty = {"bytes": 0, "segments": 0, "ranges": []}
        rows = []
        for dk in keys.versions if keys is not None else ():
            rows.append({"version": dk.version, "cipher": dk.cipher,
                         "master_key_id": dk.master_key_id, "created_ms": dk.created_ms,
                         "current": dk.version == keys.current,  # type: ignore[union-attr]
                         **found.get(dk.version, empty)})
        for v in sorted(set(found) - {0} - {r["version"] for r in rows}):
            rows.append({"version": v, "cipher": None, "master_key_id": None,  # (damage)
                         "created_ms": None, "current": False, "missing": True, **found[v]})
        return {"topic": meta.name, "topic_id": meta.id, "encryption": cfg.encryption_enable,
                "cipher": cfg.encryption_cipher, "master_key_id": cfg.encryption_key_id or None,
                "current_version": keys.current if keys is not None else None,
                "keys": rows, "plaintext": found.get(0, empty)}

    # ---------------------------------------------------------------- rotate, rewrap
    def rotate_key(self, topic: str) -> dict[str, Any]:
        """A new data key for ``topic``: new batches are sealed with it from now on (in every
        process, once it next takes the partition's lock); older batches keep theirs."""
        self._writable()
        before = self.topic(topic).keys
        meta = self._topics.rotate_key(topic)
        cur = meta.keys.current_key  # type: ignore[union-attr]
        return {"topic": topic, "version": cur.version, "cipher": cur.cipher,
                "master_key_id": cur.master_key_id,
                "previous_version": before.current if before is not None else None}

    def rewrap_keys(self, to: str, topics: Sequence[str] | None = None) -> dict[str, Any]:
        """Every data key (of ``topics``, default every topic that has some) wrapped anew
        under master key ``to``, which becomes their ``encryption.key.id``: one catalog
        write, no batch rewritten. The keyring must hold ``to`` and the master keys the data
        keys are wrapped under now; the old ones may leave it afterwards."""
        self._writable()
        before = {m.name: m.keys for m in self.topics() if m.keys is not None}
        metas = self._topics.rewrap_keys(to, topics)
        return {"master_key_id": to, "topics": [
            {"topic": m.name, "versions": len(m.keys.versions),  # type: ignore[union-attr]
             "previous_master_key_ids": sorted({k.master_key_id for k in before[m.name].versions})}
            for m in metas]}

    # ---------------------------------------------------------------- reencrypt
    def reencrypt(self, topic: str, dry_run: bool = False, runner: Runner | None = None
                  ) -> dict[str, Any]:
        """Rewrite every segment of ``topic`` (local and cold) holding a batch under another
        data key than the current one (plaintext ones too; with ``encryption.enable`` off,
        every encrypted batch back to plaintext), then drop the data key versions no batch
        uses any more. Crash-safe: a partition holds its old segments or the new ones.
        ``runner(tasks)`` runs the rewrites (default: in this process; ``rivven spark
        reencrypt`` hands them to Spark; None back: a dry run of the command)."""
        if not dry_run:
            self._writable()
        meta = self.topic(topic)
        cfg = meta.typed
        if cfg.encryption_enable and meta.keys is None:
            raise InvalidConfig(f"topic {topic!r} has encryption.enable=true but no data key: "
                                f"run 'rivven key rotate {topic}'")
        target = meta.keys.current if cfg.encryption_enable and meta.keys else 0
        tk = self.topic_keys(topic)
        logs = self._logs(topic)
        plans = [recrypt.plan_partition(log, target) for log in logs]
        out: dict[str, Any] = {"topic": topic, "target_version": target or None,
                               "dry_run": dry_run, "partitions": []}
        if meta.keys is not None:
            tk.portable()  # every version unwraps (KeyUnavailable, WrongKey before any work)
        if dry_run:
            out["partitions"] = [_plan_row(p) for p in plans]
            out["would_drop"] = sorted(k.version for k in (meta.keys.versions if meta.keys else ())
                                       if k.version != meta.keys.current)  # type: ignore
            return out
        staging = os.path.join(self.path, ".compaction", f"reencrypt-{os.getpid()}-"
                               f"{uuid.uuid4().hex[:12]}")
        guard.make_dirs(self.path, staging)
        try:
            with contextlib.ExitStack() as stack:
                for log, plan in zip(logs, plans):
                    if plan["cold"]:  # (no tier run, restore or cold retention meanwhile)
                        stack.enter_context(tiering.locked(log))
                tasks = []
                for i, (log, plan) in enumerate(zip(logs, plans)):
                    if plan["roll"] and log.roll_active():
                        plans[i] = plan = {**recrypt.plan_partition(log, target), "roll": True}
                    tasks += recrypt.tasks_for(log, plan, staging)
                by_tp = {(log.topic, log.partition): log for log in logs}
                results = (runner or recrypt.run_in_process(by_tp))(tasks) if tasks else []
                now = clock.now_ms()
                for log, plan in zip(logs, plans):
                    row = _plan_row(plan)
                    row.update(recrypt.commit_partition(log, plan, results or [], now))
                    out["partitions"].append(row)
        finally:
            guard.remove_tree(self.path, staging)
        out["metadata_resealed"] = self.reseal_metadata(topic) if meta.keys is not None else 0
        # this process's WAL files may hold batches as they were before (appended before
        # encryption was turned on): a checkpoint deletes them (other processes' go at their
        # next checkpoint, checkpoint.interval.ms at most)
        self.checkpoint()
        dropped, kept = self._drop_unused_keys(topic, meta.id)
        out["dropped_versions"], out["kept_versions"] = dropped, kept
        return out

    def _drop_unused_keys(self, topic: str, topic_id: str) -> tuple[list[int], list[int]]:
        """Drop the data key versions of ``topic`` that no batch uses (never the current
        one), looking with the catalog lock and every partition's lock held, so no writer
        can seal with one meanwhile. Returns (dropped, kept)."""
        logs = self._logs(topic)
        cache: dict = {}
        recrypt.versions_in_use(logs, cache)  # (the long read, without locks)
        sealed = self.metadata_versions(topic)  # (committed offsets' metadata)
        with self.catalog.locked() as metas:
            meta = metas.get(topic)
            if meta is None or meta.id != topic_id or meta.keys is None:
                return [], []
            with contextlib.ExitStack() as stack:
                for log in sorted(logs, key=lambda lg: lg.partition):
                    stack.enter_context(log.mutation())
                used = recrypt.versions_in_use(logs, cache) | sealed
                drop = [k.version for k in meta.keys.versions
                        if k.version not in used and k.version != meta.keys.current]
                if drop:
                    metas[topic] = meta.changed(keys=meta.keys.without(drop))
                    self.catalog.write(metas)
            return drop, [k.version for k in meta.keys.versions if k.version not in drop]


def _plan_row(plan: dict[str, Any]) -> dict[str, Any]:
    return {"partition": plan["partition"], "rolled": plan["roll"],
            "local_segments": [r["base_offset"] for r in plan["local"]],
            "cold_segments": [r["base_offset"] for r in plan["cold"]], "bytes": plan["bytes"]}
