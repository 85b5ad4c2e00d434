"""Retention: which sealed segments go (by time, by size, or below the log start offset).

Kafka's rules: only sealed segments, oldest first, stopping at the first one that is kept; a
segment expires by time when its newest record is older than ``retention.ms``, by size while
the partition would still hold at least ``retention.bytes`` without it. The active segment is
never deleted. Applying moves the log start offset to the first kept segment (persisted in the
partition's checkpoint) and only then deletes the files.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import clock
from ..errors import InvalidArgument, OffsetOutOfRange, RivvenError, plural
from ..segments import filenames
from ..storage.catalog import TopicMeta
from ..storage.config import TopicConfig
from ..storage.log import PartitionLog
from ..tiering.results import ManifestRow
from ..tiering.tier_pass import drop_below
from .results import SegmentDeleted, StartMoved


def _age(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.1f}{unit}"
    return f"{ms}ms"


def plan(log: PartitionLog, cfg: TopicConfig, now_ms: int) -> list[SegmentDeleted]:
    """The segments retention deletes now, oldest first (cold ones first: retention covers
    the whole log), each with ``tier``, ``reason`` and ``detail``."""
    segs = log.all_segments()
    start = log.start_offset()
    colds = log.cold_entries()
    pieces: list[tuple[int, int, int, Any, str, str]] = [
        (e.base_offset, e.next_offset, e.bytes, e.max_timestamp, e.url(filenames.LOG), "cold")
        for e in colds]
    pieces += [(seg.base, segs[i + 1].base, seg.size, seg, seg.path, "local")
               for i, seg in enumerate(segs[:-1])]
    total = sum(s.size for s in segs) + sum(e.bytes for e in colds)
    by_delete = "delete" in cfg.cleanup_policy
    out: list[SegmentDeleted] = []
    for base, nxt, size, ts, where, tier in pieces:
        max_ts = ts if isinstance(ts, int) else log.segment_max_timestamp(ts)
        if nxt <= start:
            reason, detail = "log-start", f"all offsets below the log start offset {start}"
        elif by_delete and cfg.retention_ms >= 0 and max_ts < now_ms - cfg.retention_ms:
            reason = "time"
            detail = (f"newest record is {_age(now_ms - max_ts)} old, retention.ms is "
                      f"{_age(cfg.retention_ms)}" if max_ts >= 0 else "segment holds no records")
        elif by_delete and cfg.retention_bytes >= 0 and total - size >= cfg.retention_bytes:
            reason = "size"
            detail = f"partition holds {plural(total, 'byte')}, retention.bytes is {cfg.retention_bytes}"
        else:
            break
        total -= size
        out.append({"topic": log.topic, "partition": log.partition, "segment": where,
                    "tier": tier, "base_offset": base, "next_offset": nxt, "bytes": size,
                    "max_timestamp": max_ts, "reason": reason, "detail": detail})
    return out


def retain(log: PartitionLog, meta: TopicMeta | None = None) -> None:
    """Retention as an engine runs it by itself: when a writer opens a partition (``meta``:
    its topic's catalog entry), and after its checkpoints. Errors are left to the next time
    (or ``rivven retention apply``)."""
    with contextlib.suppress(RivvenError, OSError):
        apply(log, meta.typed if meta is not None else log.config, clock.now_ms())


def apply(log: PartitionLog, cfg: TopicConfig, now_ms: int, dry_run: bool = False
          ) -> list[SegmentDeleted]:
    """Plan, then (unless ``dry_run``) move the log start past the planned segments and delete
    them (local files, then cold entries and objects). Each row gets the partition's
    ``new_log_start_offset``."""
    rows = plan(log, cfg, now_ms)
    new_start = max(rows[-1]["next_offset"], log.start_offset()) if rows else log.start_offset()
    if not dry_run:
        if rows:
            _, new_start, _ = log.advance_start(rows[-1]["next_offset"])
        if log.tier and log.tier[0].next_offset <= new_start:
            drop_below(log, new_start)
    for r in rows:
        r["new_log_start_offset"] = new_start
    return rows


def delete_records(logs: dict[int, PartitionLog], before: dict[int, int], dry_run: bool = False
                   ) -> list[StartMoved]:
    """Move each partition's log start offset forward to ``before[p]`` (never back; offsets
    above the log end are refused, before anything changes), deleting whole segments below it,
    cold ones too."""
    plans = []
    for p, off in sorted(before.items()):
        log = logs[p]
        if not isinstance(off, int) or off < 0:
            raise InvalidArgument(f"offset must be a non-negative integer, not {off!r}")
        start, end = log.offsets()
        if log.tier_error is not None:  # (the start may lie in the cold part: never guess)
            raise log.tier_error
        if off > end:
            raise OffsetOutOfRange(f"cannot delete records of {log.topic}-{p} before {off}: the "
                                   f"log ends at {end} (valid: {start}..{end})", start, end)
        plans.append((log, off, start))
    return [delete_before(log, off, start, dry_run) for log, off, start in plans]


def delete_before(log: PartitionLog, offset: int, prior: int, dry_run: bool = False
                  ) -> StartMoved:
    """Move the log start forward to ``offset`` (``prior`` is the start now), deleting whole
    segments below it, cold ones too."""
    if dry_run:
        return {"topic": log.topic, "partition": log.partition, "prior_log_start_offset": prior,
                "new_log_start_offset": max(prior, offset), "deleted_segments": []}
    prior, new, local = log.advance_start(offset)
    cold_gone = drop_below(log, new) if log.tier and log.tier[0].next_offset <= new else []
    gone: list[dict[str, Any] | ManifestRow] = [*cold_gone, *local]
    return {"topic": log.topic, "partition": log.partition, "prior_log_start_offset": prior,
            "new_log_start_offset": new, "deleted_segments": gone}
