"""What the tiers hold: per-partition status, cold copies checked against the manifest, and
the hot cache figures every live writer publishes.

Hot cache figures live in each process's memory; at every checkpoint a writer publishes its
own to ``.stats/hot-<pid>.json`` (atomically), and a status gathers its own plus those of
live processes (a dead process's file is removed by whoever finds it).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from .. import clock
from ..errors import ColdObjectError, RivvenError, plural
from ..fs import guard
from ..progress import Progress, counter
from ..segments import tier_manifest
from ..segments.tier_manifest import ColdSegment
from ..storage.catalog import home_of
from ..storage.log import PartitionLog
from . import cold
from .cache import ColdCache, cache_root, copy_problem, not_private, trusted_group
from .results import ColdCheck, ColdReport, TierStatus

STATS_DIR = ".stats"


def check_objects(entries: Iterable[ColdSegment],
                  advance: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Every cold object of ``entries`` read back whole against its manifest entry (size and
    CRC32C); rows of findings naming the object."""
    findings = []
    for e in entries:
        for suffix in e.suffixes():
            url = e.url(suffix)
            want = e.expected(suffix)
            try:
                got = cold.checksum(url)
            except ColdObjectError as err:
                findings.append({"object": url, "base_offset": e.base_offset,
                                 "problem": str(err)})
                continue
            finally:
                if advance is not None:
                    advance(want[0])
            if got != want:
                findings.append({"object": url, "base_offset": e.base_offset, "problem": (
                    f"cold object {url} holds {plural(got[0], 'byte')} with CRC32C {got[1]:#010x}; the "
                    f"manifest records {plural(want[0], 'byte')} with {want[1]:#010x}")})
    return findings


def verify_cold(log: PartitionLog) -> list[dict[str, Any]]:
    """check_objects over the partition's manifest, plus offsets neither cold nor local."""
    entries = tier_manifest.load(log.dir, log.tier_home())
    findings = check_objects(entries)
    local_first = log.all_segments()[0].base
    if entries and entries[-1].next_offset < local_first and log.start_offset() < local_first:
        findings.append({"object": None, "base_offset": entries[-1].next_offset, "problem": (
            f"offsets {entries[-1].next_offset}..{local_first - 1} of {log.topic}-"
            f"{log.partition} are neither in the cold store nor local")})
    return findings


def verify_partition(log: PartitionLog) -> ColdCheck:
    """One partition's cold copies read back and checked: objects, bytes, findings."""
    entries = log.cold_entries() if log.tier or log.tier_error else []  # (raises on damage)
    return {"topic": log.topic, "partition": log.partition, "segments": len(log.tier),
            "bytes": verified_bytes(log),
            "findings": verify_cold(log) if entries or log.tier else []}


def verified_bytes(log: PartitionLog) -> int:
    return sum(e.bytes + e.index_bytes + e.timeindex_bytes + e.txnindex_bytes for e in log.tier)




def check_manifests(dirs: list[str], progress: Progress | None = None) -> ColdReport:
    """The cold copies of the partitions in ``dirs`` against their tier manifests (a damaged
    manifest is a finding): segments, objects, bytes and findings. ``progress(what, total
    bytes, bytes done)`` follows the reads."""
    loaded = []
    findings: list[dict[str, Any]] = []
    for d in dirs:
        try:
            loaded.append(tier_manifest.load(d, home_of(d)))
        except RivvenError as e:  # (damaged, or naming objects outside the partition)
            findings.append({"object": tier_manifest.path(d), "base_offset": None,
                             "problem": str(e)})
    total = sum(e.bytes + e.index_bytes + e.timeindex_bytes + e.txnindex_bytes for es in loaded for e in es)
    advance = counter(progress, "verifying cold copies", total)
    for entries in loaded:
        findings += check_objects(entries, advance)
    cached = 0
    if dirs:
        data_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(dirs[0]))))
        root = cache_root(data_dir)
        cached, more = check_cache(root, [e for es in loaded for e in es],
                                   trusted_group(data_dir, root))
        findings += more
    return {"segments": sum(len(es) for es in loaded),
            "objects": sum(len(e.suffixes()) for es in loaded for e in es), "bytes": total,
            "cached": cached, "findings": findings}


