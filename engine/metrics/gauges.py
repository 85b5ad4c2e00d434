"""The data dir's gauges, read from its files at each scrape: cheap reads only (offsets,
segment sizes and the tier manifest from the open logs; WAL files by ``stat``, never
scanned; groups' committed offsets; transactional ids' states)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import RivvenError
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog
from ..storage.partitions import peek
from ..wal import inventory
from ..wal.stream import stream_files


def partition_rows(data_dir: str, metas: list[TopicMeta],
                   open_logs: dict[tuple[str, int], PartitionLog]) -> list[dict[str, Any]]:
    """Per partition: log start and end, local segments and bytes, cold segments and bytes
    (those without a cold tier: None). A partition the engine has open is read through its
    log; any other is peeked at and closed again, so a scrape never holds more files open
    than one partition's."""
    out = []
    for meta in metas:
        for p in range(meta.partitions):
            log = open_logs.get((meta.name, p))
            try:
                if log is not None:
                    out.append(_row(log))
                else:
                    with peek(data_dir, meta, p) as looked:
                        out.append(_row(looked))
            except (RivvenError, OSError):
                continue  # (deleted meanwhile, or damaged: `rivven segment verify` says more)
    return out


def _row(log: PartitionLog) -> dict[str, Any]:
    start, end = log.offsets()
    segs = log.all_segments()
    cold = log.tier
    return {"topic": log.topic, "partition": log.partition, "start": start, "end": end,
            "segments": len(segs), "bytes": sum(s.size for s in segs),
            # (only where there is a cold tier: a topic that never tiers has no cold)
            "cold_segments": len(cold) if cold or log.config.remote_storage_enable else None,
            "cold_bytes": sum(e.bytes for e in cold)}


def wal_state(data_dir: str, now_s: float) -> dict[str, Any]:
    """WAL streams live and dead, their bytes on disk, the age of the oldest file."""
    live = dead = size = 0
    oldest: float | None = None
    for d in inventory.all_streams(data_dir):
        if inventory.pid_alive(os.path.basename(d)):
            live += 1
        else:
            dead += 1
        try:
            fs = stream_files(d)
        except OSError:
            continue
        for f in fs:
            try:
                st = os.stat(f)
            except OSError:
                continue  # (deleted by a checkpoint meanwhile)
            size += st.st_size
            oldest = st.st_mtime if oldest is None else min(oldest, st.st_mtime)
        if not fs:
            try:
                t = os.stat(d).st_mtime
                oldest = t if oldest is None else min(oldest, t)
            except OSError:
                pass
    return {"live": live, "dead": dead, "bytes": size,
            "oldest_age_s": max(0.0, now_s - oldest) if oldest is not None else 0.0}


def group_rows(eng: Any) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Per group and partition: committed offset and lag; live members per group."""
    rows: list[dict[str, Any]] = []
    members: dict[str, int] = {}
    for name in eng.groups.names():
        try:
            d = eng.groups.describe(name)
        except (RivvenError, OSError):
            continue
        members[name] = len(d.get("members", []))
        for p in d.get("partitions", []):
            if p.get("current_offset") is None:
                continue
            rows.append({"group": name, "topic": p["topic"], "partition": p["partition"],
                         "committed": p["current_offset"], "lag": p.get("lag")})
    return rows, members


def transaction_state(eng: Any) -> dict[str, Any]:
    """Open transactions (begun, not yet ended) and the oldest one's age."""
    try:
        rows = eng.txn.list_transactions()
    except (RivvenError, OSError):
        rows = []
    ages = [r["age_ms"] for r in rows if r.get("age_ms") is not None]
    return {"open": len(ages), "oldest_age_s": max(ages) / 1000 if ages else 0.0}
