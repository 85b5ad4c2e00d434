"""Every metric rivven exposes, in one table (docs/METRICS.md is checked against it).

Two sources: **process** series, counted by each live process in its own file and summed
over every process that ever wrote to the data dir (engine.counters.gather), and **data dir**
gauges, read from the files at each scrape (engine.metrics.gauges). Names follow
Prometheus's conventions: the ``rivven_`` prefix, base units, ``_total`` on counters.
"""

from __future__ import annotations

from typing import NamedTuple

FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
GROUP_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                 100000)
RECOVERY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# a Kafka-protocol request: sub-millisecond (Metadata) to a long-polling Fetch's max.wait.ms
# or a JoinGroup's rebalance
KAFKA_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                 5.0, 10.0, 30.0, 60.0)

# the slots of a "run" series (a job that runs now and then): how many, how many failed, when
# the last success ended and how long it took; exposed as four metrics (see RUN_PARTS)
RUNS, FAILURES, LAST_SUCCESS, LAST_DURATION = range(4)
RUN_PARTS = (("_runs_total", "counter", "{what} runs, successful or not"),
             ("_failures_total", "counter", "{what} runs that failed"),
             ("_last_success_timestamp_seconds", "gauge",
              "when the last successful {what} run ended (Unix time)"),
             ("_last_duration_seconds", "gauge", "how long the last successful {what} run took"))


class Series(NamedTuple):
    """What a process counts: its kind, labels and (a histogram) bucket bounds."""

    kind: str  # counter | histogram | gauge | run
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()

    @property
    def slots(self) -> int:
        if self.kind == "histogram":
            return len(self.buckets) + 2  # one per bound, +Inf, the sum
        return 4 if self.kind == "run" else 1


