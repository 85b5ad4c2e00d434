"""``rivven spark compact|tier|reencrypt|stream|export|import``: the jobs that run on Spark
(a compaction pass and its crash-safe swap, tiering, re-encryption, a streaming copy, and the
copies to and from a Kafka cluster spread over one task per partition)."""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer

from .common import DryRunOpt, JsonOpt, PartitionsOpt, open_engine
from .kafka import (
    AtLeastOnceOpt,
    BootstrapOpt,
    ConfigOpt,
    FromOpt,
    NameOpt,
    PartitionOpt,
    PrefixOpt,
    TimeoutOpt,
    TopicsArg,
    ToTopicOpt,
    XOpt,
)
from .render import done, human_bytes, info, print_json, print_table, warn

app = typer.Typer(no_args_is_help=True)

MasterOpt = Annotated[str, typer.Option(
    "--master", help="Spark master: local[*], local[2], spark://HOST:PORT, yarn, k8s://...")]
ConfOpt = Annotated[list[str] | None, typer.Option(
    "--conf", help="Spark config key=value (repeatable), passed to spark-submit.")]
DeployModeOpt = Annotated[str | None, typer.Option(
    "--deploy-mode", help="client or cluster, passed to spark-submit.")]
ToOpt = Annotated[str | None, typer.Option(
    "--to", metavar="POSITION", help="Where every partition stops (exclusive): end (its end "
    "when its task starts: the default), OFFSET, -N, +N or @TIME.")]


def _pct(before: int, after: int) -> str:
    return f"{100 * (1 - after / before):.1f}%" if before else "0.0%"


def _with_progress(job: Any) -> Any:
    """``job(engine, progress)`` with the Spark progress bar drawn while it runs."""
    from .progress import progress_bar

    # (the engine first: its recovery has a progress bar of its own, and one shows at a time)
    with open_engine() as eng, progress_bar(tasks=True, label="spark: starting") as update:
        return job(eng, update)


@app.command()
def compact(
    topic: Annotated[str, typer.Argument(help="A topic with cleanup.policy=compact.")],
    partition: PartitionsOpt = None,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    dry_run: DryRunOpt = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Clean partitions below min.cleanable.dirty.ratio too.")] = False,
    json: JsonOpt = False,
) -> None:
    """Compact a topic on Spark: keep the last record per key, then swap the cleaned
    segments in (crash-safe; producers keep appending meanwhile). --dry-run prints the plan
    and the exact spark-submit command."""
    from engine.errors import plural
    from engine.spark.submit import compact as run

    out = _with_progress(lambda eng, update: run(eng, topic, partition, master, conf or [],
                                                 deploy_mode, dry_run, force, update))
    if json:
        print_json(out)
        return
    skipped = [p for p in out["plans"] if p["skip"]]
    for p in skipped:
        info(f"{topic}-{p['partition']}: skipped: {p['skip']}")
    if dry_run:
        todo = [p for p in out["plans"] if not p["skip"]]
        print_table(["PARTITION", "CLEANABLE", "SEGMENTS", "GROUPS", "DIRTY-RATIO"],
                    [(p["partition"], f"{p['log_start_offset']}..{p['cleanable_end'] - 1}",
                      len(p["segments"]), len(p["groups"]), f"{p['dirty_ratio']:.2f}")
                     for p in todo], right=("PARTITION", "SEGMENTS", "GROUPS", "DIRTY-RATIO"))
        if out["command"]:
            typer.echo(shlex.join(out["command"]))
        else:
            info("nothing to compact")
        return
    parts = out["partitions"]
    if not parts:
        info("nothing to compact")
        return
    print_table(["PARTITION", "SEGMENTS", "RECORDS", "BYTES", "TOMBSTONES-KEPT/REMOVED"],
                [(p["partition"], f"{p['segments_before']} -> {p['segments_after']}",
                  f"{p['records_in']} -> {p['records_out']}",
                  f"{human_bytes(p['bytes_in'])} -> {human_bytes(p['bytes_out'])}",
                  f"{p['tombstones_kept']}/{p['tombstones_in'] - p['tombstones_kept']}")
                 for p in parts], right=("PARTITION",), wrap=("BYTES",))
    t = {k: sum(p[k] for p in parts) for k in ("records_in", "records_out", "bytes_in",
                                                "bytes_out", "segments_before",
                                                "segments_after")}
    info(f"compacted {topic}: {len(parts)} partition(s), {t['segments_before']} -> "
         f"{plural(t['segments_after'], 'segment')}, {t['records_in']:,} -> "
         f"{plural(t['records_out'], 'record', thousands=True)}, "
         f"{human_bytes(t['bytes_in'])} -> {human_bytes(t['bytes_out'])}: "
         f"{_pct(t['bytes_in'], t['bytes_out'])} size reduction "
         f"({_pct(t['records_in'], t['records_out'])} fewer records) in {out['seconds']:.1f} s "
         f"(spark-submit {out['spark_s']:.1f} s: session {out['startup_s']:.1f} s, planning "
         f"{out['plan_s']:.1f} s, run {out['exec_s']:.1f} s; swap {out['swap_s']:.2f} s) on "
         f"{out['master']}")


