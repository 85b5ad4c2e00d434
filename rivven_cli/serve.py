"""``rivven serve``: the data dir over Kafka's wire protocol (docs/KAFKA.md)."""

from __future__ import annotations

import errno
import logging
import sys
from typing import Annotated

import typer

from .common import fail, open_engine, state
from .maintain import log_passes


def serve(
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT",
        help="Where to listen (port 0: any free one).")] = "127.0.0.1:9092",
    advertised: Annotated[str | None, typer.Option(
        "--advertised-listener", metavar="HOST:PORT",
        help="The address clients are told to connect to (Metadata, FindCoordinator); "
             "default: the listen address.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Allow a listen address other than loopback: the listener has no "
                           "authentication and no encryption.")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", "-c", metavar="KEY=VALUE",
        help="A server setting under Kafka's name (auto.create.topics.enable, num.partitions, "
             "socket.request.max.bytes, connections.max.idle.ms, group.initial.rebalance."
             "delay.ms, transaction.max.timeout.ms, ...: docs/KAFKA.md); repeatable.")] = None,
    config_file: Annotated[str | None, typer.Option(
        "--config", metavar="FILE",
        help="Server settings from a properties file (key=value lines, # comments), "
             "as Kafka's server.properties; --set wins.")] = None,
    no_maintenance: Annotated[bool, typer.Option(
        "--no-maintenance", help="No background retention, compaction or tiering "
                                 "(maintenance.enable=false; rivven maintain does them "
                                 "elsewhere).")] = False,
) -> None:
    """Serve the data dir to Kafka clients (librdkafka, kafka-python, Java, kcat) over
    Kafka's wire protocol until Ctrl-C or SIGTERM. Other processes keep using the data dir
    at the same time."""
    import asyncio

    from engine.errors import RivvenError
    from engine.kafka.config import ServeConfig
    from engine.kafka.serve import is_loopback, parse_address
    from engine.kafka.serve import serve as run

    try:
        host, port = parse_address(listen, "--listen")
        adv = parse_address(advertised, "--advertised-listener") if advertised else None
        values = _properties(config_file) if config_file else {}
        for item in settings or ():
            k, sep, v = item.partition("=")
            if not sep or not k.strip():
                fail(f"--set {item!r}: use KEY=VALUE, e.g. --set auto.create.topics.enable=true",
                     code=2)
            values[k.strip()] = v.strip()
        if no_maintenance:
            values["maintenance.enable"] = "false"
        cfg = ServeConfig.parse(values)
    except RivvenError as e:
        fail(str(e), code=2)
    if not is_loopback(host) and not insecure:
        fail(f"--listen {listen} is not a loopback address: the listener has no "
             "authentication and no encryption; add --insecure to serve it anyway", code=2)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    log_passes()  # (the background maintenance's lines)
    if not is_loopback(host):
        logging.getLogger("rivven.serve").warning(
            "listening on %s without authentication or encryption (--insecure)", listen)

    def ready(h: str, p: int) -> None:
        typer.echo(f"rivven serving {state().data_dir} on {h}:{p} (Kafka protocol; "
                   "Ctrl-C stops)", err=True)
        sys.stderr.flush()

    with open_engine() as eng:
        try:
            asyncio.run(run(eng, (host, port), adv, cfg, ready))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                fail(f"{host}:{port} is in use; pick another port with --listen")
            fail(f"cannot listen on {host}:{port}: {e.strerror}; check --listen")
    typer.echo("stopped", err=True)


def _properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"cannot read --config {path}: {e.strerror}", code=2)
    out = {}
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        k, sep, v = line.partition("=")
        if not sep:
            fail(f"{path}:{n}: {line!r} is not key=value", code=2)
        out[k.strip()] = v.strip()
    return out
