"""Rates between two metrics documents (``rivven top``): per topic, records produced and
read per second, bytes in, group lag and log size; for the whole data dir, WAL fsync
latency quantiles and the mean group commit over the interval."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .results import Rates, TopicRates


def _by_topic(doc: dict[str, Any], name: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for s in doc.get(name, {}).get("samples", []):
        t = s["labels"].get("topic")
        if t is not None:
            out[t] += s["value"]
    return out


def _histogram(doc: dict[str, Any], name: str) -> tuple[list[tuple[float, float]], float, float]:
    """(cumulative buckets [(le, count)], count, sum) of a label-less histogram."""
    samples = doc.get(name, {}).get("samples", [])
    if not samples:
        return [], 0.0, 0.0
    s = samples[0]
    buckets = [(float(le), float(n)) for le, n in s["buckets"].items()]
    return buckets, float(s["count"]), float(s["sum"])


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's ``histogram_quantile`` over cumulative ``buckets`` (linear inside the
    bucket the rank falls in); None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lo_bound, lo_count = 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return lo_bound  # (past the last bound: the last bound is all we know)
            if n == lo_count:
                return le
            return lo_bound + (le - lo_bound) * (rank - lo_count) / (n - lo_count)
        lo_bound, lo_count = le, n
    return lo_bound


def rates(before: dict[str, Any], after: dict[str, Any], seconds: float) -> Rates:
    """What happened between two documents ``seconds`` apart (a counter that went down, a
    reset, counts from 0)."""
    dt = max(seconds, 1e-9)

    def per_s(name: str) -> dict[str, float]:
        a, b = _by_topic(before, name), _by_topic(after, name)
        return {t: (v - a.get(t, 0.0) if v >= a.get(t, 0.0) else v) / dt for t, v in b.items()}

    produced = per_s("rivven_records_appended_total")
    read = per_s("rivven_records_read_total")
    bytes_in = per_s("rivven_bytes_appended_total")
    lag = _by_topic(after, "rivven_group_lag")
    size = _by_topic(after, "rivven_log_size_bytes")
    cold = _by_topic(after, "rivven_log_cold_bytes")
    topics = sorted({s["labels"]["topic"]
                     for s in after.get("rivven_topic_partitions", {}).get("samples", [])})
    rows: list[TopicRates] = [
        {"topic": t, "produce_per_s": produced.get(t, 0.0), "read_per_s": read.get(t, 0.0),
         "bytes_in_per_s": bytes_in.get(t, 0.0), "lag": int(lag.get(t, 0)),
         "local_bytes": int(size.get(t, 0)), "cold_bytes": int(cold.get(t, 0))}
        for t in topics]
    b0, n0, s0 = _histogram(before, "rivven_wal_fsync_duration_seconds")
    b1, n1, s1 = _histogram(after, "rivven_wal_fsync_duration_seconds")
    if n1 < n0:  # (a reset)
        b0, n0, s0 = [], 0.0, 0.0
    prior = dict(b0)
    delta = [(le, n - prior.get(le, 0.0)) for le, n in b1]
    _, g0, gs0 = _histogram(before, "rivven_wal_group_commit_records")
    _, g1, gs1 = _histogram(after, "rivven_wal_group_commit_records")
    fsyncs = n1 - n0
    groups = g1 - g0 if g1 >= g0 else g1
    group_records = gs1 - gs0 if g1 >= g0 else gs1
    return {"seconds": seconds, "topics": rows,
            "fsyncs_per_s": fsyncs / dt,
            "fsync_p50_s": quantile(0.5, delta) if fsyncs > 0 else None,
            "fsync_p99_s": quantile(0.99, delta) if fsyncs > 0 else None,
            "fsync_mean_s": (s1 - s0) / fsyncs if fsyncs > 0 else None,
            "group_commit_records": group_records / groups if groups > 0 else None}
