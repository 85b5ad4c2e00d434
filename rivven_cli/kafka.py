"""``rivven kafka export | import | mirror``: topics copied between the data dir and a
Kafka-protocol cluster (Kafka, Redpanda, a managed Kafka, another ``rivven serve``), exactly
once and resumable (engine.bridge). Client settings are librdkafka's, as kcat takes them
(``-X key=value``), or a Kafka client properties file (``--config``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import JsonOpt, open_engine
from .render import done, print_json, warn

app = typer.Typer(no_args_is_help=True)

TopicsArg = Annotated[list[str], typer.Argument(help="Topics to copy.", show_default=False)]
BootstrapOpt = Annotated[str, typer.Option(
    "--bootstrap-server", "-b", metavar="HOST:PORT[,...]",
    help="The cluster's bootstrap servers (librdkafka's bootstrap.servers).",
    show_default=False)]
ToTopicOpt = Annotated[str | None, typer.Option(
    "--to-topic", help="The destination topic's name (one topic only; default: the same).")]
PrefixOpt = Annotated[str | None, typer.Option(
    "--prefix", help="Name each destination topic PREFIX + its source's name.")]
FromOpt = Annotated[str | None, typer.Option(
    "--from", metavar="POSITION", help="Where a partition the copy has no position for "
    "starts: beginning (the default), end, OFFSET, -N, +N or @TIME (epoch ms, RFC 3339, -2h). "
    "A resumed copy goes on from its stored position.")]
ToOpt = Annotated[str | None, typer.Option(
    "--to", metavar="POSITION", help="Where every partition stops (exclusive): end (the end "
    "when the copy starts: the default without --follow), OFFSET, -N, +N or @TIME.")]
FollowOpt = Annotated[bool, typer.Option(
    "--follow", "-f", help="Keep copying what comes, until Ctrl-C or SIGTERM (each stops after "
    "the transaction in flight).")]
XOpt = Annotated[list[str] | None, typer.Option(
    "-X", metavar="KEY=VALUE", help="A librdkafka client setting (repeatable): "
    "security.protocol, sasl.mechanism, sasl.username, ssl.ca.location...")]
ConfigOpt = Annotated[str | None, typer.Option(
    "--config", metavar="FILE",
    help="Kafka client properties file (security settings; -X wins over it).")]
NameOpt = Annotated[str | None, typer.Option(
    "--name", help="The copy's name: its positions are kept in the group rivven-mirror-NAME "
    "and its transactions under that transactional id (default: export-TOPICS or "
    "import-TOPICS, so the same topics resume where any earlier copy of them stopped).")]
AtLeastOnceOpt = Annotated[bool, typer.Option(
    "--at-least-once", help="For a cluster without transactions: an idempotent producer and "
    "plain offset commits (a copy stopped midway may copy some records twice).")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", min=0.1, metavar="SECONDS",
    help="Longest wait for the cluster per request (an unreachable cluster fails after it).")]
IntervalOpt = Annotated[float, typer.Option(
    "--interval", min=0.1, metavar="SECONDS",
    help="Seconds between progress lines (not on a terminal: a live table there).")]
MetricsPortOpt = Annotated[int | None, typer.Option(
    "--metrics-port", min=0, max=65535,
    help="Serve Prometheus /metrics on this port while copying (rivven_mirror_* series).")]
TxnRecordsOpt = Annotated[int, typer.Option(
    "--transaction-records", min=1, metavar="N",
    help="Records per transaction at most: fewer, and a stopped copy redoes less but commits "
    "more often.")]
PartitionOpt = Annotated[list[int] | None, typer.Option(
    "--partition", "-p", min=0, help="Only these partitions (repeatable).")]


def client_settings(pairs: list[str] | None, config: str | None) -> dict[str, str]:
    """``--config FILE`` then each ``-X key=value`` over it (``rivven spark export|import``
    take them too)."""
    from engine.bridge.props import read_properties

    out: dict[str, str] = read_properties(config) if config else {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise typer.BadParameter(f"{pair!r} is not key=value (librdkafka's settings, as "
                                     "kcat's -X)", param_hint="-X")
        out[key.strip()] = value.strip()
    for key in ("bootstrap.servers", "metadata.broker.list"):
        if key in out:
            raise typer.BadParameter(f"{key}: give the cluster with --bootstrap-server",
                                     param_hint="-X")
    return out


def copy_positions(start: str | None, stop: str | None) -> tuple[Any, Any]:
    """``--from`` and ``--to`` as Positions (None where not given)."""
    from .positions import parse_position

    first = parse_position(start, "--from", reading=True) if start else None
    last = parse_position(stop, "--to", reading=True) if stop else None
    return first, last


def _check(follow: bool, stop: Any) -> None:
    if follow and stop is not None:
        raise typer.BadParameter("--to stops at a position, --follow copies on: use one",
                                 param_hint="--to")


def copy_summary(r: Any, where: str, ran_on: str = "") -> str:
    """One line for a copy's result (``rivven kafka`` and ``rivven spark`` export|import):
    what was copied, how fast (``ran_on``: where, after the rate), what it created, how far
    behind it stands, where its positions are."""
    from engine.errors import plural

    parts = r["partitions"]
    topics = sorted({p["topic"] for p in parts})
    rate = r["records"] / r["seconds"] if r["seconds"] > 0 else 0.0
    way = "to" if r["direction"] == "export" else "from"
    verb = "exported" if r["direction"] == "export" else "imported"
    lag = sum(p["lag"] for p in parts)
    text = (f"{verb} {plural(r['records'], 'record', thousands=True)} of "
            f"{plural(len(topics), 'topic')} ({plural(len(parts), 'partition')}) {way} {where} "
            f"in {plural(r['transactions'], 'transaction', thousands=True)}, "
            f"{r['seconds']:.1f} s ({rate:,.0f} records/s){ran_on}")
    if r["created"]:
        text += f"; created {', '.join(r['created'])}"
    if lag:
        text += f"; {plural(lag, 'record', thousands=True)} behind"
    return text + f"; positions in group {r['group']}" + (
        "" if r["exactly_once"] else " (at least once)")


def _run(copies: list[Any], follow: bool, interval: float, json: bool,
         metrics_port: int | None, eng: Any) -> list[Any]:
    """Run ``copies`` (each in its own thread when more than one) with the progress view,
    until they end or a signal stops them; their results."""
    import sys
    import threading

    from engine.bridge.copy import run

    from .interrupts import stop_event

    stop = stop_event()
    show = follow or sys.stderr.isatty()
    view = None
    if show:
        from .kafka_view import View

        view = View(copies, sys.stderr.isatty(), interval).start()
    server = None
    if metrics_port is not None:
        from engine.metrics.expose import serve

        server = serve(eng, metrics_port)
        sys.stderr.write(f"metrics on {server.url}\n")
    results: list[Any] = [None] * len(copies)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = run(copies[i], follow, stop)
        except BaseException as e:  # noqa: BLE001 (the first error ends every copy)
            errors.append(e)
            stop.set()

    try:
        if len(copies) == 1:
            one(0)
        else:
            threads = [threading.Thread(target=one, args=(i,), name=f"rivven-{c.direction}")
                       for i, c in enumerate(copies)]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
    finally:
        if view is not None:
            view.stop()
        if server is not None:
            server.close()
    if errors:
        raise errors[0]
    return results


def _report(results: list[Any], where: str, json: bool) -> None:
    if json:
        print_json(results[0] if len(results) == 1 else results)
        return
    for r in results:
        for w in r["warnings"]:
            warn(w)
        done(copy_summary(r, where))


def _one_copy(direction: str, topics: list[str], bootstrap: str, start: str | None,
              stop: str | None, follow: bool, x: list[str] | None, config: str | None,
              name: str | None, partition: list[int] | None, interval: float,
              metrics_port: int | None, json: bool, **options: Any) -> None:
    """``rivven kafka export`` or ``import``: the options read, one copy run, reported."""
    from engine.bridge.cluster import settings
    from engine.bridge.copy import default_name
    from engine.bridge.export import Export
    from engine.bridge.importer import Import

    first, last = copy_positions(start, stop)
    _check(follow, last)
    conf = settings(bootstrap, client_settings(x, config))
    make = Export if direction == "export" else Import
    with open_engine() as eng:
        copy = make(eng, topics, conf, name or default_name(direction, topics), start=first,
                    stop=last, partitions={t: partition for t in topics} if partition else None,
                    **options)
        _report(_run([copy], follow, interval, json, metrics_port, eng), bootstrap, json)


@app.command("export")
def export_cmd(
    topics: TopicsArg,
    bootstrap_server: BootstrapOpt,
    to_topic: ToTopicOpt = None,
    prefix: PrefixOpt = None,
    start: FromOpt = None,
    stop: ToOpt = None,
    follow: FollowOpt = False,
    x: XOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    partition: PartitionOpt = None,
    at_least_once: AtLeastOnceOpt = False,
    transaction_records: TxnRecordsOpt = 200_000,
    timeout: TimeoutOpt = 30.0,
    interval: IntervalOpt = 10.0,
    metrics_port: MetricsPortOpt = None,
    json: JsonOpt = False,
) -> None:
    """Copy topics from the data dir into a Kafka cluster, exactly once: same partitions,
    keys, values, headers and timestamps; committed records only. Killed at any moment, the
    same command resumes where it stopped. The destination topics are created with the
    source's partitions and configs, or checked to have enough partitions."""
    _one_copy("export", topics, bootstrap_server, start, stop, follow, x, config, name,
              partition, interval, metrics_port, json, to_topic=to_topic, prefix=prefix,
              at_least_once=at_least_once, txn_records=transaction_records, timeout=timeout)


