"""Both sources of metrics as one document: ``{name: {"type", "help", "samples"}}``.

A sample is ``{"labels": {...}, "value": v}``, or for a histogram ``{"labels": {...},
"buckets": {"<le>": cumulative count, ..., "+Inf": count}, "count": n, "sum": s}``. Every
metric of engine.counters.names is present; one without labels always has its sample (zero
before anything was counted), one with labels has a sample per series seen.
"""

from __future__ import annotations

import platform
import time
from typing import Any

from .. import clock
from ..counters import gather, slots
from ..counters.names import FAILURES, LAST_DURATION, LAST_SUCCESS, RUN_PARTS, RUNS, SERIES, all_metrics
from ..storage.log import PartitionLog
from . import gauges
from .results import Metrics

RUN_SLOTS = dict(zip((p[0] for p in RUN_PARTS), (RUNS, FAILURES, LAST_SUCCESS, LAST_DURATION)))


def version() -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version("rivven")
    except Exception:  # noqa: BLE001 - (running from a source tree without metadata)
        return "unknown"


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


class Document:
    def __init__(self) -> None:
        self.doc: Metrics = {
            m.name: {"type": m.kind, "help": m.help, "labels": list(m.labels), "samples": []}
            for m in all_metrics()}

    def add(self, name: str, labels: dict[str, Any], value: float) -> None:
        self.doc[name]["samples"].append({"labels": {k: str(v) for k, v in labels.items()},
                                          "value": _num(value)})

    def histogram(self, name: str, labels: dict[str, Any], slots: list[float]) -> None:
        bounds = SERIES[name].buckets
        buckets: dict[str, float | int] = {}
        total = 0.0
        for le, n in zip(bounds, slots):
            total += n
            buckets[repr(float(le))] = _num(total)
        total += slots[len(bounds)]
        buckets["+Inf"] = _num(total)
        self.doc[name]["samples"].append({"labels": {k: str(v) for k, v in labels.items()},
                                          "buckets": buckets, "count": _num(total),
                                          "sum": _num(slots[len(bounds) + 1])})


def collect(eng: Any, open_logs: dict[tuple[str, int], PartitionLog],
            problems: list[str] | None = None) -> Metrics:
    """The metrics of ``eng``'s data dir: every process's series (engine.counters.gather), every
    partition of every topic (through ``open_logs``, those the engine has open), groups,
    WAL, transactions. Damaged files of ``.stats`` met on the way (set aside, never merged)
    are appended to ``problems``, one line each naming the file."""
    t0 = time.monotonic()

    def keep() -> gather.Keep:  # (asked once the gather holds its lock: never stale)
        names, groups = {m.name for m in eng.topics()}, set(eng.groups.names())

        def kept(name: str, labels: tuple[tuple[str, str], ...]) -> bool:
            return all((k != "topic" or v in names) and (k != "group" or v in groups)
                       for k, v in labels)
        return kept

    got = gather.gather(eng.meter.stats_dir, eng.meter, keep, eng.lock_wait)
    if problems is not None:
        problems.extend(got.problems)
    metas = eng.topics()
    topics = {m.name: m.partitions for m in metas}
    doc = Document()
    series: dict[str, dict[tuple, list[float]]] = {}
    for (name, labels), vals in got.series.items():
        series.setdefault(name, {})[labels] = vals
    for name, s in SERIES.items():
        seen = series.get(name, {})
        if not s.labels and not seen and s.kind != "run":
            seen = {(): [0.0] * s.slots}  # (a metric without labels is always there)
        for labels, vals in sorted(seen.items()):
            lab = dict(labels)
            if s.kind == "histogram":
                doc.histogram(name, lab, vals)
            elif s.kind == "run":
                for suffix, _, _ in RUN_PARTS:
                    if suffix.startswith("_last") and not vals[LAST_SUCCESS]:
                        continue  # (never succeeded: no time to tell)
                    doc.add(name + suffix, lab, vals[RUN_SLOTS[suffix]])
            else:
                doc.add(name, lab, vals[0])

    doc.add("rivven_build_info", {"version": version(), "python": platform.python_version()}, 1)
    for t, n in sorted(topics.items()):
        doc.add("rivven_topic_partitions", {"topic": t}, n)
    for row in gauges.partition_rows(eng.path, metas, open_logs):
        tp = {"topic": row["topic"], "partition": row["partition"]}
        doc.add("rivven_log_start_offset", tp, row["start"])
        doc.add("rivven_log_end_offset", tp, row["end"])
        doc.add("rivven_log_segments", tp, row["segments"])
        doc.add("rivven_log_size_bytes", tp, row["bytes"])
        if row["cold_segments"] is not None:
            doc.add("rivven_log_cold_segments", tp, row["cold_segments"])
            doc.add("rivven_log_cold_bytes", tp, row["cold_bytes"])
    rows, members = gauges.group_rows(eng)
    for row in rows:
        gtp = {"group": row["group"], "topic": row["topic"], "partition": row["partition"]}
        doc.add("rivven_group_committed_offset", gtp, row["committed"])
        if row["lag"] is not None:
            doc.add("rivven_group_lag", gtp, row["lag"])
    for g, n in sorted(members.items()):
        doc.add("rivven_group_members", {"group": g}, n)
    wal = gauges.wal_state(eng.path, clock.now_ms() / 1000)
    doc.add("rivven_wal_streams", {"state": "live"}, wal["live"])
    doc.add("rivven_wal_streams", {"state": "dead"}, wal["dead"])
    doc.add("rivven_wal_oldest_stream_age_seconds", {}, wal["oldest_age_s"])
    doc.add("rivven_wal_size_bytes", {}, wal["bytes"])
    txn = gauges.transaction_state(eng)
    doc.add("rivven_transactions_open", {}, txn["open"])
    doc.add("rivven_transaction_oldest_open_age_seconds", {}, txn["oldest_age_s"])
    doc.add("rivven_metrics_processes", {"state": "live"}, got.live)
    doc.add("rivven_metrics_processes", {"state": "dead"}, got.dead)
    doc.add("rivven_metrics_files_set_aside", {}, slots.set_aside_count(eng.meter.stats_dir)
            if eng.meter.stats_dir else 0)
    doc.add("rivven_metrics_gather_duration_seconds", {}, time.monotonic() - t0)
    doc.add("rivven_metrics_up", {}, 1)
    return doc.doc


def failed() -> Metrics:
    """The document of a scrape that could not gather (``rivven_metrics_up`` 0; the error
    is on the server's stderr): every metric present, without samples."""
    doc = Document()
    doc.add("rivven_build_info", {"version": version(), "python": platform.python_version()}, 1)
    doc.add("rivven_metrics_up", {}, 0)
    return doc.doc
