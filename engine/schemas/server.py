"""The schema registry's HTTP/1.1 listener: a listening socket and its connections
(``server_conn``: the protocol, keep-alive, bounds, authentication, the routes), in the event
loop of ``rivven serve`` (``start``) or its own (``serve``: ``rivven schema serve``).

- TLS through the ``ssl.SSLContext`` given; a handshake bounded by ``handshake_s``.
- A connection without a request for ``idle_s`` is closed.
- A GET's answer is kept, as the bytes sent, per (URL, principal, client address) while the
  registry's ``generation`` and the users and ACLs (``Access.state()``) stay the same: a
  repeated lookup (a deserializer's ``GET /schemas/ids/{id}``) costs a dict lookup and a
  write.
- Other processes' registrations: the registry reads the topic on (``refresh``) every
  ``follow_s`` on the thread pool.
- ``close``: idle connections at once, the others when their request in flight is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl as ssl_module
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from .http import Api, Response
from .server_conn import Connection, Dates, Limits, head_of

log = logging.getLogger("rivven.schemas")


# ---------------------------------------------------------------------- the listener
class Listener:
    """A listening socket and its connections (``start`` makes one): ``port``, ``host``,
    ``close()``."""

    def __init__(self, api: Api, limits: Limits, executor: Executor | None) -> None:
        self.api = api
        self.registry = api.registry
        self.access = api.access
        self.limits = limits
        self.executor = executor
        self.conns: set[Connection] = set()
        self.cache: dict[tuple[bytes, str, str], tuple[int, object, bytes, bytes]] = {}
        self.cache_size = 0  # bytes of the answers kept
        self.dates = Dates()
        self.host = ""
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []

    def keep(self, key: tuple[bytes, str, str], gen: int, token: object,
             resp: Response) -> None:
        """Remember a GET's answer (not a failure, nor a refusal to authenticate)."""
        status, body, headers = resp
        limits = self.limits
        size = len(body) + len(key[0]) + 256
        if status >= 500 or status == 401 or size > limits.cache_bytes // 16:
            return
        cache = self.cache
        old = cache.pop(key, None)
        if old is not None:
            self.cache_size -= len(old[3]) + len(key[0]) + 256
        if len(cache) >= limits.cache_entries or self.cache_size + size > limits.cache_bytes:
            cache.clear()
            self.cache_size = 0
        cache[key] = (gen, token, head_of(status, len(body), headers), body)
        self.cache_size += size

    async def _listen(self, host: str, port: int, ssl: ssl_module.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self), host or None, port, ssl=ssl, backlog=1024,
            ssl_handshake_timeout=self.limits.handshake_s if ssl is not None else None)
        name = self._server.sockets[0].getsockname()
        self.host, self.port = name[0], name[1]
        self._tasks = [loop.create_task(self._sweep())]
        if self.limits.follow_s > 0 and callable(getattr(self.registry, "refresh", None)):
            self._tasks.append(loop.create_task(self._follow()))

    async def _sweep(self) -> None:
        """Close connections idle past ``idle_s``."""
        idle_s = self.limits.idle_s
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 1.0))
            now = time.monotonic()
            for c in [c for c in self.conns if c.idle(now, idle_s)]:
                c.t.close()

    async def _follow(self) -> None:
        """Let the registry read what other processes appended (on the pool)."""
        loop = asyncio.get_running_loop()
        refresh: Callable[[], Any] = self.registry.refresh  # type: ignore[attr-defined]
        while True:
            await asyncio.sleep(self.limits.follow_s)
            try:
                await loop.run_in_executor(self.executor, refresh)
            except Exception as e:  # (a damaged record is the registry's to report)
                log.error("schema registry: reading the _schemas topic failed: %s", e)
                await asyncio.sleep(1.0)

    async def close(self, grace_s: float = 10.0) -> None:
        """Stop listening; close idle connections at once and the others when their
        request in flight is answered (at most ``grace_s``)."""
        if self._server is not None:
            self._server.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
        deadline = time.monotonic() + grace_s
        while True:
            for c in list(self.conns):
                if not c.busy and not c.t.is_closing():
                    c.closing = True
                    c.send()
                    c.t.close()
            if not self.conns or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.02)
        for c in list(self.conns):
            c.t.abort()
        self.conns.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None


async def start(api: Api, host: str = "127.0.0.1", port: int = 0,
                ssl: ssl_module.SSLContext | None = None, executor: Executor | None = None,
                limits: Limits | None = None) -> Listener:
    """Listen on ``host:port`` (0: a free port, then ``listener.port``) in the running loop;
    ``executor``: where blocking requests run (None: the loop's default)."""
    listener = Listener(api, limits or Limits(), executor)
    await listener._listen(host, port, ssl)
    return listener


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run ``serve`` on: ``uvloop`` (twice the requests per CPU second:
    tests/bench/bench_schemas.py), ``asyncio`` (the standard one), ``auto`` (uvloop when it is
    installed)."""
    if choice not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"unknown event loop {choice!r}: give auto, uvloop or asyncio")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ValueError("uvloop is not installed: pip install uvloop, or use the "
                             "asyncio loop") from None
        return None
    return uvloop.new_event_loop


def serve(api: Api, host: str = "127.0.0.1", port: int = 8081,
          ssl: ssl_module.SSLContext | None = None, loop: str = "auto",
          limits: Limits | None = None, executor: Executor | None = None,
          on_ready: Callable[[Listener], None] | None = None) -> None:
    """Listen until SIGINT or SIGTERM (``rivven schema serve``), in a loop of its own
    (``loop``: see ``loop_factory``); ``on_ready`` is told the listener once it listens."""
    async def main() -> None:
        listener = await start(api, host, port, ssl, executor, limits)
        stop = asyncio.Event()
        ev = asyncio.get_running_loop()
        signals = [s for s in (signal.SIGINT, signal.SIGTERM)]
        for s in signals:
            ev.add_signal_handler(s, stop.set)
        try:
            if on_ready is not None:
                on_ready(listener)
            await stop.wait()
        finally:
            for s in signals:
                ev.remove_signal_handler(s)
            await listener.close()

    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        runner.run(main())
