"""Tiered storage: which segments move to the cold store, the copy, the commit, a whole pass.

The order that makes a crash harmless: copy (a fresh object name per upload, verified by size
and CRC32C of the whole file) -> one swap of the partition (PartitionLog.set_tier) that writes
the tier manifest naming the copies and then deletes the local segments it holds. A crash
before the swap commits leaves unreferenced objects (removed by the next run); after it, the
swap is finished by whoever finds it. Every step holds the partition's ``.tier.lock``, so tier
runs, restores (engine.tiering.restore) and cold retention (``drop_below``) never interleave.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import clock
from ..errors import ColdObjectError, RivvenError, plural
from ..failpoint import failpoint
from ..fs.locks import open_lock_file, try_lock
from ..segments import filenames, tier_manifest
from ..segments.segment import Segment
from ..segments.swap import SwapRefused
from ..segments.tier_manifest import ALL_SUFFIXES, ColdSegment
from ..storage.catalog import TopicMeta
from ..storage.config import TopicConfig
from ..storage.log import PartitionLog
from . import cold
from .results import ManifestRow, TierPartition, TierRun

LogFor = Callable[[TopicMeta, int], PartitionLog]
OBJECT_FILE = re.compile(r"[0-9]{20}-")  # how every object's file name begins


class TierBusy(RivvenError):
    pass


def store_uri(data_dir: str, cfg: TopicConfig) -> str:
    return cfg.remote_storage_uri or cold.default_uri(data_dir)


def home(data_dir: str, meta: TopicMeta, partition: int) -> tier_manifest.Home:
    """Where a partition's cold objects go (the topic id keeps a recreated topic apart)."""
    return tier_manifest.home(data_dir, meta.name, meta.id, partition,
                              meta.typed.remote_storage_uri)


def topic_prefixes(data_dir: str, meta: TopicMeta) -> tuple[set[str], list[str]]:
    """Every cold prefix ``<store>/<topic>-<topic id>`` holding a topic's objects, and the
    problems found: the configured store's prefix always (from the config and the topic id,
    not from a manifest), and those its manifests recorded (remote.storage.uri may have
    changed since they were written). A damaged manifest adds a problem, never a prefix."""
    out: set[str] = set()
    problems: list[str] = []
    try:  # (never raises: the topic's local files go whatever its cold store holds)
        first = home(data_dir, meta, 0)
        out.add(first.topic_prefix(first.prefix))
    except RivvenError as e:
        return out, [str(e)]
    for p in range(meta.partitions):
        try:
            where = home(data_dir, meta, p)
            found = tier_manifest.read(filenames.partition_dir(data_dir, meta.name, p), where)
        except (RivvenError, OSError) as e:
            problems.append(str(e))
            continue
        out |= {where.topic_prefix(pre) for pre in found.prefixes}
    return out, problems


@contextlib.contextmanager
def locked(log: PartitionLog) -> Iterator[None]:
    """The partition's tier lock, or TierBusy at once when another run holds it."""
    fd = open_lock_file(os.path.join(log.dir, tier_manifest.TIER_LOCK))
    try:
        if not try_lock(fd):
            raise TierBusy(f"another tier job, restore or cold retention is running on "
                           f"{log.topic}-{log.partition}; wait for it and retry")
        yield
    finally:
        os.close(fd)  # (drops the flock)


# ------------------------------------------------------------------------------ planning
def plan_partition(log: PartitionLog, cfg: TopicConfig, now_ms: int, cold_prefix: str
                   ) -> dict[str, Any]:
    """Sealed local segments past local retention, oldest first: ``upload`` (not yet cold)
    and ``drop`` (already in the manifest: only the local copy goes)."""
    segs = log.all_segments()
    start = log.start_offset()
    manifest = {e.base_offset: e for e in log.tier}
    total = sum(s.size for s in segs)
    upload: list[dict[str, Any]] = []
    drop: list[dict[str, Any]] = []
    for i, seg in enumerate(segs[:-1]):
        nxt = segs[i + 1].base
        if nxt <= start:  # below the log start: retention deletes it
            total -= seg.size
            continue
        max_ts = log.segment_max_timestamp(seg)
        if cfg.local_ms >= 0 and max_ts < now_ms - cfg.local_ms:
            reason = "time"
        elif cfg.local_bytes >= 0 and total - seg.size >= cfg.local_bytes:
            reason = "size"
        else:
            break
        total -= seg.size
        row = {"base_offset": seg.base, "next_offset": nxt, "bytes": seg.size,
               "max_timestamp": max_ts, "reason": reason, "path": seg.path}
        e = manifest.get(seg.base)
        if e is not None and e.next_offset == nxt and e.bytes == seg.size:
            drop.append(row)
            continue
        st = os.stat(seg.path)
        row.update({"dir": log.dir, "inode": st.st_ino,
                    "object": f"{cold_prefix}/{seg.base:020d}-{uuid.uuid4().hex[:8]}",
                    "key_bytes": key_bytes(seg)})
        upload.append(row)
    return {"topic": log.topic, "partition": log.partition, "upload": upload, "drop": drop,
            "local_bytes_after": total}


