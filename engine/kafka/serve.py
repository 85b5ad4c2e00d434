"""``rivven serve``: one writable Engine over Kafka's wire protocol until SIGINT/SIGTERM.

Start: open the engine, bind, print the listener. Stop: stop accepting, let in-flight
requests finish (every acknowledged produce is already durable: it was answered after its
fsync), close the engine (a checkpoint). A second signal stops waiting; with engine calls
still running the caller exits without closing the engine (StoppedAtOnce)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument, plural
from . import maintenance
from .broker import Broker
from .config import ServeConfig
from .groups import Coordinator
from .listeners import Listener
from .server import Server, quiet_asyncio
from .tls import server_context

log = logging.getLogger("rivven.serve")

# the handler modules register their APIs when imported
_HANDLERS = ("api_meta", "api_produce", "api_fetch", "api_txn", "api_admin", "api_groups",
             "api_acls", "sasl", "api_users")


def load_handlers() -> None:
    import importlib

    for name in _HANDLERS:
        importlib.import_module(f"{__package__}.{name}")


def parse_address(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6); InvalidArgument naming the option."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{what} {text!r}: use HOST:PORT, e.g. 127.0.0.1:9092")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StoppedAtOnce(Exception):
    """A second SIGINT/SIGTERM while requests were still running on the engine: the caller
    exits without closing the engine (what was acknowledged is durable; the next open
    replays the WAL)."""

    def __init__(self, busy: int) -> None:
        super().__init__(f"stopped at once by a second signal with {busy} request(s) still "
                         "running on the engine; acknowledged records are durable, and the next "
                         "open of the data dir replays what was not checkpointed")
        self.busy = busy


async def serve(engine: Any, listen: tuple[str, int], advertised: tuple[str, int] | None,
                config: ServeConfig, ready: Callable[[str, int], None],
                stop: asyncio.Event | None = None,
                status: Callable[[dict[str, Any]], None] | None = None,
                status_every: float = 1.0, grace_s: float = 30.0,
                started: Callable[[Server], None] | None = None,
                listeners: list[Listener] | None = None, insecure: bool = False,
                schema_registry: tuple[str, int] | None = None) -> Server:
    """Serve until ``stop`` is set (the first SIGINT/SIGTERM sets it when none is given; a
    second one stops waiting for requests in flight). ``listeners`` (their TLS contexts
    made: ``tls.attach``) when given, else one PLAINTEXT listener on ``listen``, told to
    clients as ``advertised``. ``status(snapshot)`` is called every ``status_every``
    seconds with ``Server.snapshot()``; ``started(server)`` once it listens (before
    ``ready``, which gets the first listener's address; ``server.listeners`` has them all).
    StoppedAtOnce when a second signal left engine calls running (the engine must not be
    closed under them). SIGHUP reloads the TLS listeners' certificate files."""
    load_handlers()
    quiet_asyncio()
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    force = asyncio.Event()

    def signalled() -> None:
        if stop.is_set():
            force.set()
        else:
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, signalled)
        except (NotImplementedError, RuntimeError):  # not the main thread (tests)
            pass
    if listeners is None:
        listeners = [Listener("PLAINTEXT", "PLAINTEXT", *listen, advertised=advertised)]
        attach(listeners, config)
    room_for_connections(config.max_connections)
    broker = Broker(engine, config, listeners[0].host, listeners[0].port, loop)
    broker.listeners = listeners
    broker.insecure = insecure
    broker.groups = Coordinator(broker)
    broker.group_states = broker.groups.states  # (the groups gauge)
    from . import api_txn

    expiry = api_txn.install(broker)  # broker.txns; timed-out transactions aborted
    server = Server(broker)
    host, port = (await server.start(listeners))[0]
    broker.host, broker.port = broker.endpoint()
    _reload_on_sighup(loop, listeners, config)
    registry = None
    if schema_registry is not None:
        registry = await schema_registry_listener(broker, *schema_registry)
        server.schema_registry = registry
    if started is not None:
        started(server)
    ready(host, port)
    _say_authorization(broker)
    ticker = loop.create_task(_tick(server, status, status_every))
    maint = maintenance.start(engine, config.maintenance)  # (retention, compaction, tiering)
    try:
        await stop.wait()
    finally:
        if maint is not None:
            maint.request_stop()  # (no new pass; the one in progress ends below)
        broker.stopping = True
        broker.groups.close()  # (JoinGroups and SyncGroups waiting for a rebalance answered)
        expiry.cancel()
        ticker.cancel()
        log.info("stopping: no new connections")
        if registry is not None:
            await registry.close(grace_s)
        await server.stop(grace_s, force)
        # the engine calls still running end before the engine closes (a second signal:
        # not waited for)
        while broker.busy and not force.is_set():
            await asyncio.sleep(0.01)
        if force.is_set() and broker.busy:
            broker.pool.shutdown(wait=False, cancel_futures=True)
            raise StoppedAtOnce(broker.busy)
        broker.pool.shutdown(wait=True)
        if maint is not None:
            maint.stop()  # (before the engine closes)
    return server


