"""The ``rivven`` command: ``rivven [--data-dir DIR] NOUN VERB ...``."""

from __future__ import annotations

from typing import Annotated

import typer

from . import (
    acl,
    bench,
    compaction,
    consume,
    group,
    kafka,
    key,
    maintain,
    metrics,
    offsets,
    produce,
    retention,
    schema,
    segment,
    serve,
    spark,
    tier,
    top,
    topic,
    txn,
    user,
    wal,
)
from .common import DEFAULT_DATA_DIR, NounGroup, RivvenGroup, show_engine_warnings, store_global
from .habits import refuse_server

app = typer.Typer(
    cls=RivvenGroup,
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (rivven_cli.completion)
    pretty_exceptions_enable=False,
    help="rivven: an embedded event log. Topics, partitions, segments — and the tools to run them.",
)
# (a group's help is given where it is mounted)
NOUNS = [
    (topic, "topic", "Create, list, describe, alter and delete topics."),
    (segment, "segment", "List, inspect, verify and repair segment files."),
    (wal, "wal", "Inspect, verify, replay and checkpoint the write-ahead log."),
    (group, "group", "Consumer groups: lag, offsets, resets, deletion."),
    (retention, "retention", "Apply retention (time and size) now."),
    (spark, "spark", "Run the maintenance jobs on Apache Spark."),
    (tier, "tier", "Tiered storage: where offsets live; restore."),
    (compaction, "compaction", "Explain what compaction will do and why."),
    (key, "key", "Encryption at rest: what each data key covers, rotate, rewrap under another "
     "master key, re-encrypt a topic."),
    (txn, "txn", "Transactions: list, describe, producers, hanging ones, abort (Kafka's "
     "kafka-transactions.sh)."),
    (kafka, "kafka", "Copy topics to and from a Kafka cluster, exactly once: export, import, "
     "mirror."),
    (schema, "schema", "The schema registry: register, list, get, check, delete, config, "
     "serve (Confluent's REST API)."),
    (user, "user", "SCRAM users of rivven serve: add, list, describe, delete, passwd."),
    (acl, "acl", "Kafka's ACLs of rivven serve: add, list, remove (kafka-acls' options)."),
    (metrics, "metrics", "Prometheus metrics: print them, write a textfile, or serve /metrics."),
    (bench, "bench", "Measure produce and consume throughput."),
]
for module, name, text in NOUNS:
    app.add_typer(module.app, cls=NounGroup, name=name, help=text)
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("offsets")(offsets.offsets)
app.command("delete-records")(retention.delete_records)
app.command("top")(top.top)
app.command("serve")(serve.serve)
app.command("maintain")(maintain.maintain)


def _version(value: bool) -> None:
    if value:
        from engine import __version__

        typer.echo(f"rivven {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    data_dir: Annotated[str, typer.Option(
        "--data-dir", "-d", envvar="RIVVEN_DATA_DIR", help="The data directory.",
        callback=store_global)] = DEFAULT_DATA_DIR,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show tracebacks on errors.", callback=store_global)] = False,
    keyring: Annotated[str | None, typer.Option(
        "--keyring", envvar="RIVVEN_KEYRING",
        help="Keyring file of master keys for encrypted topics: a JSON object of base64 "
             "32-byte keys, mode 0600, kept outside the data dir.", callback=store_global)
    ] = None,
    lock_timeout_ms: Annotated[int | None, typer.Option(
        "--lock-timeout-ms", envvar="RIVVEN_LOCK_TIMEOUT_MS", min=-1,
        help="Longest wait for a lock another process holds, in ms (the engine setting "
             "lock.timeout.ms; default 30000, -1 for ever).", callback=store_global)] = None,
    bootstrap_server: Annotated[str | None, typer.Option(
        "--bootstrap-server", "--broker-list", "--brokers", "-b", hidden=True,
        callback=refuse_server, help="Kafka's, rpk's and kcat's broker address: a hint.")
    ] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    # (the global options are in ctx.obj already: their callbacks, common.store_global, put
    # them there as they are read, here or after the command)
    show_engine_warnings()


def main() -> None:
    app(prog_name="rivven")  # (also as python -m rivven_cli: the completion scripts call rivven)


if __name__ == "__main__":
    main()
