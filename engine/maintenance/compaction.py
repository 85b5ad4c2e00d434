"""Log compaction (Kafka's log cleaner is the model): plan, survivors, segment writing, swap.

A pass cleans a partition's *cleanable range*: its sealed segments from the start up to the
first one holding a record younger than ``min.compaction.lag.ms`` (the active segment never).
In that range the record with the highest offset of each key survives, with its offset,
timestamp and headers. A tombstone (null value) survives too until ``delete.retention.ms``
has passed since the first pass that kept it (its *delete horizon*); the partition's
``.cleaner`` file remembers ``[end offset, time]`` of every pass for that.

Source segments are cleaned in groups of consecutive segments holding at most
``segment.bytes`` (so the small survivors of earlier passes merge), each group into one new
segment named after its first source segment. The swap of a partition commits by writing
``compaction.swap.json`` (under the partition lock): from then on the swap is rolled forward by
whoever finds it (``roll_forward``: ``.cleaned`` -> ``.swap`` -> final name, then the replaced
segments are deleted); without it, ``.cleaned`` files are debris of a pass that never committed.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import RivvenError
from ..failpoint import failpoint
from ..format.arrow import batch_columns
from ..format.records import (
    ATTR_CODEC,
    ATTR_EXPLICIT_OFFSETS,
    ATTR_HAS_HEADERS,
    ATTR_VALUE_NULLS,
    body_of,
    decode_columns,
    encode_batch,
    layout,
)
from ..storage import files
from ..storage.segment import Segment

if TYPE_CHECKING:
    from ..storage.config import TopicConfig
    from ..storage.log import PartitionLog

CLEANER = ".cleaner"
MANIFEST = "compaction.swap.json"
MAX_PASSES = 1000  # pass history kept in .cleaner (older passes only ever lower the horizon)
SUFFIXES = (files.INDEX, files.TIMEINDEX, files.LOG)  # indexes first: a .log is the segment


class CompactionError(RivvenError):
    pass


# ---------------------------------------------------------------- cleaner state
def read_cleaner(pdir: str) -> dict[str, Any]:
    """``{"cleaned_end": offset, "passes": [[end_offset, time_ms], ...], "min_tombstone":
    lowest offset of a tombstone the last pass kept, or None}`` (empty when new)."""
    try:
        with open(os.path.join(pdir, CLEANER), "rb") as f:
            st = json.loads(f.read())
        mt = st.get("min_tombstone")
        return {"cleaned_end": int(st["cleaned_end"]),
                "passes": [[int(e), int(t)] for e, t in st["passes"]],
                "min_tombstone": None if mt is None else int(mt)}
    except (OSError, ValueError, KeyError, TypeError):
        return {"cleaned_end": 0, "passes": [], "min_tombstone": None}


def after_pass(state: dict[str, Any], end: int, now: int, min_tombstone: int | None
               ) -> dict[str, Any]:
    passes = [*state["passes"], [end, now]][-MAX_PASSES:]
    return {"cleaned_end": max(end, state["cleaned_end"]), "passes": passes,
            "min_tombstone": min_tombstone}


def tombstone_bound(state: dict[str, Any], delete_retention_ms: int, now: int) -> int:
    """Tombstones below this offset were first kept by a pass at least ``delete.retention.ms``
    ago, so this pass may remove them (passes are in time order, their ends never shrink)."""
    bound = 0
    for end, t in state["passes"]:
        if t + delete_retention_ms <= now:
            bound = max(bound, end)
    return bound


def first_kept_time(state: dict[str, Any], offset: int) -> int | None:
    """When the first pass that covered ``offset`` ran (None: no pass has yet)."""
    for end, t in state["passes"]:
        if offset < end:
            return t
    return None


# ---------------------------------------------------------------- plan
def plan_partition(log: PartitionLog, cfg: TopicConfig, now: int, force: bool = False
                   ) -> dict[str, Any]:
    """What a pass over this partition would clean, and why the rest is left alone."""
    with log.mutex:  # segments another process's pass replaced: plan on the files as they are
        log._drop_replaced()
    segs = log.all_segments()
    start = log.start_offset()
    state = read_cleaner(log.dir)
    sealed = segs[:-1]
    cleanable, held_by = [], None
    for i, seg in enumerate(sealed):
        max_ts = log.segment_max_timestamp(seg)
        if cfg.min_compaction_lag_ms > 0 and max_ts > now - cfg.min_compaction_lag_ms:
            held_by = {"base_offset": seg.base, "max_timestamp": max_ts}
            break
        st = os.fstat(seg.fd)
        cleanable.append({"base_offset": seg.base, "next_offset": segs[i + 1].base,
                          "bytes": seg.size, "max_timestamp": max_ts, "path": seg.path,
                          # which file: a rewritten segment can keep its size exactly
                          "ino": st.st_ino, "mtime_ns": st.st_mtime_ns})
    end = cleanable[-1]["next_offset"] if cleanable else (sealed[0].base if sealed else
                                                          segs[-1].base)
    first_dirty = max(state["cleaned_end"], start)
    clean = sum(s["bytes"] for s in cleanable if s["next_offset"] <= first_dirty)
    dirty = sum(s["bytes"] for s in cleanable) - clean
    ratio = dirty / (clean + dirty) if clean + dirty else 0.0
    if not cfg.compacted:
        skip = f"cleanup.policy is {cfg.cleanup_policy!r}, not compact"
    elif not cleanable:
        skip = "no sealed segment is cleanable yet"
    elif dirty == 0 and not force and not (
            state["min_tombstone"] is not None
            and state["min_tombstone"] < tombstone_bound(state, cfg.delete_retention_ms, now)):
        skip = "nothing written since the last pass and no tombstone past its horizon"
    elif ratio < cfg.min_cleanable_dirty_ratio and not force:
        skip = (f"dirty ratio {ratio:.2f} is below min.cleanable.dirty.ratio "
                f"{cfg.min_cleanable_dirty_ratio}")
    else:
        skip = None
    return {"topic": log.topic, "partition": log.partition, "dir": log.dir,
            "log_start_offset": start, "cleanable_end": end, "first_dirty": first_dirty,
            "active_base": segs[-1].base, "end_offset": log.end_offset(),
            "held_by_lag": held_by, "clean_bytes": clean, "dirty_bytes": dirty,
            "dirty_ratio": ratio, "segments": cleanable,
            "groups": group_segments(cleanable, cfg.segment_bytes),
            "tombstone_bound": tombstone_bound(state, cfg.delete_retention_ms, now),
            "cleaner": state, "skip": skip}


def group_segments(segs: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    """Consecutive segments, at most ``max_bytes`` and 2^31 offsets per group (Kafka's rule)."""
    groups: list[list[dict[str, Any]]] = []
    for s in segs:
        g = groups[-1] if groups else None
        if (g and sum(x["bytes"] for x in g) + s["bytes"] <= max_bytes
                and s["next_offset"] - g[0]["base_offset"] < (1 << 31) - 1):
            g.append(s)
        else:
            groups.append([s])
    return groups


# ---------------------------------------------------------------- survivors (reference)
def scan_keys(segs: Iterable[dict[str, Any]]) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(offset, key, is_tombstone)`` of every record of the given segment files."""
    for s in segs:
        seg = Segment(os.path.dirname(s["path"]), s["base_offset"], writable=False)
        try:
            for ref in seg.iter_batches(0, seg.file_size()):
                h = ref.header
                body = body_of(ref.buf, ref.start, h)
                offs, _, keys, values, _ = decode_columns(body, h, layout(body, h))
                for o, k, v in zip(offs, keys, values):
                    yield o, k, v is None
        finally:
            seg.close()


def survivor_offsets(records: Iterable[tuple[int, bytes | None, bool]], tombstone_bound: int,
                     where: str = "") -> tuple[set[int], dict[str, int]]:
    """The straightforward reference: a dict of key -> last (offset, tombstone)."""
    last: dict[bytes, tuple[int, bool]] = {}
    n = tombs = 0
    for o, k, dead in records:
        if k is None:
            raise CompactionError(f"record at offset {o}{where} has no key: a compacted topic "
                                  "needs a key on every record (set cleanup.policy=delete or "
                                  "delete the records with 'rivven delete-records')")
        last[k] = (o, dead)
        n += 1
        tombs += dead
    keep = {o for o, dead in last.values() if not (dead and o < tombstone_bound)}
    kept_tombs = sum(1 for o, dead in last.values() if dead and o >= tombstone_bound)
    return keep, {"records_in": n, "keys": len(last), "tombstones_in": tombs,
                  "tombstones_kept": kept_tombs}


# ---------------------------------------------------------------- writing a group
def write_group(group: list[dict[str, Any]], keep: Callable[[Any], Any], out_dir: str
                ) -> dict[str, Any]:
    """Write the survivors of one group of source segments as one segment in ``out_dir``
    (named after the group's first segment, indexes rebuilt, fsynced).

    ``keep(offsets)`` returns booleans (a list or a pyarrow BooleanArray) for a batch's
    offsets. A batch whose records all survive is copied byte for byte without decoding; a
    partly surviving one is re-encoded from its Arrow columns (only the survivors are
    touched), keeping offsets (as explicit deltas), timestamps, headers and codec.
    """
    base = group[0]["base_offset"]
    # a private folder, then renames: two attempts of one task (Spark speculation, a retry)
    # never write into each other's file
    work = os.path.join(out_dir, f".w-{os.getpid()}-{uuid.uuid4().hex}")
    os.makedirs(work)
    stats: dict[str, Any] = {
        "base_offset": base, "bytes_in": 0, "bytes_out": 0, "records_in": 0, "records_out": 0,
        "tombstones_in": 0, "batches_copied": 0, "batches_rewritten": 0, "min_tombstone": None}
    out = Segment(work, base, writable=True, create=True)
    try:
        pos = 0
        prev_end = base
        for s in group:
            src = Segment(os.path.dirname(s["path"]), s["base_offset"], writable=False)
            try:
                size = src.file_size()
                stats["bytes_in"] += size
                for ref in src.iter_batches(0, size):
                    h = ref.header
                    if h.base_offset < max(prev_end, s["base_offset"]) or \
                            h.next_offset > s["next_offset"]:
                        # overlapping segments (a half-done swap): never write offsets twice
                        raise CompactionError(
                            f"batch at offsets {h.base_offset}..{h.last_offset} of {s['path']} "
                            f"is outside {max(prev_end, s['base_offset'])}..{s['next_offset']}"
                            " (segments overlap: an interrupted swap?); nothing was swapped")
                    prev_end = h.next_offset
                    data, n_keep = _clean_batch(ref, keep, stats)
                    if data:
                        out.write(data, pos)
                        pos += len(data)
                        stats["records_out"] += n_keep
            finally:
                src.close()
        out.sync()
        out.rebuild_indexes(truncate_torn=False)
        out.index.sync()
        out.timeindex.sync()
    finally:
        out.close()
    for suffix in SUFFIXES:
        os.replace(files.path(work, base, suffix), files.path(out_dir, base, suffix))
    os.rmdir(work)
    stats["bytes_out"] = pos
    return stats


def _clean_batch(ref: Any, keep: Callable[[Any], Any], stats: dict[str, Any]
                 ) -> tuple[bytes, int]:
    """The bytes of one batch's survivors (b"" when none) and how many there are."""
    h = ref.header
    n = h.record_count
    stats["records_in"] += n
    body = lay = cols = None
    if h.attributes & ATTR_EXPLICIT_OFFSETS:
        body = body_of(ref.buf, ref.start, h)
        lay = layout(body, h)
        offs: Any = [h.base_offset + d
                     for d in struct.unpack_from(f"<{n}i", body, lay.offset_deltas)]
    else:
        offs = range(h.base_offset, h.next_offset)
    mask = keep(offs)
    mask = mask.to_pylist() if hasattr(mask, "to_pylist") else list(mask)
    n_keep = mask.count(True)
    nulls = None
    if h.attributes & ATTR_VALUE_NULLS:  # tombstones: counted, and the lowest kept noted
        if body is None:
            body = body_of(ref.buf, ref.start, h)
            lay = layout(body, h)
        cols = batch_columns(body, h, lay)
        nulls = cols[3].is_null().to_pylist()
        stats["tombstones_in"] += nulls.count(True)
        kept = [o for o, m, dead in zip(offs, mask, nulls) if m and dead]
        if kept and (stats["min_tombstone"] is None or kept[0] < stats["min_tombstone"]):
            stats["min_tombstone"] = kept[0]
    if n_keep == 0:
        return b"", 0
    if n_keep == n:
        stats["batches_copied"] += 1
        return bytes(ref.buf[ref.start:ref.start + h.size]), n
    import pyarrow as pa

    if body is None:
        body = body_of(ref.buf, ref.start, h)
        lay = layout(body, h)
    if cols is None:
        cols = batch_columns(body, h, lay)
    idx = pa.array([i for i, m in enumerate(mask) if m], pa.int32())
    kept_offs = [offs[i] for i in idx.to_pylist()]
    headers = None
    if h.attributes & ATTR_HAS_HEADERS:
        headers = [[(x["key"], x["value"]) for x in hs] for hs in cols[4].take(idx).to_pylist()]
    first = kept_offs[0]
    enc = encode_batch(cols[2].take(idx), cols[3].take(idx),
                       cols[1].take(idx).cast(pa.int64()).to_pylist(), headers,
                       h.attributes & ATTR_CODEC, offset_deltas=[o - first for o in kept_offs])
    stats["batches_rewritten"] += 1
    return bytes(enc.assign(first)), n_keep


# ---------------------------------------------------------------- swap
def swap(log: PartitionLog, plan: dict[str, Any], staged_dir: str, now: int,
         min_tombstone: int | None = None) -> dict[str, Any]:
    """Swap the staged segments of ``plan`` in for their sources, under the partition lock.

    Refused (and the log left alone) if a source segment changed since the plan. The commit
    point is the manifest; ``roll_forward`` does the rest, here or after a crash.
    """
    pdir = log.dir
    new = [g[0]["base_offset"] for g in plan["groups"]]
    replaced = [s["base_offset"] for g in plan["groups"] for s in g]
    log._quiesce()
    with log._exclusive():
        log._check_alive()
        log._refresh(repair=True)
        if os.path.exists(os.path.join(pdir, MANIFEST)):
            # another process's swap, cut short after its commit point, that this process
            # (open since before) never rolled forward: the plan saw a half-swapped log
            roll_forward(pdir)
            log._drop_replaced()
            log._relist()
            log._checkpoint_locked()
            raise CompactionError(f"{log.topic}-{log.partition}: an interrupted swap of another "
                                  "pass was finished first; nothing was swapped, run the pass "
                                  "again")
        if replaced and replaced[-1] >= log.active.base:
            raise CompactionError(f"{log.topic}-{log.partition}: the active segment changed "
                                  "under the pass; nothing was swapped")
        for g in plan["groups"]:
            for s in g:
                p = files.path(pdir, s["base_offset"], files.LOG)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    st = None
                if st is None or st.st_size != s["bytes"] or st.st_ino != s.get(
                        "ino", st.st_ino) or st.st_mtime_ns != s.get("mtime_ns", st.st_mtime_ns):
                    raise CompactionError(f"segment {p} changed or vanished since the plan "
                                          "(retention or another pass?); nothing was swapped")
        for b in new:
            for suffix in SUFFIXES:
                src = files.path(staged_dir, b, suffix)
                dst = files.path(pdir, b, suffix + files.CLEANED)
                shutil.move(src, dst)
                fd = os.open(dst, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        files.fsync_dir(pdir)
        failpoint("swap-cleaned")
        manifest = {"segments": new, "replaces": replaced,
                    "cleaner": after_pass(plan["cleaner"], plan["cleanable_end"], now,
                                          min_tombstone)}
        files.write_atomic(os.path.join(pdir, MANIFEST), json.dumps(manifest).encode())
        failpoint("swap-committed")
        roll_forward(pdir)  # committed
        for b in replaced:
            log.segments.pop(b, None)  # closed when no reader holds it any more
        log._relist()
        log._checkpoint_locked()  # a new .checkpoint tells other processes to look again
    return {"segments_before": len(replaced), "segments_after": len(new)}


def roll_forward(pdir: str) -> bool:
    """Finish a committed swap, or discard the debris of one that never committed. Run with
    the partition lock held. Idempotent. Returns True when a swap was finished."""
    try:
        with open(os.path.join(pdir, MANIFEST), "rb") as f:
            m = json.loads(f.read())
    except FileNotFoundError:
        for f in os.listdir(pdir):  # debris of a pass that never committed
            if f.endswith((files.CLEANED, files.SWAP)) or f.startswith(
                    (MANIFEST + ".tmp.", CLEANER + ".tmp.")):
                os.unlink(os.path.join(pdir, f))
        return False
    new = [int(b) for b in m["segments"]]
    for b in new:
        for suffix in SUFFIXES:
            c = files.path(pdir, b, suffix + files.CLEANED)
            if os.path.exists(c):
                os.replace(c, files.path(pdir, b, suffix + files.SWAP))
                failpoint("swap-renaming")
    files.fsync_dir(pdir)
    failpoint("swap-swapped")
    for b in new:  # the first segment of each group is replaced in one rename
        for suffix in SUFFIXES:
            s = files.path(pdir, b, suffix + files.SWAP)
            if os.path.exists(s):
                os.replace(s, files.path(pdir, b, suffix))
                failpoint("swap-installing")
    files.fsync_dir(pdir)
    for b in (int(x) for x in m["replaces"]):
        if b in new:
            continue
        for suffix in (files.LOG, files.INDEX, files.TIMEINDEX):  # .log first: it defines it
            try:
                os.unlink(files.path(pdir, b, suffix))
                failpoint("swap-deleting")
            except FileNotFoundError:
                pass
    files.fsync_dir(pdir)
    files.write_atomic(os.path.join(pdir, CLEANER), json.dumps(m["cleaner"]).encode())
    failpoint("swap-cleaner")
    os.unlink(os.path.join(pdir, MANIFEST))
    files.fsync_dir(pdir)
    return True


# ---------------------------------------------------------------- in process
def compact_partition(log: PartitionLog, cfg: TopicConfig, staging: str, now: int | None = None,
                      force: bool = False) -> dict[str, Any]:
    """One pass without Spark (the reference the Spark job is measured against)."""
    now = int(time.time() * 1000) if now is None else now
    plan = plan_partition(log, cfg, now, force)
    if plan["skip"]:
        return {"plan": plan, "skipped": plan["skip"]}
    keep, stats = survivor_offsets(scan_keys(plan["segments"]), plan["tombstone_bound"],
                                   f" of {log.topic}-{log.partition}")
    out_dir = os.path.join(staging, f"{log.topic}-{log.partition}")
    writes = [write_group(g, lambda offs: [o in keep for o in offs], out_dir)
              for g in plan["groups"]]
    swapped = swap(log, plan, out_dir, now, min_tombstone(writes))
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"plan": plan, "skipped": None, "keys": stats["keys"],
            "tombstones_kept": stats["tombstones_kept"], **summarize(writes), **swapped}


def min_tombstone(writes: list[dict[str, Any]]) -> int | None:
    found = [w["min_tombstone"] for w in writes if w.get("min_tombstone") is not None]
    return min(found) if found else None


def summarize(writes: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: sum(w[k] for w in writes) for k in (
        "bytes_in", "bytes_out", "records_in", "records_out", "tombstones_in",
        "batches_copied", "batches_rewritten")}



# ---------------------------------------------------------------- explain
def tombstones(log: PartitionLog, limit: int = 100_000) -> list[int]:
    """Offsets of tombstones in the partition (only batches flagged as holding nulls are
    decoded)."""
    from ..format.records import ATTR_VALUE_NULLS

    out: list[int] = []
    for seg in log.all_segments():
        for ref in seg.iter_batches(0, seg.size):
            h = ref.header
            if not h.attributes & ATTR_VALUE_NULLS:
                continue
            body = body_of(ref.buf, ref.start, h)
            offs, _, _, values, _ = decode_columns(body, h, layout(body, h))
            out += [o for o, v in zip(offs, values) if v is None]
            if len(out) >= limit:
                return out[:limit]
    return out


def explain_partition(log: PartitionLog, cfg: TopicConfig, now: int) -> dict[str, Any]:
    """The plan of the next pass plus every tombstone's delete horizon."""
    plan = plan_partition(log, cfg, now)
    state = plan["cleaner"]
    rows = []
    for o in tombstones(log):
        first = first_kept_time(state, o)
        horizon = None if first is None else first + cfg.delete_retention_ms
        rows.append({"offset": o, "first_kept": first, "delete_horizon": horizon,
                     "removable_now": horizon is not None and horizon <= now
                     and o < plan["cleanable_end"]})
    waiting = [r["delete_horizon"] for r in rows
               if r["delete_horizon"] is not None and not r["removable_now"]]
    plan = {k: v for k, v in plan.items() if k not in ("groups", "dir")}
    plan["tombstones"] = {
        "count": len(rows), "removable_now": sum(r["removable_now"] for r in rows),
        "not_yet_kept": sum(r["first_kept"] is None for r in rows),
        "next_horizon": min(waiting) if waiting else None, "offsets": rows[:1000]}
    plan["min_cleanable_dirty_ratio"] = cfg.min_cleanable_dirty_ratio
    plan["min_compaction_lag_ms"] = cfg.min_compaction_lag_ms
    plan["delete_retention_ms"] = cfg.delete_retention_ms
    plan["passes"] = len(state["passes"])
    plan["last_pass"] = state["passes"][-1][1] if state["passes"] else None
    return plan