TP = ("topic", "partition")
SERIES: dict[str, Series] = {
    "rivven_records_appended_total": Series(
        "counter", TP, "records appended and acknowledged (durable, in their segment)"),
    "rivven_bytes_appended_total": Series(
        "counter", TP, "bytes of the record batches appended, as stored"),
    "rivven_produce_requests_total": Series(
        "counter", ("topic",), "produce calls (one call may append to several partitions)"),
    "rivven_produce_errors_total": Series(
        "counter", ("topic",), "produce calls that raised an error"),
    "rivven_records_read_total": Series("counter", TP, "records returned to readers"),
    "rivven_bytes_read_total": Series("counter", TP, "bytes of the record batches read"),
    "rivven_segment_rolls_total": Series("counter", TP, "segments sealed and a new one started"),
    "rivven_crc_errors_total": Series(
        "counter", TP, "record batches a reader found damaged (CRC or authentication tag)"),
    "rivven_wal_fsync_duration_seconds": Series(
        "histogram", (), "time of each WAL fdatasync (one serves a whole group commit)",
        FSYNC_BUCKETS),
    "rivven_wal_group_commit_records": Series(
        "histogram", (), "records made durable by one WAL fdatasync (group commit size)",
        GROUP_BUCKETS),
    "rivven_wal_bytes_written_total": Series("counter", (), "bytes written to WAL files"),
    "rivven_checkpoints_total": Series(
        "counter", (), "checkpoints (partitions fsynced, recovery points written, WAL "
        "files deleted)"),
    "rivven_recovery_duration_seconds": Series(
        "histogram", (), "time to replay the WAL of crashed writers when an engine opens",
        RECOVERY_BUCKETS),
    "rivven_recovery_bytes_cut_total": Series(
        "counter", (), "bytes of torn tails cut from WAL files and segments by recovery"),
    "rivven_recovery_batches_replayed_total": Series(
        "counter", (), "record batches a recovery wrote back into their segments"),
    "rivven_group_commits_total": Series(
        "counter", ("group",), "offset commits of consumer groups"),
    "rivven_group_rebalances_total": Series(
        "counter", ("group",), "times a group member's assignment changed"),
    "rivven_hot_cache_hits_total": Series(
        "counter", ("topic",), "reads served from the in-memory hot tier"),
    "rivven_hot_cache_misses_total": Series(
        "counter", ("topic",), "reads of the active segment the hot tier could not serve"),
    "rivven_hot_cache_bytes": Series(
        "gauge", (), "bytes held by the hot tier of live processes"),
    "rivven_cold_cache_hits_total": Series(
        "counter", (), "cold segment reads served by the local cold cache"),
    "rivven_cold_cache_misses_total": Series(
        "counter", (), "cold segment reads that had to download the segment"),
    "rivven_cold_cache_download_bytes_total": Series(
        "counter", (), "bytes downloaded from the cold store into the cold cache"),
    "rivven_tier_uploads_total": Series(
        "counter", ("topic",), "segments copied to the cold store and committed"),
    "rivven_tier_upload_bytes_total": Series(
        "counter", ("topic",), "bytes of the segments copied to the cold store"),
    "rivven_tier": Series("run", (), "tiering pass"),
    "rivven_compaction": Series("run", ("topic",), "compaction"),
    "rivven_maintenance_passes_total": Series(
        "counter", ("kind", "outcome"), "background maintenance passes over one partition "
        "(rivven serve, rivven maintain) by kind (retention, compaction, tier) and outcome "
        "(ok; failed: backs off; busy: another pass held the partition, tried next round)"),
    "rivven_maintenance_reclaimed_bytes_total": Series(
        "counter", ("kind",), "bytes background maintenance freed: segments retention deleted "
        "(local and cold), compaction's bytes in less bytes out, local copies of the segments "
        "tiering moved to the cold store"),
    "rivven_maintenance_backoff_partitions": Series(
        "gauge", ("kind",), "partitions whose background maintenance of this kind is backing "
        "off after failed passes (summed over live processes)"),
    "rivven_maintenance_round": Series(
        "run", ("kind",), "background maintenance round"),
    "rivven_transactions_committed_total": Series(
        "counter", (), "transactions committed"),
    "rivven_transactions_aborted_total": Series(
        "counter", (), "transactions aborted (by the producer, a timeout or a recovery)"),
    # rivven serve (engine/kafka/meters.py): counted once per request or connection
    "rivven_kafka_requests_total": Series(
        "counter", ("api",), "Kafka-protocol requests read by rivven serve, by API (a key it "
        "does not know: unknown)"),
    "rivven_kafka_request_errors_total": Series(
        "counter", ("api", "code"), "error codes rivven serve answered, by API and Kafka's "
        "error name: a response's top-level code and each topic's or partition's that is not "
        "NONE"),
    "rivven_kafka_request_bytes_total": Series(
        "counter", ("api",), "bytes of the Kafka-protocol request frames read, by API"),
    "rivven_kafka_response_bytes_total": Series(
        "counter", ("api",), "bytes of the Kafka-protocol response frames sent, by API"),
    "rivven_kafka_request_duration_seconds": Series(
        "histogram", ("api",), "time from a Kafka-protocol request read whole to its response "
        "handed to the socket (a long-polling Fetch's wait included)", KAFKA_BUCKETS),
    "rivven_kafka_connections": Series(
        "gauge", (), "Kafka-protocol client connections open now (summed over live rivven "
        "serve processes)"),
    "rivven_kafka_connections_opened_total": Series(
        "counter", (), "Kafka-protocol client connections accepted (those refused at once "
        "too: they count as closed, reason refused)"),
    "rivven_kafka_connections_closed_total": Series(
        "counter", ("reason",), "Kafka-protocol client connections closed, by reason: client "
        "(closed by it), idle, stalled (its responses not read), memory, oversized, malformed, "
        "unsupported, internal, refused, shutdown, authentication (a failed TLS handshake, or a "
        "failed or out-of-order SASL exchange), expired (its SASL session ended)"),
    "rivven_kafka_authentications_total": Series(
        "counter", ("mechanism", "result"), "client authentications by rivven serve, by "
        "mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, other: a SASL mechanism not offered, TLS: "
        "a client certificate or a TLS "
        "handshake) and result (success, failure)"),
    "rivven_kafka_authorization_denied_total": Series(
        "counter", ("operation", "resource_type"), "requests (or parts of one) refused by the "
        "ACLs, by Kafka's operation and resource type"),
    "rivven_mirror_records_total": Series(
        "counter", ("direction", "mirror", "topic"), "records copied by rivven kafka export, "
        "import and mirror, by direction (export: data dir to a Kafka cluster; import: the "
        "reverse), mirror name and source topic"),
    "rivven_mirror_bytes_total": Series(
        "counter", ("direction", "mirror"), "key and value bytes copied by rivven kafka export, "
        "import and mirror"),
    "rivven_mirror_transactions_total": Series(
        "counter", ("direction", "mirror"), "copy steps committed (each a transaction carrying "
        "its records and the source positions they reach; --at-least-once: a commit of "
        "offsets)"),
    "rivven_mirror_lag_records": Series(
        "gauge", ("direction", "mirror", "topic", "partition"), "source offsets a copy has yet "
        "to reach, per source partition, as far as the source's end is known (summed over "
        "live copying processes)"),
    "rivven_kafka_groups": Series(
        "gauge", ("state",), "Kafka-protocol consumer groups by state (Empty, "
        "PreparingRebalance, CompletingRebalance, Stable, Dead), summed over live rivven serve "
        "processes"),
}


