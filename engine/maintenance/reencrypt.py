"""Re-encryption (``rivven key reencrypt``): every batch of a topic under its current data key
(plaintext when ``encryption.enable`` is off), so the older data keys can go.

Per partition:

1. **Plan** (``plan_partition``): the segments, local and cold, holding a data batch under
   another key (``PartitionLog.key_usage``: headers and the tier manifest, no body read). An
   active segment among them is rolled first (``PartitionLog.roll_active``), so the pass
   reaches the newest records.
2. **Rewrite** (``run_task``, in process or in Spark executors): each such segment into a
   staging folder, same name and offsets: a batch already under the target key (and every
   transaction marker, never encrypted) is copied byte for byte; any other is opened and sealed
   again, its compressed body untouched. Indexes rebuilt, ``.txnindex`` copied, fsynced. A
   cold segment is downloaded (checked) first and its rewrite uploaded as a new object (read
   back and checked).
3. **Swap** (``commit_partition``): the local ones go in with one
   ``PartitionLog.replace_segments`` (refused, nothing changed, if one of them changed since
   the plan: retention, compaction); a crash leaves the old segments or the new ones, never a
   mix (the swap's own guarantee). Cold ones with one manifest write (``set_tier``), then the
   old objects go (a crash in between leaves orphans, which the next tier run removes).

Then ``drop_unused_keys``: with the catalog lock and every partition's lock held, the data
key versions no batch uses any more are dropped (writers refresh their keys whenever they take
a partition's lock, so none can seal with a version dropped here). ``reencrypt_topic`` runs
the whole pass (``Engine.keys.reencrypt``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from .. import clock
from ..errors import CorruptRecordError, RivvenError, plural
from ..failpoint import failpoint
from ..format.decode import Opener
from ..format.sealed import plain_batch
from ..fs import guard
from ..segments import filenames, tier_manifest
from ..segments.damage import refuse_damage
from ..segments.sealed_range import Span, covering
from ..segments.segment import Segment
from ..segments.swap import SwapRefused
from ..segments.tier_manifest import ColdSegment
from ..storage import datadir
from ..storage.catalog import Catalog, TopicMeta
from ..storage.log import PartitionLog
from ..tiering import cold, tier_pass
from ..tiering.cache import download_segment
from ..tiering.tier_pass import copy_segment, key_bytes
from .cleaner import Seal, publish, work_dir
from .results import Reencrypted, ReencryptPartition

Runner = Callable[[list[dict[str, Any]]], "list[dict[str, Any]] | None"]


class ReencryptError(RivvenError):
    pass


def stale(key_bytes: dict[int, int], target: int) -> bool:
    """Does a segment with these ``key_bytes`` hold a data batch not under ``target``?"""
    return any(v != target for v in key_bytes)


# ---------------------------------------------------------------- plan
def plan_partition(log: PartitionLog, target: int, usage: list[dict[str, Any]] | None = None
                   ) -> dict[str, Any]:
    """The segments of ``log`` to rewrite so that every data batch is under data key version
    ``target`` (0: plaintext): ``local`` and ``cold`` rows, and ``roll``: the active segment
    is one of them (it must be rolled before it can be rewritten)."""
    rows = usage if usage is not None else log.key_usage()
    local = [r for r in rows if r["tier"] == "local"]
    todo = [r for r in rows if stale(r["key_bytes"], target)]
    active = local[-1]["base_offset"] if local else None
    out = {"topic": log.topic, "partition": log.partition, "target": target,
           "roll": any(r["tier"] == "local" and r["base_offset"] == active for r in todo),
           "local": [r for r in todo if r["tier"] == "local"],
           "cold": [r for r in todo if r["tier"] == "cold"]}
    out["bytes"] = sum(r["bytes"] for r in todo)
    return out


def tasks_for(log: PartitionLog, plan: dict[str, Any], staging: str) -> list[dict[str, Any]]:
    """The rewrite tasks of one partition's plan (its active segment rolled already): one per
    segment, each naming its staging folder, a cold one its new object too. Each local row
    gets the ``expect`` stamp its swap checks."""
    out_dir = os.path.join(staging, f"{log.topic[:40]}-{log.topic_id.hex()[:12]}-{log.partition}")
    guard.make_path(out_dir)
    plan["out_dir"] = out_dir
    tasks: list[dict[str, Any]] = []
    base_task = {"topic": log.topic, "partition": log.partition, "target": plan["target"],
                 "out_dir": out_dir, "claim": [list(s) for s in log.sealed_range.current()]}
    for r in plan["local"]:
        st = os.stat(filenames.path(log.dir, r["base_offset"], filenames.LOG))
        r["expect"] = {"bytes": st.st_size, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns}
        tasks.append({**base_task, "kind": "local", "dir": log.dir,
                      "base_offset": r["base_offset"], "bytes": st.st_size})
    if plan["cold"]:
        prefix = log.tier_home().prefix
        by_base = {e.base_offset: e for e in log.tier}
        for r in plan["cold"]:
            e = by_base[r["base_offset"]]
            tasks.append({**base_task, "kind": "cold", "base_offset": e.base_offset,
                          "bytes": e.bytes, "entry": entry_row(e),
                          "object": f"{prefix}/{e.base_offset:020d}-{uuid.uuid4().hex[:8]}"})
    return tasks


def entry_row(e: ColdSegment) -> dict[str, Any]:
    d = dataclasses.asdict(e)
    d["key_bytes"] = [list(x) for x in e.key_bytes]
    return d


def entry_of(row: dict[str, Any]) -> ColdSegment:
    return ColdSegment(**{**row, "key_bytes": tuple(tuple(x) for x in row["key_bytes"])})


# ---------------------------------------------------------------- rewrite (anywhere)
def rewrite_segment(src_dir: str, base: int, out_dir: str, target: int,
                    opener: Opener | None, seal: Seal | None,
                    claim: Sequence[Any] | None = None) -> dict[str, Any]:
    """Write the segment at ``base`` of ``src_dir`` into ``out_dir`` with every data batch
    under ``target`` (``seal`` seals with it; 0: plaintext), indexes rebuilt, ``.txnindex``
    copied, fsynced. A plaintext data batch in ``claim`` (the ``[start, end)`` ranges where
    the partition records that every batch is sealed) is damage: never sealed, nothing
    written.
    Returns counts."""
    if target and seal is None:
        raise ReencryptError(f"data key version {target} is the target but no key to seal "
                             "with was given")
    rng = tuple(Span(*s) for s in claim or ())
    src = Segment(src_dir, base, writable=False)
    work = work_dir(out_dir)
    out = Segment(work, base, writable=True, create=True)
    stats = {"base_offset": base, "batches_copied": 0, "batches_rewritten": 0,
             "bytes_in": 0, "bytes_out": 0}
    try:
        size = src.file_size()
        stats["bytes_in"] = size
        pos = 0
        for ref in src.iter_batches(0, size, damaged=refuse_damage(src.path, "re-encryption")):
            h = ref.header
            if rng and not h.is_control and not h.is_encrypted and \
                    covering(rng, h.base_offset, h.next_offset) is not None:
                raise CorruptRecordError(
                    f"the batch at offsets {h.base_offset}..{h.last_offset}"
                    f"{src.where(ref.position)} is plaintext where every batch of the "
                    "partition is sealed (encryption.json): rivven did not write it; nothing "
                    "was rewritten, run 'rivven segment verify'")
            if h.is_control or h.key_version == target:
                data: Any = memoryview(ref.buf)[ref.start:ref.start + h.size]
                stats["batches_copied"] += 1
            else:
                if h.is_encrypted:
                    if opener is None:
                        raise ReencryptError(f"{src.path} holds encrypted batches and no key "
                                             "to open them was given")
                    stored = opener(ref.buf, ref.start, h, src.where(ref.position))
                    data = plain_batch(ref.buf, ref.start, stored)
                else:
                    data = ref.buf[ref.start:ref.start + h.size]
                if target:
                    assert seal is not None  # (refused above)
                    data = seal(data)
                stats["batches_rewritten"] += 1
            out.write(data, pos)
            pos += len(data)
        out.rebuild_indexes(truncate_torn=False)
        out.sync_all()
        stats["bytes_out"] = pos
    finally:
        out.close()
        src.close()
    txn = filenames.path(src_dir, base, filenames.TXNINDEX)
    if os.path.exists(txn):  # (the same offsets: its aborted transactions still hold)
        with open(txn, "rb") as fin, open(filenames.path(work, base, filenames.TXNINDEX), "wb",
                                          opener=guard.opener) as fout:
            shutil.copyfileobj(fin, fout)
            fout.flush()
            os.fsync(fout.fileno())
    publish(work, out_dir, base)
    return stats


def run_task(task: dict[str, Any], opener: Opener | None, seal: Seal | None
             ) -> dict[str, Any]:
    """One rewrite task (in process, or in a Spark executor): a local segment into the
    staging folder; a cold one downloaded (checked), rewritten and uploaded as a new object
    (read back and checked, as a tier run's copies are)."""
    base = task["base_offset"]
    out: dict[str, Any] = {"topic": task["topic"], "partition": task["partition"],
                           "kind": task["kind"]}
    if task["kind"] == "local":
        return {**out, **rewrite_segment(task["dir"], base, task["out_dir"], task["target"],
                                         opener, seal, task.get("claim"))}
    entry = entry_of(task["entry"])
    got = work_dir(task["out_dir"])
    try:
        download_segment(entry, got)
        made = work_dir(task["out_dir"])
        try:
            stats = rewrite_segment(got, base, made, task["target"], opener, seal,
                                    task.get("claim"))
            seg = Segment(made, base, writable=False)
            try:
                kb = key_bytes(seg, stats["bytes_out"])
            finally:
                seg.close()
            copied = copy_segment({"partition": task["partition"], "base_offset": base,
                                   "dir": made, "object": task["object"],
                                   "bytes": stats["bytes_out"]})
        finally:
            guard.remove_tree(task["out_dir"], made)
    finally:
        guard.remove_tree(task["out_dir"], got)
    return {**out, **stats, "copy": copied, "key_bytes": kb, "object": task["object"],
            "entry": task["entry"]}


def run_in_process(logs: dict[tuple[str, int], PartitionLog]
                   ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A runner of rewrite tasks in this process, with each partition's keys."""
    def run(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for t in tasks:
            log = logs[(t["topic"], t["partition"])]
            out.append(run_task(t, log.opener, log.seal_fn() if t["target"] else None))
        return out

    return run


# ---------------------------------------------------------------- commit (the driver)
def commit_partition(log: PartitionLog, plan: dict[str, Any], results: list[dict[str, Any]],
                     now_ms: int) -> ReencryptPartition:
    """Swap one partition's rewritten local segments in (one swap), then replace its cold
    ones' manifest entries with the new objects and remove the old objects."""
    mine = [r for r in results if r["partition"] == log.partition and r["topic"] == log.topic]
    local = sorted(r["base_offset"] for r in mine if r["kind"] == "local")
    if sorted(r["base_offset"] for r in plan["local"]) != local:
        raise ReencryptError(f"{log.topic}-{log.partition}: the rewrite returned "
                             f"{len(local)} of {plural(len(plan['local']), 'segment')}; "
                             "nothing was swapped, run the pass again")
    out: ReencryptPartition = {
        "segments_rewritten": len(local), "cold_rewritten": 0,
        "batches_rewritten": sum(r["batches_rewritten"] for r in mine),
        "batches_copied": sum(r["batches_copied"] for r in mine),
        "bytes_written": sum(r["bytes_out"] for r in mine)}
    if local:
        try:
            log.replace_segments(install=local, staged_dir=plan["out_dir"], remove=local,
                                 expect={r["base_offset"]: r["expect"] for r in plan["local"]})
        except SwapRefused as e:
            raise ReencryptError(f"{e} (re-encryption of {log.topic}-{log.partition}: run it "
                                 "again)") from None
    failpoint("reencrypt-swapped")
    new = [r for r in mine if r["kind"] == "cold"]
    if new:
        entries = tier_manifest.load(log.dir, log.tier_home())
        by_obj = {r["entry"]["object"]: r for r in new}
        kept: list[ColdSegment] = []
        gone: list[ColdSegment] = []
        for entry in entries:
            r = by_obj.get(entry.object)
            if r is None:
                kept.append(entry)
                continue
            c = r["copy"]
            kept.append(dataclasses.replace(
                entry, bytes=c["bytes"], crc32c=c["crc32c"], index_bytes=c["index_bytes"],
                index_crc32c=c["index_crc32c"], timeindex_bytes=c["timeindex_bytes"],
                timeindex_crc32c=c["timeindex_crc32c"], txnindex_bytes=c.get("txnindex_bytes", 0),
                txnindex_crc32c=c.get("txnindex_crc32c", 0), object=r["object"],
                uploaded_ms=now_ms, key_bytes=tuple((v, n) for v, n in r["key_bytes"])))
            gone.append(entry)
        log.set_tier(kept)
        failpoint("reencrypt-cold-manifest")
        for entry in gone:
            for suffix in entry.suffixes():
                with contextlib.suppress(OSError, RivvenError):
                    cold.remove(entry.url(suffix))
            if log.cold is not None:
                log.cold.forget(entry.object)  # (a local copy of the old bytes)
        out["cold_rewritten"] = len(gone)
    return out


# ---------------------------------------------------------------- dropping old keys
def versions_in_use(logs: Sequence[PartitionLog], cache: dict | None = None) -> set[int]:
    """Every data key version a data batch of ``logs`` uses (0: plaintext), local and cold;
    ``cache`` (PartitionLog.key_usage) makes a second look read only what changed."""
    used: set[int] = set()
    for log in logs:
        for row in log.key_usage(cache):
            used.update(row["key_bytes"])
    return used


def plan_row(plan: dict[str, Any]) -> ReencryptPartition:
    return {"partition": plan["partition"], "rolled": plan["roll"],
            "local_segments": [r["base_offset"] for r in plan["local"]],
            "cold_segments": [r["base_offset"] for r in plan["cold"]], "bytes": plan["bytes"]}


# ---------------------------------------------------------------- the whole pass
def reencrypt_topic(data_dir: str, meta: TopicMeta, logs: list[PartitionLog], target: int,
                    dry_run: bool, runner: Runner | None) -> Reencrypted:
    """Plan, rewrite (``runner(tasks)``, default in this process) and swap in every segment of
    ``logs`` holding a batch under another data key than ``target`` (0: plaintext). Rewrites
    are staged in ``DATA/.compaction/reencrypt-...`` (removed after; a killed pass's by the
    next writable open or pass: engine.storage.datadir.staging); the tier lock of each
    partition with cold segments planned is held throughout (no tier run, restore or cold
    retention meanwhile). Crash-safe: a partition holds its old segments or the new ones."""
    plans = [plan_partition(log, target) for log in logs]
    out: Reencrypted = {"topic": meta.name, "target_version": target or None,
                        "dry_run": dry_run, "partitions": []}
    if dry_run:
        keys = meta.keys
        out["partitions"] = [plan_row(p) for p in plans]
        out["would_drop"] = sorted(k.version for k in (keys.versions if keys else ())
                                   if keys is not None and k.version != keys.current)
        return out
    with datadir.staging(data_dir, "reencrypt") as staging, contextlib.ExitStack() as stack:
        for log, plan in zip(logs, plans):
            if plan["cold"]:
                stack.enter_context(tier_pass.locked(log))
        tasks = []
        for i, (log, plan) in enumerate(zip(logs, plans)):
            if plan["roll"] and log.roll_active():
                plans[i] = plan = {**plan_partition(log, target), "roll": True}
            tasks += tasks_for(log, plan, staging)
        by_tp = {(log.topic, log.partition): log for log in logs}
        results = (runner or run_in_process(by_tp))(tasks) if tasks else []
        now = clock.now_ms()
        for log, plan in zip(logs, plans):
            row = plan_row(plan)
            row.update(commit_partition(log, plan, results or [], now))
            out["partitions"].append(row)
    for log, row in zip(logs, out["partitions"]):
        # every batch under the target now: the partition records it (a forged plaintext
        # batch anywhere in it is damage from here on)
        claim = log.claim_sealed()
        row["sealed_from"] = claim[0].start if claim else None
    return out


def drop_unused_keys(catalog: Catalog, logs: list[PartitionLog], topic: str, topic_id: str,
                     sealed: set[int]) -> tuple[list[int], list[int]]:
    """Drop the data key versions of ``topic`` that no batch of ``logs`` uses nor the groups'
    sealed commit metadata (``sealed``), never the current one, looking with the catalog lock
    and every partition's lock held, so no writer can seal with one meanwhile. Returns
    (dropped, kept)."""
    cache: dict = {}
    versions_in_use(logs, cache)  # (the long read, without locks)
    with catalog.locked() as metas:
        meta = metas.get(topic)
        if meta is None or meta.id != topic_id or meta.keys is None:
            return [], []
        with contextlib.ExitStack() as stack:
            for log in sorted(logs, key=lambda lg: lg.partition):
                stack.enter_context(log.mutation())
            used = versions_in_use(logs, cache) | sealed
            drop = [k.version for k in meta.keys.versions
                    if k.version not in used and k.version != meta.keys.current]
            if drop:
                metas[topic] = meta.changed(keys=meta.keys.without(drop))
                catalog.write(metas)
        return drop, [k.version for k in meta.keys.versions if k.version not in drop]