def check_cache(root: str, entries: list[ColdSegment], group: int | None = None
                ) -> tuple[int, list[dict[str, Any]]]:
    """The local cache a reader of this process would use: is it private, and does each
    cached copy of ``entries`` match the manifest? (copies checked, findings). Changes
    nothing: a reader removes a copy that differs and downloads it again."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return 0, []
    problem = not_private(st, group)
    if problem is not None:
        return 0, [{"object": root, "base_offset": None, "problem": (
            f"the cold cache {root} {problem}: readers do not use it, another user could have "
            f"put data there; remove it (rm -r '{root}')")}]
    cache = ColdCache(root, 0)
    checked = 0
    findings = []
    for e in entries:
        try:
            problem = copy_problem(e, cache.folder(e))
        except OSError:
            continue  # not cached (or evicted meanwhile)
        checked += 1
        if problem is not None:
            findings.append({"object": cache.folder(e), "base_offset": e.base_offset,
                             "problem": f"cached copy of cold object {e.object}: {problem}; "
                                        "the next read downloads it again"})
    return checked, findings


def status(log: PartitionLog, hot: dict[str, int]) -> TierStatus:
    """Where a partition's offsets live: cold range and bytes, local range, hot cache."""
    colds = log.cold_entries()
    segs = log.all_segments()
    start, end = log.offsets()
    lookups = hot.get("hits", 0) + hot.get("misses", 0)
    return {
        "topic": log.topic, "partition": log.partition,
        "log_start_offset": start, "end_offset": end,
        "cold_segments": len(colds),
        "cold_start_offset": colds[0].base_offset if colds else None,
        "cold_end_offset": colds[-1].next_offset if colds else None,
        "cold_bytes": sum(e.bytes for e in colds),
        "local_segments": len(segs),
        "local_start_offset": log.local_start(),
        "local_end_offset": end,
        "local_bytes": sum(s.size for s in segs),
        "hot_bytes": hot.get("bytes", 0),
        "hot_hits": hot.get("hits", 0),
        "hot_misses": hot.get("misses", 0),
        "hot_hit_rate": hot.get("hits", 0) / lookups if lookups else None,
        "last_upload_ms": max((e.uploaded_ms for e in log.tier), default=None),
    }


# ---------------------------------------------------------------- hot cache figures
class HotStats:
    """This process's hot cache figures: its own (``own``), published for other processes'
    ``tier status`` after each checkpoint (``publish``; the gauge ``rivven_hot_cache_bytes``
    set), withdrawn at close (``unpublish``). ``logs()`` gives the engine's open logs."""

    def __init__(self, data_dir: str, hot: Any, logs: Callable[[], list[PartitionLog]],
                 counters: Any, writable: bool) -> None:
        self.data_dir = data_dir
        self.hot = hot
        self.logs = logs
        self.counters = counters
        self.writable = writable

    def own(self) -> dict[str, dict[str, int]]:
        return own_hot_stats(self.hot, self.logs())

    def publish(self) -> None:
        if self.hot is not None and self.writable:
            own = self.own()
            publish_hot_stats(self.data_dir, own)
            self.counters.get("rivven_hot_cache_bytes").set(sum(v["bytes"] for v in own.values()))

    def unpublish(self) -> None:
        if self.hot is not None and self.writable:
            unpublish_hot_stats(self.data_dir)


def own_hot_stats(hot: Any, logs: list[PartitionLog]) -> dict[str, dict[str, int]]:
    """This process's hot cache figures by "topic/partition" (none without a hot cache)."""
    if hot is None:
        return {}
    return {f"{log.topic}/{log.partition}": hot.partition_stats(log) for log in logs}


def publish_hot_stats(data_dir: str, parts: dict[str, dict[str, int]]) -> None:
    """This process's hot cache figures by "topic/partition", for other processes' status."""
    d = os.path.join(data_dir, STATS_DIR)
    try:
        guard.make_dir(d)
        tmp = os.path.join(d, f".hot-{os.getpid()}.tmp")
        with open(tmp, "w", opener=guard.opener) as f:
            json.dump({"pid": os.getpid(), "at_ms": clock.now_ms(), "partitions": parts}, f)
        os.replace(tmp, os.path.join(d, f"hot-{os.getpid()}.json"))
    except (OSError, guard.UnexpectedLink):
        pass  # figures only


def unpublish_hot_stats(data_dir: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(data_dir, STATS_DIR, f"hot-{os.getpid()}.json"))


def gather_hot_stats(data_dir: str, own: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Hot cache figures by "topic/partition": ``own`` (this process's), plus those other live
    processes published at their last checkpoint."""
    out: dict[str, dict[str, int]] = {}

    def add(key: str, st: dict[str, int]) -> None:
        acc = out.setdefault(key, {"bytes": 0, "hits": 0, "misses": 0})
        for k in acc:
            acc[k] += int(st.get(k, 0))

    for key, st in own.items():
        add(key, st)
    d = os.path.join(data_dir, STATS_DIR)
    for f in os.listdir(d) if os.path.isdir(d) else []:
        if not f.startswith("hot-") or f == f"hot-{os.getpid()}.json":
            continue
        path = os.path.join(d, f)
        try:
            pid = int(f[4:-5])
            os.kill(pid, 0)
            with open(path) as fh:
                doc = json.load(fh)
            for key, st in doc["partitions"].items():
                add(key, st)
        except ProcessLookupError:  # that process is gone, and its cache with it
            with contextlib.suppress(OSError, guard.UnexpectedLink):
                guard.remove_tree(data_dir, path)  # (never through a linked .stats)
        except (ValueError, OSError, KeyError, TypeError, AttributeError):
            pass
    return out