@app.command()
def tier(
    topic: Annotated[str | None, typer.Argument(
        help="A topic with remote.storage.enable=true (default: every such topic).")] = None,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Move sealed segments past local retention to the cold store on Spark (one task per
    segment, each copy verified), then record them in the tier manifest and delete them
    locally. Reads of those offsets keep working (through a local cache). --dry-run prints
    what would move and the exact spark-submit command."""
    from engine.spark.submit import tier as run

    out = _with_progress(lambda eng, update: run(eng, topic, master, conf or [], deploy_mode,
                                                 dry_run, update))
    if json:
        print_json(out)
        return
    parts = out["partitions"]
    if dry_run:
        print_table(["TOPIC", "PARTITION", "UPLOAD", "BYTES", "LOCAL-ONLY-DELETE", "WHY"],
                    [(p["topic"], p["partition"],
                      _ranges(p["planned"]), human_bytes(sum(r["bytes"] for r in p["planned"])),
                      _ranges(p["already_cold"]),
                      ", ".join(sorted({r["reason"] for r in p["planned"] + p["already_cold"]})))
                     for p in parts if p["planned"] or p["already_cold"]],
                    right=("PARTITION", "BYTES"), wrap=("UPLOAD", "LOCAL-ONLY-DELETE", "WHY"))
        if out["command"]:
            typer.echo(shlex.join(out["command"]))
        else:
            info("nothing to tier")
        return
    moved = [p for p in parts if p.get("uploaded") or p.get("local_deleted")]
    if not moved:
        info("nothing to tier (no sealed segment is past local.retention.ms / "
             "local.retention.bytes)")
        return
    print_table(["TOPIC", "PARTITION", "UPLOADED", "SEGMENTS", "BYTES", "LOCAL-DELETED"],
                [(p["topic"], p["partition"], _ranges(p["uploaded"]), len(p["uploaded"]),
                  human_bytes(p["bytes"]), len(p["local_deleted"])) for p in moved],
                right=("PARTITION", "SEGMENTS", "BYTES", "LOCAL-DELETED"), wrap=("UPLOADED",))
    total = sum(p["bytes"] for p in moved)
    spark = (f" (spark-submit {out['spark_s']:.1f} s: session {out['startup_s']:.1f} s, copies "
             f"{out['exec_s']:.1f} s = {human_bytes(int(total / max(out['exec_s'], 1e-9)))}/s)"
             if out.get("spark_s") else "")
    info(f"tiered {sum(len(p['uploaded']) for p in moved)} segment(s), {human_bytes(total)}, "
         f"verified, in {out['seconds']:.1f} s{spark} on {out['master']}")


def _ranges(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "-"
    return f"{rows[0]['base_offset']}..{rows[-1]['next_offset'] - 1}"


@app.command()
def reencrypt(
    topic: Annotated[str, typer.Argument(help="Topic to re-encrypt.")],
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """'rivven key reencrypt' with the rewrites on Spark (one task per segment, local or cold),
    for big topics: then the crash-safe swaps and the drop of the data keys no batch uses.
    --dry-run prints the plan and the exact spark-submit command."""
    from engine.spark.submit import reencrypt as run

    from .key import render_reencrypt

    out = _with_progress(lambda eng, update: run(eng, topic, master, conf or [], deploy_mode,
                                                 dry_run, update))
    render_reencrypt(out, json)
    if dry_run and not json and out["command"]:
        typer.echo(shlex.join(out["command"]))


@app.command()
def stream(
    from_: Annotated[str, typer.Option("--from", help="The topic to read (read_committed).")],
    to: Annotated[str, typer.Option("--to", help="The topic to write, exactly once.")],
    transform: Annotated[str | None, typer.Option(
        "--transform", help="Spark SQL over the view 'input' (columns topic, partition, "
        "offset, timestamp, key, value, headers) giving value and optionally key, headers, "
        "partition, timestamp, e.g. \"SELECT key, upper(cast(value AS string)) AS value "
        "FROM input\". Default: key, value and headers as they are.")] = None,
    checkpoint: Annotated[str | None, typer.Option(
        "--checkpoint", help="The query's checkpoint folder (its offsets; a restart resumes "
        "there). Default: DATA_DIR/.streams/FROM--TO.")] = None,
    starting_offsets: Annotated[str, typer.Option(
        "--starting-offsets", help="Where a new query starts: earliest, latest, or Kafka's "
        "JSON ({\"t\": {\"0\": 23}}); a restart resumes at its checkpoint.")] = "earliest",
    max_offsets: Annotated[int | None, typer.Option(
        "--max-offsets-per-trigger", min=1, help="Records per micro-batch at most.")] = None,
    trigger_ms: Annotated[int, typer.Option(
        "--trigger-ms", min=0, help="Micro-batch interval (0: as fast as it goes).")] = 1000,
    available_now: Annotated[bool, typer.Option(
        "--available-now", help="Copy what is there now, then stop (Trigger.AvailableNow).")
    ] = False,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Copy (and transform) a topic into another with Spark Structured Streaming, exactly
    once, until Ctrl-C (which stops the query cleanly) or, with --available-now, until it
    has caught up. Progress shows micro-batches, rows/s and the lag. --dry-run prints the
    exact spark-submit command."""
    from engine.errors import plural
    from engine.spark.submit import stream as run

    out = _with_progress(lambda eng, update: run(
        eng, from_, to, transform, checkpoint, master, conf or [], deploy_mode, available_now,
        trigger_ms, starting_offsets, max_offsets, dry_run, update))
    if json:
        print_json(out)
        return
    if dry_run:
        typer.echo(shlex.join(out["command"]))
        return
    how = "stopped" if out.get("stopped") else "caught up" if available_now else "ended"
    info(f"stream {from_} -> {to} {how}: {plural(out.get('batches', 0), 'micro-batch', 'micro-batches')}, "
         f"{plural(out.get('rows', 0), 'record', thousands=True)} copied exactly once in "
         f"{out['seconds']:.1f} s on {out['master']} (checkpoint {out['checkpoint']})")


def _copy_summary(out: dict[str, Any], where: str) -> str:
    """``rivven kafka``'s line for a copy, with the Spark master, tasks and timings."""
    from engine.errors import plural

    from .kafka import copy_summary

    on = f" on {out['master']}, {plural(out['tasks'], 'Spark task')}"
    if out.get("spark_s"):
        on += (f" (spark-submit {out['spark_s']:.1f} s: session {out['startup_s']:.1f} s, "
               f"copy {out['exec_s']:.1f} s)")
    return copy_summary(out, where, on)


def _copy(direction: str, topics: list[str], bootstrap: str, x: list[str] | None,
          config: str | None, start: str | None, stop: str | None, partition: list[int] | None,
          json: bool, **options: Any) -> None:
    from engine.bridge import spark_copy

    from .kafka import client_settings, copy_positions

    first, last = copy_positions(start, stop)
    settings = client_settings(x, config)
    run = spark_copy.export if direction == "export" else spark_copy.import_
    out = _with_progress(lambda eng, update: run(
        eng, topics, bootstrap, config=settings, start=first, stop=last, partitions=partition,
        progress=update, **options))
    if json:
        print_json(out)
        return
    for w in out["warnings"]:
        warn(w)
    done(_copy_summary(out, bootstrap))


@app.command("export")
def export_cmd(
    topics: TopicsArg,
    bootstrap_server: BootstrapOpt,
    to_topic: ToTopicOpt = None,
    prefix: PrefixOpt = None,
    start: FromOpt = None,
    stop: ToOpt = None,
    x: XOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    partition: PartitionOpt = None,
    at_least_once: AtLeastOnceOpt = False,
    timeout: TimeoutOpt = 30.0,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    json: JsonOpt = False,
) -> None:
    """'rivven kafka export' on Spark, for big backfills: one task per partition, each
    exactly once by the same protocol (its own transactional id, its positions in the
    mirror group rivven-mirror-NAME, which 'rivven kafka export --name NAME' shares). Killed
    at any moment, the same command resumes. The destination topics are created or checked
    before the job starts."""
    _copy("export", topics, bootstrap_server, x, config, start, stop, partition, json,
          name=name, to_topic=to_topic, prefix=prefix, at_least_once=at_least_once,
          timeout=timeout, master=master, confs=conf or [], deploy_mode=deploy_mode)


@app.command("import")
def import_cmd(
    topics: TopicsArg,
    bootstrap_server: BootstrapOpt,
    to_topic: ToTopicOpt = None,
    prefix: PrefixOpt = None,
    start: FromOpt = None,
    stop: ToOpt = None,
    x: XOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    partition: PartitionOpt = None,
    timeout: TimeoutOpt = 30.0,
    master: MasterOpt = "local[*]",
    conf: ConfOpt = None,
    deploy_mode: DeployModeOpt = None,
    json: JsonOpt = False,
) -> None:
    """'rivven kafka import' on Spark, for big backfills: one task per source partition,
    each exactly once by the same protocol (its own transactional id, its positions in the
    data dir's group rivven-mirror-NAME, which 'rivven kafka import --name NAME' shares).
    Killed at any moment, the same command resumes. The topics are created or checked
    before the job starts; every executor must see the data dir at the same path."""
    _copy("import", topics, bootstrap_server, x, config, start, stop, partition, json,
          name=name, to_topic=to_topic, prefix=prefix, timeout=timeout, master=master,
          confs=conf or [], deploy_mode=deploy_mode)