class Metric(NamedTuple):
    """One metric as exposed (a name of /metrics)."""

    name: str
    kind: str  # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str
    source: str  # "process" or "data dir"


STATE: tuple[Metric, ...] = (
    Metric("rivven_build_info", "gauge", ("version", "python"),
           "always 1: the rivven and Python versions of the process serving the metrics",
           "data dir"),
    Metric("rivven_topic_partitions", "gauge", ("topic",), "partitions of a topic", "data dir"),
    Metric("rivven_log_start_offset", "gauge", TP, "the first offset a reader can read",
           "data dir"),
    Metric("rivven_log_end_offset", "gauge", TP, "the offset the next record will get",
           "data dir"),
    Metric("rivven_log_segments", "gauge", TP, "segments on local disk", "data dir"),
    Metric("rivven_log_size_bytes", "gauge", TP, "bytes of the segments on local disk",
           "data dir"),
    Metric("rivven_log_cold_segments", "gauge", TP,
           "segments in the cold store (topics with remote.storage.enable, or cold segments)",
           "data dir"),
    Metric("rivven_log_cold_bytes", "gauge", TP,
           "bytes of the segments in the cold store (as rivven_log_cold_segments)", "data dir"),
    Metric("rivven_group_committed_offset", "gauge", ("group", "topic", "partition"),
           "a consumer group's committed offset", "data dir"),
    Metric("rivven_group_lag", "gauge", ("group", "topic", "partition"),
           "records between a group's committed offset and the log end", "data dir"),
    Metric("rivven_group_members", "gauge", ("group",), "live members of a consumer group",
           "data dir"),
    Metric("rivven_wal_streams", "gauge", ("state",),
           "WAL streams by state: live (a running writer's) or dead (a crashed writer's, "
           "replayed by the next writable open)", "data dir"),
    Metric("rivven_wal_oldest_stream_age_seconds", "gauge", (),
           "age of the oldest WAL stream (a WAL file not yet checkpointed away)", "data dir"),
    Metric("rivven_wal_size_bytes", "gauge", (), "bytes of WAL files on disk", "data dir"),
    Metric("rivven_transactions_open", "gauge", (), "transactions begun and not yet ended",
           "data dir"),
    Metric("rivven_transaction_oldest_open_age_seconds", "gauge", (),
           "age of the oldest open transaction (0 when none is open)", "data dir"),
    Metric("rivven_metrics_processes", "gauge", ("state",),
           "processes whose counters these are: live, or dead and not yet merged", "data dir"),
    Metric("rivven_metrics_files_set_aside", "gauge", (),
           "files of .stats set aside as damaged (*.damaged: values no process counts, not a "
           "regular file, a damaged retired.json): never merged; look, then delete them",
           "data dir"),
    Metric("rivven_metrics_gather_duration_seconds", "gauge", (),
           "time this scrape took to gather the metrics", "data dir"),
    Metric("rivven_metrics_up", "gauge", (),
           "1 when this scrape gathered everything; 0 when it failed (an endpoint prints why "
           "on its stderr and serves only this and rivven_build_info)", "data dir"),
)


def exposed(name: str, s: Series) -> list[Metric]:
    """The metrics a process series is exposed as."""
    if s.kind != "run":
        return [Metric(name, s.kind, s.labels, s.help, "process")]
    return [Metric(name + suffix, kind, s.labels, text.format(what=s.help), "process")
            for suffix, kind, text in RUN_PARTS]


def all_metrics() -> list[Metric]:
    """Every metric, process series first, in a stable order."""
    out = [m for name, s in SERIES.items() for m in exposed(name, s)]
    return out + list(STATE)
