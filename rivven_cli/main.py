"""The ``rivven`` command: ``rivven [--data-dir DIR] NOUN VERB ...``."""

from __future__ import annotations

from typing import Annotated

import typer

from . import (
    bench,
    compaction,
    consume,
    group,
    key,
    metrics,
    offsets,
    produce,
    retention,
    segment,
    spark,
    tier,
    top,
    topic,
    txn,
    wal,
)
from .common import DEFAULT_DATA_DIR, STATE, RivvenGroup, show_engine_warnings

app = typer.Typer(
    cls=RivvenGroup,
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (rivven_cli.completion)
    pretty_exceptions_enable=False,
    help="rivven: an embedded event log. Topics, partitions, segments — and the tools to run them.",
)
app.add_typer(topic.app, name="topic", help="Create, list, describe, alter and delete topics.")
app.add_typer(segment.app, name="segment", help="List, inspect, verify and repair segment files.")
app.add_typer(wal.app, name="wal", help="Inspect, verify, replay and checkpoint the write-ahead log.")
app.add_typer(group.app, name="group", help="Consumer groups: lag, offsets, resets, deletion.")
app.add_typer(retention.app, name="retention", help="Apply retention (time and size) now.")
app.add_typer(spark.app, name="spark", help="Run the maintenance jobs on Apache Spark.")
app.add_typer(tier.app, name="tier", help="Tiered storage: where offsets live; restore.")
app.add_typer(compaction.app, name="compaction", help="Explain what compaction will do and why.")
app.add_typer(key.app, name="key", help="Encryption at rest: what each data key covers, "
              "rotate, rewrap under another master key, re-encrypt a topic.")
app.add_typer(txn.app, name="txn", help="Transactions: list, describe, producers, hanging "
              "ones, abort (Kafka's kafka-transactions.sh).")
app.add_typer(metrics.app, name="metrics", help="Prometheus metrics: print them, write a "
              "textfile, or serve /metrics.")
app.add_typer(bench.app, name="bench", help="Measure produce and consume throughput.")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("offsets")(offsets.offsets)
app.command("delete-records")(retention.delete_records)
app.command("top")(top.top)


def _version(value: bool) -> None:
    if value:
        from engine import __version__

        typer.echo(f"rivven {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    data_dir: Annotated[str, typer.Option(
        "--data-dir", "-d", envvar="RIVVEN_DATA_DIR", help="The data directory.")
    ] = DEFAULT_DATA_DIR,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    keyring: Annotated[str | None, typer.Option(
        "--keyring", envvar="RIVVEN_KEYRING",
        help="Keyring file of master keys for encrypted topics: a JSON object of base64 "
             "32-byte keys, mode 0600, kept outside the data dir.")] = None,
    lock_timeout_ms: Annotated[int | None, typer.Option(
        "--lock-timeout-ms", envvar="RIVVEN_LOCK_TIMEOUT_MS", min=-1,
        help="Longest wait for a lock another process holds, in ms (the engine setting "
             "lock.timeout.ms; default 30000, -1 for ever).")] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    STATE["data_dir"] = data_dir
    STATE["debug"] = debug
    STATE["keyring"] = keyring or None
    show_engine_warnings()
    STATE["settings"] = {} if lock_timeout_ms is None else {"lock.timeout.ms": str(lock_timeout_ms)}


def main() -> None:
    app(prog_name="rivven")  # (also as python -m rivven_cli: the completion scripts call rivven)


if __name__ == "__main__":
    main()
