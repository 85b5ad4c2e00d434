"""``rivven serve``: the data dir over Kafka's wire protocol (docs/KAFKA.md)."""

from __future__ import annotations

import errno
import logging
import os
import sys
from typing import Annotated, Any

import typer

from .common import error_line, fail, open_engine, state
from .render import human_bytes, printable


def serve(
    listen: Annotated[str | None, typer.Option(
        "--listen", metavar="HOST:PORT",
        help="Where to listen, one PLAINTEXT listener (port 0: any free one); default "
             "127.0.0.1:9092.")] = None,
    listener: Annotated[list[str] | None, typer.Option(
        "--listener", metavar="NAME://HOST:PORT",
        help="A listener (repeatable; instead of --listen): NAME is its security protocol "
             "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or a name the protocol map setting "
             "maps; TLS from the ssl.* settings (docs/SECURITY.md).")] = None,
    advertised: Annotated[str | None, typer.Option(
        "--advertised-listener", metavar="HOST:PORT",
        help="The address clients are told to connect to (Metadata, FindCoordinator), for a "
             "single listener (several: advertised.listeners); default: the listen "
             "address.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Allow a PLAINTEXT listener on an address other than loopback (no "
                           "authentication, no encryption), and SASL PLAIN without TLS "
                           "there.")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", "-c", metavar="KEY=VALUE",
        help="A server setting under Kafka's name (auto.create.topics.enable, num.partitions, "
             "socket.request.max.bytes, connections.max.idle.ms, ssl.keystore.location, "
             "sasl.enabled.mechanisms, super.users, ...: docs/KAFKA.md); repeatable.")] = None,
    config_file: Annotated[str | None, typer.Option(
        "--config", metavar="FILE",
        help="Server settings from a properties file (key=value lines, # comments), "
             "as Kafka's server.properties; --set wins.")] = None,
    status_every: Annotated[float | None, typer.Option(
        "--status-interval", metavar="SECONDS",
        help="Seconds between status updates: a redrawn line on a terminal (default 1), a "
             "log line otherwise (default 60; only when there was traffic).")] = None,
    schema_registry: Annotated[str | None, typer.Option(
        "--schema-registry-listen", metavar="HOST:PORT", rich_help_panel="Schema registry",
        help="Also answer the schema registry's REST API (Confluent's) here: HTTPS with a TLS "
             "listener's certificate, basic auth against the SCRAM users with a SASL listener, "
             "the same ACLs (docs/SCHEMAS.md).")] = None,
    no_maintenance: Annotated[bool, typer.Option(
        "--no-maintenance", help="No background retention, compaction or tiering "
                                 "(maintenance.enable=false; rivven maintain does them "
                                 "elsewhere).")] = False,
) -> None:
    """Serve the data dir to Kafka clients (librdkafka, kafka-python, Java, kcat) over
    Kafka's wire protocol until Ctrl-C or SIGTERM (a second one stops without waiting for
    requests in flight). Other processes keep using the data dir at the same time. On a
    terminal a status line shows connections, requests, bytes, produce and fetch rates and
    groups."""
    import asyncio

    from engine.errors import RivvenError
    from engine.kafka import listeners as listeners_mod
    from engine.kafka.config import ServeConfig
    from engine.kafka.serve import StoppedAtOnce, attach, is_loopback, parse_address
    from engine.kafka.serve import serve as run

    try:
        bind = parse_address(listen, "--listen") if listen is not None else None
        registry_at = (parse_address(schema_registry, "--schema-registry-listen")
                       if schema_registry is not None else None)
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
        lst = listeners_mod.resolve(bind, adv, list(listener or ()), cfg)
    except RivvenError as e:
        fail(str(e), code=2)
    if status_every is not None and not status_every >= 0.1:
        fail(f"--status-interval {status_every}: use 0.1 seconds or more", code=2)
    open_plain = [x for x in lst if x.protocol == "PLAINTEXT" and not is_loopback(x.host)]
    if registry_at is not None and not insecure and not is_loopback(registry_at[0]) \
            and not any(x.tls for x in lst):
        fail(f"--schema-registry-listen {schema_registry} is not a loopback address and no "
             "listener has TLS: the registry would answer plain HTTP; add an SSL or SASL_SSL "
             "listener (its certificate serves HTTPS), or --insecure", code=2)
    if open_plain and not insecure:
        x = open_plain[0]
        what = f"--listen {listen}" if listen is not None else f"listener {x.url()}"
        fail(f"{what} is not a loopback address: a PLAINTEXT listener has no "
             "authentication and no encryption; add --insecure to serve it anyway (or use an "
             "SSL or SASL_SSL listener)", code=2)
    try:
        attach(lst, cfg)  # (certificate files read now: a bad one stops the start)
    except RivvenError as e:
        fail(str(e), code=2)
    status = Status(sys.stderr.isatty(), status_every)
    for x in open_plain:
        logging.getLogger("rivven.serve").warning(
            "listening on %s without authentication or encryption (--insecure)", x.url())
    host, port = lst[0].host, lst[0].port

    def ready(h: str, p: int) -> None:
        if len(lst) > 1 or lst[0].name != "PLAINTEXT":
            for x in lst:  # (one line each, before the ready line: tests read them)
                ah, ap = x.advertised or (None, None)
                status.say(f"listener {x.name} ({x.protocol}) on {x.url(port=x.port)}"
                           + (f", advertised as {ah}:{ap or x.port}" if ah else ""))
        if registry_at is not None and server_ref:
            reg = server_ref[0].schema_registry
            scheme = "https" if any(x.tls for x in lst) else "http"
            status.say(f"schema registry on {scheme}://{reg.host}:{reg.port}")
        status.say(f"rivven serving {state().data_dir} on {h}:{p} (Kafka protocol; "
                   "Ctrl-C stops)")
        status.start()

    server_ref: list[Any] = []
    with open_engine() as eng:
        try:
            asyncio.run(run(eng, (host, port), adv, cfg, ready, status=status.update,
                            status_every=status.every, listeners=lst, insecure=insecure,
                            schema_registry=registry_at, started=server_ref.append))
        except StoppedAtOnce as e:
            status.stop()
            error_line(str(e))
            sys.stderr.flush()
            os._exit(130)  # (the engine is not closed under the calls still running)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                fail(f"{_bound(e, lst)} is in use; pick another port with "
                     f"{'--listen' if len(lst) == 1 else '--listener'}")
            fail(f"cannot listen on {_bound(e, lst)}: {e.strerror}; check "
                 f"{'--listen' if len(lst) == 1 else '--listener'}")
        finally:
            status.stop()
    typer.echo("stopped", err=True)


