"""What ``Engine.metrics()`` and ``rates`` return: typed (dicts at run time: ``rivven metrics
--json`` and ``rivven top --json`` print them as they are, so a key here is a key of the
JSON)."""

from __future__ import annotations

from typing import TypedDict


class Sample(TypedDict, total=False):
    """One series of a metric: ``labels`` and ``value``; a histogram's has ``buckets``
    (``"<le>"`` -> cumulative count, ``"+Inf"`` last), ``count`` and ``sum`` instead."""

    labels: dict[str, str]
    value: float | int
    buckets: dict[str, float | int]
    count: float | int
    sum: float | int


class MetricFamily(TypedDict):
    type: str  # counter, gauge, histogram
    help: str
    labels: list[str]  # the label names
    samples: list[Sample]


Metrics = dict[str, MetricFamily]  # by metric name: every metric of engine.counters.names


class TopicRates(TypedDict):
    topic: str
    produce_per_s: float
    read_per_s: float
    bytes_in_per_s: float
    lag: int
    local_bytes: int
    cold_bytes: int


class Rates(TypedDict):
    """What happened between two metrics documents (``rivven top``)."""

    seconds: float
    topics: list[TopicRates]
    fsyncs_per_s: float
    fsync_p50_s: float | None
    fsync_p99_s: float | None
    fsync_mean_s: float | None
    group_commit_records: float | None
