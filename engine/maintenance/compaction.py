"""Log compaction (Kafka's log cleaner is the model): plan, swap, the in-process pass, explain.

A pass cleans a partition's *cleanable range*: its sealed segments from the start up to the
first one holding a record younger than ``min.compaction.lag.ms`` (the active segment never).
In that range the record with the highest offset of each key survives, with its offset,
timestamp and headers. A tombstone (null value) survives too until ``delete.retention.ms``
has passed since the first pass that kept it (its *delete horizon*); the partition's
``.cleaner`` file remembers ``[end offset, time]`` of every pass for that.

Source segments are cleaned in groups of consecutive segments holding at most
``segment.bytes`` (so the small survivors of earlier passes merge), each group into one new
segment named after its first source segment (engine.maintenance.cleaner). Transactions
follow Kafka's cleaner: nothing at or past the last stable offset is cleanable, aborted
records go, a marker stays until its delete horizon (as a tombstone's) and while it is its
producer's last batch; the plan carries what the cleaner needs for that (``aborted``,
``aborted_txns``, ``markers_kept``: ``cleaner.TxnRules``). The cleaned segments go in with
one call, ``PartitionLog.replace_segments``, whose swap is crash-safe and
finished by whoever finds it half-done (engine.segments.swap); the new ``.cleaner`` state is
written in the same swap.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from .. import clock
from ..format.decode import body_of, decode_columns, layout
from ..format.records import ATTR_VALUE_NULLS
from ..fs import guard
from ..segments.damage import refuse_damage
from ..segments.swap import SwapRefused
from ..storage import datadir
from ..txn import isolation
from ..txn.hook import producers_of
from ..txn.isolation import Aborted
from .cleaner import (
    CompactionConflict,
    CompactionError,  # noqa: F401 (re-exported: engine.spark.submit raises it)
    TxnRules,
    scan_keys,
    survivor_offsets,
    write_group,
)
from .results import CleanerState, CompactionPlan, CompactionResult, Explanation

if TYPE_CHECKING:
    from ..storage.config import TopicConfig
    from ..storage.log import PartitionLog

CLEANER = ".cleaner"
MAX_PASSES = 1000  # pass history kept in .cleaner (older passes only ever lower the horizon)


# ---------------------------------------------------------------- cleaner state
def read_cleaner(pdir: str) -> CleanerState:
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


def after_pass(state: CleanerState, end: int, now: int, min_tombstone: int | None
               ) -> CleanerState:
    passes = [*state["passes"], [end, now]][-MAX_PASSES:]
    return {"cleaned_end": max(end, state["cleaned_end"]), "passes": passes,
            "min_tombstone": min_tombstone}


def tombstone_bound(state: CleanerState, delete_retention_ms: int, now: int) -> int:
    """Tombstones below this offset were first kept by a pass at least ``delete.retention.ms``
    ago, so this pass may remove them (passes are in time order, their ends never shrink)."""
    bound = 0
    for end, t in state["passes"]:
        if t + delete_retention_ms <= now:
            bound = max(bound, end)
    return bound


def first_kept_time(state: CleanerState, offset: int) -> int | None:
    """When the first pass that covered ``offset`` ran (None: no pass has yet)."""
    for end, t in state["passes"]:
        if offset < end:
            return t
    return None


# ---------------------------------------------------------------- plan
def plan_partition(log: PartitionLog, cfg: TopicConfig, now: int, force: bool = False
                   ) -> CompactionPlan:
    """What a pass over this partition would clean, and why the rest is left alone."""
    segs = log.all_segments(recheck=True)  # (as the files are: another pass may have swapped)
    start = log.start_offset()
    state = read_cleaner(log.dir)
    sealed = segs[:-1]
    # never past the last stable offset: an open transaction may still abort
    lso, aborted = isolation.view(log, start)
    cleanable: list[dict[str, Any]] = []
    held_by: dict[str, int] | None = None
    held_by_txn: dict[str, int] | None = None
    for i, seg in enumerate(sealed):
        max_ts = log.segment_max_timestamp(seg)
        if cfg.min_compaction_lag_ms > 0 and max_ts > now - cfg.min_compaction_lag_ms:
            held_by = {"base_offset": seg.base, "max_timestamp": max_ts}
            break
        if segs[i + 1].base > lso:
            held_by_txn = {"base_offset": seg.base, "last_stable_offset": lso}
            break
        st = os.fstat(seg.fd)
        cleanable.append({"base_offset": seg.base, "next_offset": segs[i + 1].base,
                          "bytes": seg.size, "max_timestamp": max_ts, "path": seg.path,
                          # which file: a rewritten segment can keep its size exactly
                          "ino": st.st_ino, "mtime_ns": st.st_mtime_ns})
    end = cleanable[-1]["next_offset"] if cleanable else (sealed[0].base if sealed else
                                                          segs[-1].base)
    aborted_txns, markers_kept = _txn_state(log, start, end)
    first_dirty = max(state["cleaned_end"], start)
    clean = sum(s["bytes"] for s in cleanable if s["next_offset"] <= first_dirty)
    dirty = sum(s["bytes"] for s in cleanable) - clean
    ratio = dirty / (clean + dirty) if clean + dirty else 0.0
    # a tombstone or marker the last pass kept is past its horizon: clean whatever the ratio
    # (Kafka's cleaner too, KIP-534)
    due = state["min_tombstone"] is not None and \
        state["min_tombstone"] < tombstone_bound(state, cfg.delete_retention_ms, now)
    if not cfg.compacted:
        skip = f"cleanup.policy is {cfg.cleanup_policy!r}, not compact"
    elif not cleanable:
        skip = "no sealed segment is cleanable yet"
    elif dirty == 0 and not force and not due:
        skip = ("nothing written since the last pass and no tombstone or transaction marker "
                "past its horizon")
    elif ratio < cfg.min_cleanable_dirty_ratio and not force and not due:
        skip = (f"dirty ratio {ratio:.2f} is below min.cleanable.dirty.ratio "
                f"{cfg.min_cleanable_dirty_ratio}")
    else:
        skip = None
    return {"topic": log.topic, "partition": log.partition, "dir": log.dir,
            "log_start_offset": start, "cleanable_end": end, "first_dirty": first_dirty,
            "active_base": segs[-1].base, "end_offset": log.end_offset(),
            "held_by_lag": held_by, "held_by_transaction": held_by_txn,
            "aborted": aborted.ranges(), "aborted_txns": aborted_txns,
            "markers_kept": markers_kept, "clean_bytes": clean, "dirty_bytes": dirty,
            "dirty_ratio": ratio, "segments": cleanable,
            "groups": group_segments(cleanable, cfg.segment_bytes),
            "tombstone_bound": tombstone_bound(state, cfg.delete_retention_ms, now),
            "cleaner": state, "skip": skip}


def _txn_state(log: PartitionLog, start: int, end: int) -> tuple[list[list[int]], list[int]]:
    """The aborted transactions whose ABORT marker lies in ``[start, end)`` (``[producer id,
    first, last, lso]``: their ``.txnindex`` entries and those not indexed yet), and the last
    batch of each producer the partition's state knows that lies there (a marker there is
    kept: Kafka's rule, its epoch fences the producer's zombies)."""
    producers = producers_of(log)
    recent = [] if producers is None else producers.stable()[1]
    found: dict[int, list[int]] = {}
    # (the cleaned range is local: cold segments' entries lie below it, never downloaded)
    for e in [*log.aborted_txns(max(start, log.local_start())), *recent]:
        if start <= e.last_offset < end:  # (later ones: markers this pass does not touch)
            found[e.last_offset] = [e.producer_id, e.first_offset, e.last_offset,
                                    e.last_stable_offset]
    last = [] if producers is None else sorted(
        {e.last_offset for _, e in producers.state().entries() if start <= e.last_offset < end})
    return [found[o] for o in sorted(found)], last


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


# ---------------------------------------------------------------- swap
def swap(log: PartitionLog, plan: CompactionPlan, staged_dir: str, now: int,
         min_tombstone: int | None = None) -> CompactionResult:
    """Swap the staged segments of ``plan`` in for their sources (PartitionLog.replace_segments).

    Refused (CompactionConflict, the log left alone) if a source segment changed since the plan.
    """
    new = [g[0]["base_offset"] for g in plan["groups"]]
    replaced = [s["base_offset"] for g in plan["groups"] for s in g]
    # which file: a rewritten segment can keep its size exactly
    expect: dict[int, dict[str, int]] = {
        s["base_offset"]: {k: s[k] for k in ("bytes", "ino", "mtime_ns") if k in s}
        for g in plan["groups"] for s in g}
    cleaner = after_pass(plan["cleaner"], plan["cleanable_end"], now, min_tombstone)
    try:
        log.replace_segments(install=new, staged_dir=staged_dir, remove=replaced, expect=expect,
                             side_files={CLEANER: cleaner})
    except SwapRefused as e:
        raise CompactionConflict(str(e)) from None
    return {"segments_before": len(replaced), "segments_after": len(new)}


# ---------------------------------------------------------------- in process
def compact_partition(log: PartitionLog, cfg: TopicConfig, staging: str, now: int | None = None,
                      force: bool = False) -> CompactionResult:
    """One pass without Spark (the reference the Spark job is measured against)."""
    now = clock.now_ms() if now is None else now
    plan = plan_partition(log, cfg, now, force)
    if plan["skip"]:
        return {"plan": plan, "skipped": plan["skip"]}
    seal = log.seal_fn()  # (before any work: a missing key stops the pass here)
    keep, stats = survivor_offsets(scan_keys(plan["segments"],
                                             Aborted.from_ranges(plan["aborted"]), log.opener),
                                   plan["tombstone_bound"],
                                   f" of {log.topic}-{log.partition}")
    # (a bounded name: a topic's name may have 249 characters, a file name at most 255 bytes)
    out_dir = os.path.join(staging, f"{log.topic[:40]}-{log.topic_id.hex()[:12]}-{log.partition}")
    rules = TxnRules.of_plan(plan)
    writes = [write_group(g, lambda offs: [o in keep for o in offs], out_dir, log.opener, seal,
                          rules) for g in plan["groups"]]
    swapped = swap(log, plan, out_dir, now, min_tombstone(writes))
    guard.remove_tree(staging, out_dir)
    return {"plan": plan, "skipped": None, "keys": stats["keys"],
            "tombstones_kept": stats["tombstones_kept"], **summarize(writes), **swapped}


def compact_partitions(data_dir: str, logs: list[PartitionLog], force: bool = False
                       ) -> list[CompactionResult]:
    """One pass over each of ``logs`` in this process, staged in ``DATA/.compaction``."""
    with datadir.staging(data_dir, "local") as staging:  # (a killed pass's: cleared later)
        return [compact_partition(log, log.config, staging, force=force) for log in logs]


def min_tombstone(writes: list[dict[str, Any]]) -> int | None:
    found = [w["min_tombstone"] for w in writes if w.get("min_tombstone") is not None]
    return min(found) if found else None


def summarize(writes: list[dict[str, Any]]) -> CompactionResult:
    def total(k: str) -> int:
        return sum(w[k] for w in writes)

    return {"bytes_in": total("bytes_in"), "bytes_out": total("bytes_out"),
            "records_in": total("records_in"), "records_out": total("records_out"),
            "tombstones_in": total("tombstones_in"), "batches_copied": total("batches_copied"),
            "batches_rewritten": total("batches_rewritten"),
            "markers_in": sum(w.get("markers_in", 0) for w in writes),
            "markers_kept": sum(w.get("markers_kept", 0) for w in writes)}


# ---------------------------------------------------------------- explain
def tombstones(log: PartitionLog, limit: int = 100_000) -> list[int]:
    """Offsets of tombstones in the partition (only batches flagged as holding nulls are
    decoded)."""
    out: list[int] = []
    for seg in log.all_segments():
        for ref in seg.iter_batches(0, seg.size, damaged=refuse_damage(seg.path, "compaction")):
            h = ref.header
            if not h.attributes & ATTR_VALUE_NULLS:
                continue
            body = body_of(ref.buf, ref.start, h, seg.where(ref.position), log.opener)
            offs, _, _, values, _ = decode_columns(body, h, layout(body, h))
            out += [o for o, v in zip(offs, values) if v is None]
            if len(out) >= limit:
                return out[:limit]
    return out


def markers(log: PartitionLog, limit: int = 1_000_000) -> list[int]:
    """Offsets of the transaction markers in the partition's local segments (headers only)."""
    out: list[int] = []
    for seg in log.all_segments():
        out += [ref.header.base_offset for ref in seg.iter_batches(0, seg.size)
                if ref.header.is_control]
        if len(out) >= limit:
            return out[:limit]
    return out


def explain_partition(log: PartitionLog, cfg: TopicConfig, now: int) -> Explanation:
    """The plan of the next pass plus every tombstone's delete horizon, and what happens to
    the transaction markers."""
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
    out: Explanation = {**plan}
    out.pop("groups", None)
    out.pop("dir", None)
    out["tombstones"] = {
        "count": len(rows), "removable_now": sum(r["removable_now"] for r in rows),
        "not_yet_kept": sum(r["first_kept"] is None for r in rows),
        "next_horizon": min(waiting) if waiting else None, "offsets": rows[:1000]}
    kept = set(plan["markers_kept"])
    found = markers(log)
    out["markers"] = {
        "count": len(found),
        "removable_now": sum(1 for o in found if o < min(plan["tombstone_bound"],
                                                         plan["cleanable_end"]) and o not in kept),
        "kept_as_last": sum(1 for o in found if o in kept)}
    out["min_cleanable_dirty_ratio"] = cfg.min_cleanable_dirty_ratio
    out["min_compaction_lag_ms"] = cfg.min_compaction_lag_ms
    out["delete_retention_ms"] = cfg.delete_retention_ms
    out["passes"] = len(state["passes"])
    out["last_pass"] = state["passes"][-1][1] if state["passes"] else None
    return out