@app.command("import")
def import_cmd(
    topics: TopicsArg,
    bootstrap_server: BootstrapOpt,
    to_topic: ToTopicOpt = None,
    prefix: PrefixOpt = None,
    start: FromOpt = None,
    stop: ToOpt = None,
    follow: FollowOpt = False,
    x: XOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    partition: PartitionOpt = None,
    transaction_records: TxnRecordsOpt = 200_000,
    timeout: TimeoutOpt = 30.0,
    interval: IntervalOpt = 10.0,
    metrics_port: MetricsPortOpt = None,
    json: JsonOpt = False,
) -> None:
    """Copy topics of a Kafka cluster into the data dir, exactly once (read_committed:
    aborted transactions left out): same partitions, keys, values, headers and timestamps.
    Killed at any moment, the same command resumes where it stopped. The topics are created
    with the source's partitions and configs, or checked to have enough partitions."""
    _one_copy("import", topics, bootstrap_server, start, stop, follow, x, config, name,
              partition, interval, metrics_port, json, to_topic=to_topic, prefix=prefix,
              txn_records=transaction_records, timeout=timeout)


@app.command("mirror")
def mirror_cmd(
    bootstrap_server: BootstrapOpt,
    export_topics: Annotated[list[str] | None, typer.Option(
        "--export", "-e", metavar="TOPIC", help="A data-dir topic to copy to the cluster "
        "(repeatable).")] = None,
    import_topics: Annotated[list[str] | None, typer.Option(
        "--import", "-i", metavar="TOPIC", help="A cluster topic to copy into the data dir "
        "(repeatable).")] = None,
    follow: Annotated[bool, typer.Option(
        "--follow/--once", help="Keep copying until Ctrl-C or SIGTERM (the default), or stop "
        "once both directions are caught up.")] = True,
    prefix: PrefixOpt = None,
    x: XOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    at_least_once: AtLeastOnceOpt = False,
    timeout: TimeoutOpt = 30.0,
    interval: IntervalOpt = 10.0,
    metrics_port: MetricsPortOpt = None,
    json: JsonOpt = False,
) -> None:
    """Both directions at once, as a long-running job: --export topics go to the cluster,
    --import topics come into the data dir, each exactly once and resumable, with progress
    (records/s, lag per partition) and, with --metrics-port, Prometheus metrics."""
    from engine.bridge.cluster import settings
    from engine.bridge.copy import default_name
    from engine.bridge.export import Export
    from engine.bridge.importer import Import

    outs, ins = export_topics or [], import_topics or []
    if not outs and not ins:
        raise typer.BadParameter("name topics to copy: --export TOPIC (to the cluster) and/or "
                                 "--import TOPIC (into the data dir)", param_hint="--export")
    pre = prefix or ""
    looped = sorted(({pre + t for t in outs} & set(ins)) | ({pre + t for t in ins} & set(outs)))
    if looped:
        raise typer.BadParameter(f"{', '.join(looped)} would be exported and imported back "
                                 "(a loop): mirror a topic one way, or use --prefix",
                                 param_hint="--import")
    conf = settings(bootstrap_server, client_settings(x, config))
    with open_engine() as eng:
        copies: list[Any] = []
        if outs:  # (the names `kafka export` and `kafka import` of the same topics give)
            copies.append(Export(eng, outs, conf, name or default_name("export", outs),
                                 prefix=prefix, at_least_once=at_least_once, timeout=timeout))
        if ins:
            copies.append(Import(eng, ins, conf, name or default_name("import", ins),
                                 prefix=prefix, timeout=timeout))
        _report(_run(copies, follow, interval, json, metrics_port, eng), bootstrap_server,
                json)
