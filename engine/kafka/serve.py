"""``rivven serve``: one writable Engine over Kafka's wire protocol until SIGINT/SIGTERM.

Start: open the engine, bind, print the listener. Stop: stop accepting, let in-flight
requests finish (every acknowledged produce is already durable: it was answered after its
fsync), close the engine (a checkpoint)."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .broker import Broker
from .config import ServeConfig
from .groups import Coordinator
from .server import Server, quiet_asyncio

# the handler modules register their APIs when imported
_HANDLERS = ("api_meta", "api_produce", "api_fetch", "api_txn", "api_groups")


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


async def serve(engine: Any, listen: tuple[str, int], advertised: tuple[str, int] | None,
                config: ServeConfig, ready: Callable[[str, int], None],
                stop: asyncio.Event | None = None) -> Server:
    """Serve until ``stop`` is set (SIGINT/SIGTERM set it when none is given)."""
    load_handlers()
    quiet_asyncio()
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread (tests)
            pass
    broker = Broker(engine, config, listen[0], listen[1], loop)
    broker.groups = Coordinator(broker)
    server = Server(broker)
    host, port = await server.start(*listen)
    broker.host, broker.port = advertised or (host if host not in ("0.0.0.0", "::") else
                                              "localhost", port)
    ready(host, port)
    try:
        await stop.wait()
    finally:
        broker.stopping = True
        broker.groups.close()  # (JoinGroups and SyncGroups waiting for a rebalance answered)
        await server.stop()
        broker.pool.shutdown(wait=True)
    return server