def _bound(e: OSError, listeners: list[Any]) -> str:
    """The address a bind failed on (asyncio names it in the message)."""
    for x in listeners:
        if f"{x.host}', {x.port})" in str(e) or f"{x.host}:{x.port}" in str(e):
            return f"{x.host}:{x.port}"
    return ", ".join(f"{x.host}:{x.port}" for x in listeners)


class Status:
    """Where the server's log lines and status go: on a terminal, a status line redrawn in
    place (Rich) with the log lines printed above it; otherwise plain log lines, and a
    status line in the log now and then when there was traffic."""

    def __init__(self, tty: bool, every: float | None) -> None:
        self.tty = tty
        self.every = every or (1.0 if tty else 60.0)
        self.live: Any = None
        self.before: dict[str, Any] | None = None
        handler: logging.Handler
        if tty:
            from rich.console import Console

            self.console = Console(stderr=True, highlight=False, soft_wrap=True)
            handler = _ConsoleHandler(self.console)
        else:
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Line("%(asctime)s %(levelname)s %(message)s"))
        # the engine's and the server's loggers (``rivven.*``): every line, timestamped,
        # instead of the commands' "warning:" lines (common.show_engine_warnings)
        logger = logging.getLogger("rivven")
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False

    def say(self, line: str) -> None:
        if self.tty:
            from rich.text import Text

            self.console.print(Text(line))
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def start(self) -> None:
        if self.tty:
            from rich.live import Live

            self.live = Live(console=self.console, auto_refresh=False, transient=True,
                             redirect_stdout=False, redirect_stderr=False)
            self.live.start()

    def update(self, snap: dict[str, Any]) -> None:
        before, self.before = self.before, snap
        if before is None:
            return
        if self.live is not None:
            from rich.text import Text

            self.live.update(Text(status_line(before, snap), no_wrap=True,
                                  overflow="ellipsis"), refresh=True)
        elif snap["requests"] != before["requests"] or \
                snap["connections"] != before["connections"]:
            logging.getLogger("rivven.serve").info("status: %s", status_line(before, snap))

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class _Line(logging.Formatter):
    """A log line with what clients sent (names, ids) escaped; a traceback keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        return printable(super().formatMessage(record))


class _ConsoleHandler(logging.Handler):
    """Log lines through Rich's console: printed above the live status line."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        from rich.text import Text

        try:
            self.console.print(Text(self.format(record)))
        except Exception:
            self.handleError(record)


def status_line(before: dict[str, Any], after: dict[str, Any]) -> str:
    """One line: listener, connections, requests/s, bytes in/out per second, produce and
    fetch rates, groups (the rates over the time between two ``Server.snapshot()``s)."""
    dt = max(after["time"] - before["time"], 1e-6)

    def per_s(key: str) -> float:
        return max(0.0, after[key] - before[key]) / dt

    conns = after["connections"]
    parts = [after["listener"], f"{conns} connection{'s' if conns != 1 else ''}",
             f"{per_s('requests'):,.0f} req/s",
             f"in {human_bytes(per_s('bytes_in'))}/s", f"out {human_bytes(per_s('bytes_out'))}/s",
             f"produce {per_s('produce_requests'):,.0f} req/s {per_s('records_in'):,.0f} rec/s",
             f"fetch {per_s('fetch_requests'):,.0f} req/s {per_s('records_out'):,.0f} rec/s"]
    groups = after.get("groups")
    if groups is not None:
        n = sum(groups.values())
        states = ", ".join(f"{k} {v}" for k, v in sorted(groups.items()) if v)
        parts.append(f"{n} group{'s' if n != 1 else ''}" + (f" ({states})" if states else ""))
    return " · ".join(parts)


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
