"""``rivven metrics``: every metric of the data dir in Prometheus's text format (or JSON, or
a node_exporter textfile); ``rivven metrics serve``: an HTTP ``/metrics`` endpoint."""

from __future__ import annotations

import errno
import sys
from typing import Annotated

import typer

from .common import JsonOpt, fail, open_engine
from .interrupts import stop_event
from .render import print_json, warn

app = typer.Typer(invoke_without_command=True, no_args_is_help=False)


@app.callback()
def metrics(
    ctx: typer.Context,
    json: JsonOpt = False,
    textfile: Annotated[str | None, typer.Option(
        "--textfile", metavar="PATH",
        help="Write the text format to PATH for node_exporter's textfile collector (a "
             "temporary file, then renamed: the collector never reads half of it).")] = None,
) -> None:
    """Every metric of the data dir (docs/METRICS.md): the counters of every process that
    wrote to it and its state now, in Prometheus's text format."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.metrics import text, write_textfile

    problems: list[str] = []
    with open_engine(read_only=True) as eng:
        doc = eng.metrics(problems)
    for line in problems:  # (a damaged file of .stats: set aside, the scrape goes on)
        warn(line)
    if json:
        print_json(doc)
    elif textfile is not None:
        try:
            write_textfile(textfile, doc)
        except OSError as e:
            fail(f"cannot write {textfile}: {e.strerror}; pick a writable path for --textfile")
        typer.echo(f"wrote {textfile}", err=True)
    else:
        sys.stdout.buffer.write(text(doc))


@app.command()
def serve(
    bind: Annotated[str, typer.Option("--bind", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="The port (0: any free one).")] = 9464,
) -> None:
    """Serve the metrics over HTTP until Ctrl-C (or SIGTERM).

    On http://BIND:PORT/metrics, gathered afresh at each scrape."""
    from engine.metrics import serve as start

    with open_engine(read_only=True) as eng:
        stop = stop_event()
        try:
            server = start(eng, port=port, bind=bind)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                fail(f"port {port} on {bind} is in use; pick another with --port")
            fail(f"cannot listen on {bind}:{port}: {e.strerror}; check --bind and --port")
        typer.echo(f"serving {server.url} (Ctrl-C stops)", err=True)
        try:
            while not stop.wait(3600):
                pass
        finally:
            server.close()
    typer.echo("stopped", err=True)