def key_bytes(seg: Segment, size: int | None = None) -> list[list[int]]:
    """What the manifest records of a segment's data keys (``ColdSegment.key_bytes``):
    ``[[version, bytes], ...]``, or [] when every batch is plaintext."""
    found = seg.key_bytes(0, seg.size if size is None else size)
    return [[v, n] for v, n in sorted(found.items())] if any(found) else []


# ------------------------------------------------------------------------------ copying
def copy_segment(task: dict[str, Any]) -> dict[str, Any]:
    """Copy one local segment's three files to the cold store and verify each copy by reading
    it back whole (size and CRC32C). Runs in a Spark executor (or in process)."""
    out = {"partition": task["partition"], "base_offset": task["base_offset"]}
    names = {filenames.LOG: "", filenames.INDEX: "index_", filenames.TIMEINDEX: "timeindex_",
             filenames.TXNINDEX: "txnindex_"}
    for suffix in ALL_SUFFIXES:
        src = filenames.path(task["dir"], task["base_offset"], suffix)
        if suffix in filenames.OPTIONAL_FILES and not os.path.exists(src):
            continue
        url = task["object"] + suffix
        size, crc = cold.put(src, url)
        back = cold.checksum(url)
        if back != (size, crc):
            raise ColdObjectError(
                f"the copy {url} does not read back as written ({plural(back[0], 'byte')}, CRC32C "
                f"{back[1]:#010x}; wrote {plural(size, 'byte')}, {crc:#010x}); the local segment is kept")
        out[names[suffix] + "bytes"] = size
        out[names[suffix] + "crc32c"] = crc
    if out["bytes"] != task["bytes"]:
        raise ColdObjectError(f"segment {src} changed while it was copied ({task['bytes']} "
                                   f"-> {plural(out['bytes'], 'byte')}); nothing was tiered")
    return out


def commit(log: PartitionLog, plan: dict[str, Any], copies: list[dict[str, Any]],
           now_ms: int) -> TierPartition:
    """(Tier lock held.) Add verified copies to the manifest, then delete the local segments
    it holds. A copy whose local segment changed meanwhile (inode or size) is not added."""
    by_base = {c["base_offset"]: c for c in copies}
    entries = tier_manifest.load(log.dir, log.tier_home())
    known = {e.base_offset for e in entries}
    added: list[ColdSegment] = []
    for row in plan["upload"]:
        c = by_base.get(row["base_offset"])
        if c is None or row["base_offset"] in known:
            continue
        try:
            st = os.stat(row["path"])
        except FileNotFoundError:
            continue  # deleted meanwhile (retention): the copy is an orphan, removed later
        if st.st_ino != row["inode"] or st.st_size != c["bytes"]:
            continue
        added.append(ColdSegment(
            base_offset=row["base_offset"], next_offset=row["next_offset"], bytes=c["bytes"],
            crc32c=c["crc32c"], max_timestamp=row["max_timestamp"],
            index_bytes=c["index_bytes"], index_crc32c=c["index_crc32c"],
            timeindex_bytes=c["timeindex_bytes"], timeindex_crc32c=c["timeindex_crc32c"],
            object=row["object"], uploaded_ms=now_ms, txnindex_bytes=c.get("txnindex_bytes", 0),
            txnindex_crc32c=c.get("txnindex_crc32c", 0),
            key_bytes=tuple((v, n) for v, n in row.get("key_bytes", []))))
    failpoint("tier-copied")
    entries = sorted(entries + added, key=lambda e: e.base_offset)
    rows = plan["upload"] + plan["drop"]
    keep_from = max((r["next_offset"] for r in rows), default=0)
    gone = _held_locally(log, entries, keep_from) if rows else []
    if added or gone:
        try:  # the manifest names the copies, then the local segments go: one swap
            log.set_tier(entries, remove=[g["base_offset"] for g in gone],
                         expect={g["base_offset"]: {"bytes": g["bytes"]} for g in gone})
        except SwapRefused:
            gone = []  # one changed meanwhile (retention?): keep them all, the next run retries
            if added:
                log.set_tier(entries)
        failpoint("tier-manifest")
    return {"uploaded": [manifest_row(e) for e in added], "local_deleted": gone,
            "bytes": sum(e.bytes for e in added)}


def _held_locally(log: PartitionLog, entries: list[ColdSegment], keep_from: int
                  ) -> list[dict[str, Any]]:
    """The oldest local segments that ``entries`` hold (same offsets and size), up to (not
    including) the one at ``keep_from``: what may go once the manifest names them."""
    by_base = {e.base_offset: e for e in entries}
    segs = log.all_segments()
    out = []
    for seg, nxt in zip(segs, segs[1:]):
        e = by_base.get(seg.base)
        if seg.base >= keep_from or e is None or e.next_offset != nxt.base or \
                seg.file_size() != e.bytes:
            break
        out.append({"base_offset": seg.base, "next_offset": nxt.base, "bytes": e.bytes})
    return out


