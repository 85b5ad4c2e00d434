"""The listener: connections, frames, limits, dispatch, shutdown.

One asyncio event loop reads and writes every connection; a request that touches the data
dir runs on the broker's thread pool (decoded and encoded there too), and so is the decoding
of a large frame of an ``async`` handler (a hostile frame of many tiny entries decodes at
~0.3 s per MiB: the loop keeps serving the others). As Kafka's broker does, a connection's
requests are handled one at a time, in order (a client pipelines; it gets its answers in
order), and the next one is not read before the answer to the last was taken by the socket.

Bad input closes that one connection, with a log line naming the client and the reason: a
frame size outside 8..``socket.request.max.bytes``, a malformed header or body, an API key
unknown to Kafka's schemas or a version past them, a handler that fails. An API or version
Kafka knows but rivven does not serve gets Kafka's error answer (UNSUPPORTED_VERSION) where
its response has room for one. Memory is bounded: bytes of request frames read but not yet
answered, all connections together, by ``queued.max.request.bytes`` (a connection waits for
room); each connection's unread input by its reader's limit and a paused socket; unsent
answers by closing the connections that do not read theirs (after ``connections.max.idle.ms``,
or at once when their bytes pass the same budget); connections by ``max.connections`` and
``max.connections.per.ip``. A connection that sends nothing (nor more of a frame it began)
for ``connections.max.idle.ms`` is closed.

Its parts: a connection and ``Closing`` (conn.py), the TLS handshake (handshake.py), what
every request and connection counts and ``snapshot()``, the status line's figures
(meters.py), rate-limited log lines (throttle.py)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
from typing import Any

from ..errors import plural
from . import codes, sasl
from .broker import Broker
from .conn import BUSY, IDLE, READING, WAITING, WRITING, Closing, Conn
from .handshake import Handshakes
from .listeners import Listener
from .meters import Meters
from .protocol import Frame
from .registry import APIS, Api, Request, Session
from .throttle import Throttle

log = logging.getLogger("rivven.serve")
API_VERSIONS = 18
# a frame larger than this is decoded off the event loop (see above)
DECODE_ON_LOOP = 256 << 10
# a connection's reader buffers at most 2 x this of input nobody asked for yet (then its
# socket is paused: the kernel holds the rest), and reads at most this at a time
READ_LIMIT = 32 << 10
RECV_SIZE = 64 << 10

class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.max_frame = cfg.socket_request_max_bytes
        self.idle_s = cfg.connections_max_idle_ms / 1000
        self.budget = cfg.request_budget()
        self._budget_left = self.budget
        self._budget_cond = asyncio.Condition()
        self.conns: set[Conn] = set()
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.in_flight = 0
        self.stopping = False
        self._server: asyncio.base_events.Server | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._sweeper: asyncio.Task | None = None
        self.listener = ""
        self.schema_registry: Any = None  # the REST API's listener, when rivven serve has one
        self.say = Throttle()  # closes, refusals, failures
        # error answers: part of a client's normal flow too (a rebalance, a topic not made
        # yet): a few lines, then one per key every 10 s
        self.said = Throttle(burst=5, rate=0.1, every_s=60.0)
        self.meter = broker.engine.meter  # (sasl.py counts its exchanges)
        self.meters = Meters(broker, self.say, self.said)
        broker.on_denied = self.meters.denied

    @property
    def connections(self) -> int:
        return len(self.conns)

    async def start(self, listeners: list[Listener]) -> list[tuple[str, int]]:
        """Listen on each listener (its port 0: a free one, then set on it): the bound
        addresses, in order."""
        self.listeners = listeners
        self._servers: list[asyncio.base_events.Server] = []
        self.handshakes = Handshakes(self.broker, listeners, self.meter, self.say, self.said)
        out = []
        try:
            for x in listeners:
                srv = await asyncio.start_server(functools.partial(self._connection, x),
                                                 x.host or None, x.port, limit=READ_LIMIT,
                                                 backlog=1024)
                self._servers.append(srv)
                sock = srv.sockets[0].getsockname()
                x.port = sock[1]
                out.append((sock[0], sock[1]))
        except BaseException:
            for srv in self._servers:
                srv.close()
            raise
        self._server = self._servers[0]
        self.listener = ", ".join(f"{h}:{p}" if len(out) == 1 else x.url(h, p)
                                  for x, (h, p) in zip(listeners, out))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        return out

    async def stop(self, grace_s: float = 30.0, force: asyncio.Event | None = None) -> bool:
        """Stop accepting; close idle connections; let requests in flight finish and their
        answers reach the socket (up to ``grace_s``, or until ``force`` is set); close the
        rest. True when every request in flight was answered."""
        self.stopping = True
        for srv in getattr(self, "_servers", ()):
            srv.close()
        for c in list(self.conns):
            if c.state in (IDLE, WAITING, READING):  # (no request of its own in flight)
                self._shut(c)  # (what its last answer left unsent is flushed first)
        waits = [asyncio.ensure_future(self._idle.wait())]
        if force is not None:
            waits.append(asyncio.ensure_future(force.wait()))
        busy = self.in_flight
        if busy:
            log.info("stopping: waiting for %d request(s) in flight (Ctrl-C again: do not "
                     "wait)", busy)
        await asyncio.wait(waits, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        answered = self.in_flight == 0
        if not answered:
            log.warning("stopping without the answers to %d request(s) in flight",
                        self.in_flight)
        # answers handed to the sockets: flushed by a graceful close (a client that reads
        # nothing is cut off after a second)
        for c in list(self.conns):
            self._shut(c)
        if self.conns and answered and not (force is not None and force.is_set()):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(
                    *(c.writer.wait_closed() for c in list(self.conns)),
                    return_exceptions=True), 1.0)
        for c in list(self.conns):
            c.transport.abort()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for srv in getattr(self, "_servers", ()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 1)
        await asyncio.sleep(0)  # (the connections' tasks see their close)
        return answered

    @staticmethod
    def _shut(c: Conn) -> None:
        if c.kind is None:
            c.kind, c.why = "shutdown", ""
        if not c.transport.is_closing():
            c.transport.close()

    # ---------------------------------------------------------------- a connection
    async def _connection(self, listener: Listener, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        peer, ip = _peer(writer)
        self.meters.opened()
        refused = self._refusal(ip)
        if refused is not None:
            self.meters.closed("refused")
            self.say(("refused", refused.partition("=")[0]), logging.WARNING,
                     "connection from %s refused: %s", peer, refused)
            writer.transport.abort()
            return
        transport = writer.transport
        if hasattr(transport, "max_size"):  # (one read's bytes: bounds unread input)
            setattr(transport, "max_size", RECV_SIZE)  # noqa: B010
        c = Conn(peer, ip, reader, writer)
        c.session = Session(ip, listener.name, listener.protocol)
        c.task = asyncio.current_task()
        # (counted before a TLS handshake: the connection limits apply to handshakes too)
        self.conns.add(c)
        self.per_ip[ip] += 1
        self.meters.open_now(len(self.conns))
        try:
            if listener.tls:
                await self.handshakes.shake(c, listener)  # (no await before it: see there)
                transport = c.transport
            await self._serve(c)
        except Closing as e:
            if c.kind is None:
                c.kind, c.why = e.kind, str(e)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # (closed by the client, or by the sweep: c.kind says)
        except Exception as e:  # a bug of the listener itself: this client only
            log.exception("connection of %s failed", peer)
            if c.kind is None:
                c.kind, c.why = "internal", f"internal error: {type(e).__name__}: {e}"
        finally:
            self.conns.discard(c)
            self.per_ip[ip] -= 1
            if self.per_ip[ip] <= 0:
                del self.per_ip[ip]
            self.meters.open_now(len(self.conns))
            kind = c.kind or "client"
            self.meters.closed(kind)
            if c.why:
                level = logging.INFO if kind in ("idle", "shutdown") else logging.WARNING
                self.say(("closing", kind), level, "closing %s: %s", peer, c.why)
            if kind == "shutdown" or (kind == "client" and
                                      not transport.get_write_buffer_size()):
                transport.close()  # (flushes what was written)
            else:  # (a client gone with answers unsent: they would be held for ever)
                transport.abort()
    def _refusal(self, ip: str) -> str | None:
        cfg = self.broker.config
        if self.stopping:
            return "shutting down"
        if len(self.conns) >= cfg.max_connections:
            return f"max.connections={cfg.max_connections} reached"
        if self.per_ip[ip] >= cfg.max_connections_per_ip:
            return f"max.connections.per.ip={cfg.max_connections_per_ip} reached for {ip}"
        return None

    async def _serve(self, c: Conn) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = c.reader, c.writer
        sasl.begin(self, c)
        auth: sasl.Auth | None = c.data.get(sasl.KEY)
        while True:
            c.state, c.since = IDLE, loop.time()
            head = await reader.readexactly(4)
            if self.stopping:
                c.kind = "shutdown"
                return
            size = int.from_bytes(head, "big", signed=True)
            limit = auth.limit if auth is not None else None
            if limit is not None and not (0 if sasl.raw(c) else 8) <= size <= limit:
                raise Closing(f"a frame of {plural(size, 'byte')} before SASL authentication "
                              f"completed (sasl.server.max.receive.size={limit})",
                              "oversized" if size > limit else "malformed")
            if limit is None and not 8 <= size <= self.max_frame:
                raise Closing(f"a request frame of {plural(size, 'byte')} (socket.request.max.bytes="
                              f"{self.max_frame})",
                              "oversized" if size > self.max_frame else "malformed")
            c.state, c.size = WAITING, size
            await self._take(size)
            out = None
            try:
                if self.stopping:  # (room came after the stop began: not in flight)
                    c.kind = "shutdown"
                    return
                c.state, c.since, c.got = READING, loop.time(), 0
                data = await reader.readexactly(size)
                if self.stopping:
                    c.kind = "shutdown"
                    return
                c.state = BUSY
                out = await self._request(data, c)
                del data
                if out is not None and (auth is None or auth.failed is None):
                    writer.write(out)  # (before in_flight drops: a stop waits for this)
            finally:
                await self._give(size)
            if auth is not None and auth.failed is not None:
                raise Closing(await sasl.failed(c, out), "authentication")  # (answered late)
            if out is not None and c.transport.get_write_buffer_size():
                c.state, c.since = WRITING, loop.time()
                c.unsent = c.transport.get_write_buffer_size()
                await writer.drain()
            if self.stopping:
                c.kind = "shutdown"
                return

    async def _take(self, size: int) -> None:
        async with self._budget_cond:
            # one frame may always be read (else a frame above the budget waits for ever)
            await self._budget_cond.wait_for(
                lambda: self._budget_left >= size or self.in_flight == 0)
            self._budget_left -= size
            self.in_flight += 1
            self._idle.clear()

    async def _give(self, size: int) -> None:
        async with self._budget_cond:
            self._budget_left += size
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()
            self._budget_cond.notify_all()

    async def _sweep(self) -> None:
        """Every so often: close connections idle, stalled in a frame or in their answers
        for ``connections.max.idle.ms``; and when the answers nobody reads pass the request
        budget, the stalled ones at once, largest first."""
        every = min(1.0, self.idle_s / 4)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(every)
            self.say.flush()
            self.said.flush()
            now = loop.time()
            limit = now - self.idle_s
            unsent = 0
            stalled = []
            for c in list(self.conns):
                if c.state == WRITING:
                    left = c.transport.get_write_buffer_size()
                    if left < c.unsent:  # (the client reads: not stalled)
                        c.since = now
                    c.unsent = left
                    unsent += left
                    if now - c.since >= every:
                        stalled.append(c)
                elif c.state == READING:
                    got = len(getattr(c.reader, "_buffer", b""))
                    if got > c.got:  # (a frame arriving slowly is not idle: as Kafka)
                        c.since, c.got = now, got
                if c.state in (IDLE, READING, WRITING) and c.since < limit:
                    c.close(*self._idle_reason(c))
                elif c.waiting and c.reader.at_eof() and c.task is not None:
                    c.kind = "client"  # gone while it waits (a long poll): stop waiting
                    c.task.cancel()
            if unsent > self.budget:
                for c in sorted(stalled, key=lambda c: -c.unsent):
                    if unsent <= self.budget:
                        break
                    unsent -= c.unsent
                    c.close("memory", f"{plural(c.unsent, 'byte')} of answers it does not read, while "
                            f"the unread answers of all clients pass queued.max.request.bytes "
                            f"({self.budget})")

    def _idle_reason(self, c: Conn) -> tuple[str, str]:
        ms = self.broker.config.connections_max_idle_ms
        if c.state == READING:
            return "idle", (f"a request frame of {plural(c.size, 'byte')} not received whole: nothing "
                            f"more of it for connections.max.idle.ms={ms} ({c.got} received)")
        if c.state == WRITING:
            return "stalled", (f"its answers not read for connections.max.idle.ms={ms} "
                               f"({plural(c.unsent, 'byte')} unsent)")
        return "idle", f"idle for connections.max.idle.ms={ms}"

    # ---------------------------------------------------------------- a request
    async def _request(self, data: bytes, c: Conn) -> bytes | None:
        b = self.broker
        t0 = time.monotonic()
        raw = sasl.raw(c)
        if raw is not None:  # (after SaslHandshake v0: a SASL token, no Kafka header)
            return await sasl.raw_token(self, raw, c, data)
        try:
            frame = b.messages.read_header(memoryview(data))
        except ValueError as e:
            self.meters.count("unknown", len(data), None, {}, t0)
            raise Closing(f"a malformed request header: {e}") from None
        refused = sasl.gate(c, frame.api_key, frame.api_version)
        if refused is not None:
            raise Closing(*refused)
        api = APIS.get(frame.api_key)
        name = api.name if api is not None else self.meters.api_name(frame.api_key)
        errors: dict[int, int] = {}
        out: bytes | None = None
        try:
            if api is None or not api.min_version <= frame.api_version <= api.max_version:
                out = self._unsupported(frame, api is None, c.peer)
                errors = {codes.UNSUPPORTED_VERSION: 1}
            elif api.blocking:
                out, errors = await b.call(self._handle, api, frame, c, None)
            else:
                body = (await b.call(self._decode, api, frame) if len(data) > DECODE_ON_LOOP
                        else self._decode(api, frame))
                c.waiting = True
                try:
                    out, errors = await self._handle_async(api, frame, c, body)
                finally:
                    c.waiting = False
        finally:
            self.meters.count(name, len(data), out, errors, t0)
        if errors:
            self.meters.log_errors(name, frame, c.peer, errors)
        return out

    def _decode(self, api: Api, frame: Frame) -> Any:
        try:
            return self.broker.messages.decode(frame)
        except Exception as e:  # the generated decoder raises several kinds
            raise Closing(f"a malformed {api.name} v{frame.api_version} request (correlation "
                          f"id {frame.correlation_id}): {type(e).__name__}: {e}") from None

    def _handle(self, api: Api, frame: Frame, c: Conn, body: Any) -> tuple[bytes | None, dict]:
        """(a pool thread) Decode, run the handler, count its error codes, encode."""
        if body is None:
            body = self._decode(api, frame)
        req = Request(self.broker, frame, body, c.peer, c.data, c.session)
        try:
            resp = api.fn(req)
        except Closing:
            raise
        except Exception as e:
            raise self._failed(api, frame, c, e) from None
        return self._answer(api, frame, resp)

    async def _handle_async(self, api: Api, frame: Frame, c: Conn, body: Any
                            ) -> tuple[bytes | None, dict]:
        req = Request(self.broker, frame, body, c.peer, c.data, c.session)
        try:
            resp = await api.fn(req)
        except Closing:
            raise
        except Exception as e:
            raise self._failed(api, frame, c, e) from None
        return self._answer(api, frame, resp)

    def _failed(self, api: Api, frame: Frame, c: Conn, e: Exception) -> Closing:
        self.say(("failed", api.name, type(e).__name__), logging.ERROR,
                 "%s v%d from %s failed", api.name, frame.api_version, c.peer, exc_info=e)
        return Closing(f"{api.name} failed: {type(e).__name__}: {e}", "internal")

    def _answer(self, api: Api, frame: Frame, resp: Any) -> tuple[bytes | None, dict]:
        if resp is None:
            return None, {}
        errors = self.meters.errors_in(frame.api_key, resp)
        try:
            out = self.broker.messages.encode(frame.api_key, frame.api_version,
                                              frame.correlation_id, resp)
        except Exception as e:  # a handler's bug: this client only
            log.exception("%s v%d response cannot be encoded", api.name, frame.api_version)
            raise Closing(f"{api.name} response not encodable: {type(e).__name__}",
                          "internal") from None
        return out, errors

    def _unsupported(self, frame: Frame, unknown: bool, peer: str) -> bytes:
        """Kafka's answer to an API or version not served: ApiVersions answers v0 with
        UNSUPPORTED_VERSION and the APIs served (the client then asks again); any other API
        gets its response with UNSUPPORTED_VERSION where it has a top-level error code."""
        m = self.broker.messages
        if frame.api_key == API_VERSIONS:
            from .api_meta import api_versions_body

            body = api_versions_body(m.response[API_VERSIONS], 0, codes.UNSUPPORTED_VERSION)
            return m.encode(API_VERSIONS, 0, frame.correlation_id, body)
        cls = m.response.get(frame.api_key)
        if cls is None or frame.api_version > cls.max_version or "error_code" not in cls.fields:
            what = "an unknown API" if cls is None else "an API not served"
            raise Closing(f"{what} (key {frame.api_key} v{frame.api_version}); this server "
                          "answers the APIs its ApiVersions lists", "unsupported")
        try:
            return m.encode(frame.api_key, frame.api_version, frame.correlation_id,
                            cls(version=frame.api_version,
                                error_code=codes.UNSUPPORTED_VERSION))
        except Exception as e:  # (a response with required fields beside its error code)
            raise Closing(f"an API not served (key {frame.api_key} v{frame.api_version}): "
                          f"{type(e).__name__}", "unsupported") from None

    # ---------------------------------------------------------------- what it shows
    def snapshot(self) -> dict[str, Any]:
        """Totals since start, and what is open now (the status line takes deltas)."""
        return self.meters.snapshot(self.listener, len(self.conns), self.in_flight)


def _peer(writer: asyncio.StreamWriter) -> tuple[str, str]:
    p = writer.get_extra_info("peername")
    if isinstance(p, tuple) and len(p) >= 2:
        return (f"[{p[0]}]:{p[1]}" if ":" in str(p[0]) else f"{p[0]}:{p[1]}"), str(p[0])
    return str(p), str(p)


def quiet_asyncio() -> None:
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