async def schema_registry_listener(broker: Broker, host: str, port: int) -> Any:
    """The schema registry's REST API (engine.schemas) on ``host:port`` in this loop, with
    the Kafka listeners' TLS (the first TLS listener's certificate: HTTPS) and users (a SASL
    listener: HTTP basic auth against the SCRAM credentials), and the same ACL decision."""
    from ..schemas.access import Access
    from ..schemas.http import Api
    from ..schemas.server import start

    tls = next((x for x in broker.listeners if x.tls), None)
    sasl = any(x.sasl for x in broker.listeners)
    access = Access(broker.engine.users if sasl else None, broker.authorizer)
    return await start(Api(broker.engine.schemas, access), host, port,
                       tls.context if tls is not None else None, broker.pool)


def _say_authorization(broker: Broker) -> None:
    """One line at start: whether the ACLs are enforced, and why (an operator's first
    question when a client is refused, or is not)."""
    on = broker.authorizer_on
    try:
        n = len(broker.engine.acls.bindings())
    except Exception as e:  # (a damaged file: every request will say so too)
        log.warning("authorization: the ACL file cannot be read: %s", e)
        return
    supers = ", ".join(sorted(broker.super_users)) or "none"
    if on is False:
        log.info("authorization off (authorizer.class.name=none): every client may do "
                 "everything")
    elif on is None and n == 0:
        log.info("authorization off: the data dir has no ACL (the first `rivven acl add` "
                 "turns it on)")
    else:
        log.info("authorization on: %s, super users: %s, allow.everyone.if.no.acl."
                 "found=%s", plural(n, "ACL"), supers,
                 str(broker.config.allow_everyone_if_no_acl_found).lower())


async def _tick(server: Server, status: Callable[[dict[str, Any]], None] | None,
                every: float) -> None:
    """About once a second: the groups' gauge; every ``every`` seconds: the status."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    while True:
        await asyncio.sleep(min(1.0, every))
        try:
            snap = server.snapshot()
            if status is not None and loop.time() - last >= every - 0.05:
                last = loop.time()
                status(snap)
        except Exception:  # (the status line never stops the server)
            log.exception("the status line failed")


def attach(listeners: list[Listener], config: ServeConfig) -> None:
    """The TLS context of each SSL and SASL_SSL listener, from its settings (InvalidConfig
    naming the setting and the file that is wrong)."""
    for x in listeners:
        if x.tls:
            x.context = server_context(config, x.name)


def _reload_on_sighup(loop: asyncio.AbstractEventLoop, listeners: list[Listener],
                      config: ServeConfig) -> None:
    """SIGHUP: the TLS listeners' certificate, key and CA files read again (a renewed
    certificate: new connections get it, open ones keep theirs); a file that does not load
    leaves the old context, with a log line. Not when SIGHUP is ignored (nohup)."""
    if not any(x.tls for x in listeners):
        return

    def reload() -> None:
        for x in listeners:
            if not x.tls:
                continue
            try:
                x.context = server_context(config, x.name)
            except InvalidArgument as e:
                log.error("SIGHUP: listener %s keeps its certificates: %s", x.name, e)
            else:
                log.info("SIGHUP: listener %s reloaded its certificate files", x.name)

    try:
        if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
            return
        loop.add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError, AttributeError):
        pass  # (not the main thread, or no SIGHUP)


def room_for_connections(connections: int) -> None:
    """Raise the soft limit of open files toward the hard one so ``max.connections``
    sockets fit beside the engine's files; a warning when they cannot."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    want = soft + connections
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    if soft < connections + 256:
        log.warning("max.connections=%d, but this process may open only %d files (ulimit -n): "
                    "connections past about %d will be refused by the system; raise ulimit -n "
                    "or lower max.connections", connections, soft, max(0, soft - 256))