def manifest_row(e: ColdSegment) -> ManifestRow:
    return {"base_offset": e.base_offset, "next_offset": e.next_offset, "bytes": e.bytes,
            "crc32c": e.crc32c, "object": e.object + filenames.LOG}


def collect_garbage(log: PartitionLog, cold_prefix: str) -> list[str]:
    """(Tier lock held.) Delete objects under the partition's prefix that the manifest does
    not name: copies of a run that died before its manifest write, half-written temp files."""
    if not os.path.exists(tier_manifest.path(log.dir)):
        # no manifest (no tier run committed yet, or the file was lost): deleting "unreferenced"
        # objects could destroy the only copy of cold data, so nothing is collected
        return []
    named = {e.object for e in tier_manifest.load(log.dir, log.tier_home())}
    removed = []
    for url in cold.listdir(cold_prefix):
        if not OBJECT_FILE.match(url.rpartition("/")[2]):
            continue  # not a name rivven gives: not its to delete
        stem = url
        for suffix in ALL_SUFFIXES:
            if url.endswith(suffix):
                stem = url[:-len(suffix)]
                break
        if ".part-" in url or stem not in named:
            try:
                cold.remove(url)
            except IsADirectoryError:
                continue  # (a directory under a prefix is not rivven's either)
            removed.append(url)
            if log.cold is not None and stem != url:
                log.cold.forget(stem)  # (a local copy of an object no manifest names)
    return removed


# ------------------------------------------------------------------------------ retention
def drop_below(log: PartitionLog, start: int) -> list[ManifestRow]:
    """Remove manifest entries wholly below the log start ``start``, then their objects.
    Skipped (returns []) while a tier run holds the lock: the next retention pass does it."""
    try:
        with locked(log):
            entries = tier_manifest.load(log.dir, log.tier_home())
            gone = [e for e in entries if e.next_offset <= start]
            if not gone:
                return []
            log.set_tier([e for e in entries if e.next_offset > start])
            for e in gone:
                for suffix in e.suffixes():
                    cold.remove(e.url(suffix))
            return [manifest_row(e) for e in gone]
    except TierBusy:
        return []


# ------------------------------------------------------------------------------ a whole run
def tiered_topics(metas: list[TopicMeta], named: str | None) -> list[TopicMeta]:
    """The topics a pass covers: ``metas`` with remote storage on (the ``named`` topic must
    have it)."""
    if named is not None:
        for meta in metas:
            if meta.name == named and not meta.typed.remote_storage_enable:
                raise RivvenError(f"topic {named!r} has remote.storage.enable=false: turn it on "
                                  f"with 'rivven topic alter-config {named} --set "
                                  "remote.storage.enable=true'")
    return [m for m in metas if m.typed.remote_storage_enable]


def run(data_dir: str, metas: list[TopicMeta], log_for: LogFor,
        copier: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
        dry_run: bool = False, now: int | None = None,
        partitions: Sequence[int] | None = None) -> TierRun:
    """One tiering pass over ``metas`` (see ``tiered_topics``; only their ``partitions``
    when given): plan every partition (holding its tier lock until the end), hand the uploads
    to ``copier`` (a Spark job, or ``copy_segment`` in process), commit. ``copier`` returns
    None on a dry run."""
    t0 = time.time()
    now = clock.now_ms() if now is None else now
    out: TierRun = {"dry_run": dry_run, "partitions": []}
    with contextlib.ExitStack() as stack:
        plans = []
        for meta in metas:
            cold.check(store_uri(data_dir, meta.typed))
            for p in range(meta.partitions) if partitions is None else partitions:
                log = log_for(meta, p)
                stack.enter_context(locked(log))
                pre = home(data_dir, meta, p).prefix
                removed = [] if dry_run else collect_garbage(log, pre)
                plan = plan_partition(log, meta.typed, now, pre)
                if plan["upload"] and not dry_run and not os.path.exists(
                        tier_manifest.path(log.dir)):
                    # an (empty) manifest before the first copy: if this run dies, the next
                    # one may collect its copies (without a manifest nothing is collected)
                    log.set_tier([])
                plans.append((log, plan, removed))
        tasks = [{"topic": pl["topic"], "partition": pl["partition"], **row}
                 for _, pl, _ in plans for row in pl["upload"]]
        out["tasks"] = len(tasks)
        out["plan_bytes"] = sum(t["bytes"] for t in tasks)
        t1 = time.time()
        copies = copier(tasks) if tasks else (None if dry_run else [])
        out["copy_s"] = time.time() - t1
        for log, plan, removed in plans:
            row: TierPartition = {"topic": log.topic, "partition": log.partition,
                                   "planned": plan["upload"], "already_cold": plan["drop"],
                                   "orphans_removed": removed}
            if copies is not None:
                mine = [c for c in copies if c["partition"] == log.partition
                        and c.get("topic", log.topic) == log.topic]
                row.update(commit(log, plan, mine, now))
            out["partitions"].append(row)
    out["seconds"] = time.time() - t0
    return out


def copy_in_process(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**copy_segment(t), "topic": t["topic"]} for t in tasks]


