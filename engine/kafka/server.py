"""The listener: connections, frames, limits, dispatch, metrics, shutdown.

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

Every request counts in the engine's meter (``rivven_kafka_*``: per API, per error code;
connections opened, closed by reason, open), once per request or connection, never per
record; ``snapshot()`` is what the status line of ``rivven serve`` shows."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import ssl
import time
from typing import Any

from ..errors import plural
from . import codes, sasl, tls
from .broker import Broker
from .listeners import Listener
from .protocol import Frame
from .registry import APIS, Api, Request, Session

log = logging.getLogger("rivven.serve")
API_VERSIONS = 18
# a frame larger than this is decoded off the event loop (see above)
DECODE_ON_LOOP = 256 << 10
# a connection's reader buffers at most 2 x this of input nobody asked for yet (then its
# socket is paused: the kernel holds the rest), and reads at most this at a time
READ_LIMIT = 32 << 10
RECV_SIZE = 64 << 10
# Kafka's consumer group states (the group coordinator fills rivven_kafka_groups)
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
# what a connection is doing (the idle sweep closes one idle, reading or writing too long)
IDLE, WAITING, READING, BUSY, WRITING = range(5)


class Closing(Exception):
    """Close this connection: ``kind`` is the reason's label in the metrics, the message the
    log line's reason."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind


class Conn:
    __slots__ = ("peer", "ip", "reader", "writer", "transport", "state", "since", "size",
                 "unsent", "got", "kind", "why", "data", "task", "waiting", "session")

    def __init__(self, peer: str, ip: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.peer = peer
        self.ip = ip
        self.reader = reader
        self.writer = writer
        self.transport: Any = writer.transport
        self.state = IDLE
        self.since = 0.0
        self.size = 0
        self.unsent = 0  # (writing: bytes of answers not yet taken by the socket)
        self.got = 0  # (reading: bytes of the frame received so far)
        self.kind: str | None = None  # why it closed (set by whoever closes it)
        self.why: str | None = None
        self.data: dict[str, Any] = {}  # handlers' per-connection state (Request.conn)
        self.task: asyncio.Task | None = None
        self.waiting = False  # in an async handler (a long poll: cancelled if it goes away)
        self.session = Session(ip)  # who it is (the listener and SASL set it)

    def close(self, kind: str, why: str) -> None:
        """Close it now (its reader or writer wakes with an error), recording why."""
        if self.kind is None:
            self.kind, self.why = kind, why
        self.transport.abort()


class Throttle:
    """Log lines by key, at most ``burst`` at once and then ``rate`` a second (a token
    bucket: a flood of bad clients does not flood the log); ``flush()`` (called every
    second or so) says how many were left out, with the last of them."""

    def __init__(self, burst: int = 20, rate: float = 1.0, every_s: float = 5.0) -> None:
        self.burst = burst
        self.rate = rate
        self.every_s = every_s
        self.tokens: dict[Any, tuple[float, float]] = {}  # key -> (tokens, when)
        self.left_out: dict[Any, tuple[int, int, str, float]] = {}  # n, level, last, since

    def __call__(self, key: Any, level: int, msg: str, *args: Any, exc_info: Any = None
                 ) -> None:
        now = time.monotonic()
        tokens, when = self.tokens.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - when) * self.rate)
        if tokens >= 1:
            if len(self.tokens) > 10_000:  # (keys are few; never let this grow)
                self.tokens.clear()
            self.tokens[key] = (tokens - 1, now)
            log.log(level, msg, *args, exc_info=exc_info)
            return
        self.tokens[key] = (tokens, now)
        n, _, _, since = self.left_out.get(key, (0, level, "", now))
        if len(self.left_out) < 10_000:
            self.left_out[key] = (n + 1, level, msg % args if args else msg, since)

    def flush(self) -> None:
        now = time.monotonic()
        for key, (n, level, last, since) in list(self.left_out.items()):
            if now - since >= self.every_s:
                del self.left_out[key]
                log.log(level, "%d more like this not logged in the last %.0f s; the last: %s",
                        n, now - since, last)


class Stats:
    """This server's totals since it started (the status line's rates are their deltas)."""

    __slots__ = ("requests", "bytes_in", "bytes_out", "errors", "opened", "closed",
                 "produce_requests", "produce_bytes", "fetch_requests", "fetch_bytes")

    def __init__(self) -> None:
        self.requests = self.bytes_in = self.bytes_out = self.errors = 0
        self.opened = self.closed = 0
        self.produce_requests = self.produce_bytes = self.fetch_requests = self.fetch_bytes = 0


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
        self.stats = Stats()
        self.listener = ""
        self.say = Throttle()  # closes, refusals, failures
        # error answers: part of a client's normal flow too (a rebalance, a topic not made
        # yet): a few lines, then one per key every 10 s
        self.said = Throttle(burst=5, rate=0.1, every_s=60.0)
        meter = broker.engine.meter
        self.meter = meter
        self.m_open = meter.get("rivven_kafka_connections")
        self.m_opened = meter.get("rivven_kafka_connections_opened_total")
        self._by_api: dict[str, tuple[Any, Any, Any, Any]] = {}
        self._error_paths: dict[int, list[tuple[str, ...]]] = {}
        self._groups_seen: set[str] = set()
        broker.on_denied = self._denied

    @property
    def connections(self) -> int:
        return len(self.conns)

    async def start(self, listeners: list[Listener]) -> list[tuple[str, int]]:
        """Listen on each listener (its port 0: a free one, then set on it): the bound
        addresses, in order."""
        self.listeners = listeners
        self._shaking: set[Conn] = set()  # (in a TLS handshake)
        self._drop_soon: asyncio.TimerHandle | None = None
        self._tls_failures: dict[Conn, ssl.SSLError] = {}  # (of those in _shaking)
        self._servers: list[asyncio.base_events.Server] = []
        self._mappers = {x.name: tls.PrincipalMapper(self.broker.config.listener_value(
            x.name, "ssl.principal.mapping.rules")) for x in listeners if x.tls}
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
        self.stats.opened += 1
        self.m_opened.inc()
        refused = self._refusal(ip)
        if refused is not None:
            self._closed("refused")
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
        self.m_open.set(len(self.conns))
        try:
            if listener.tls:
                await self._handshake(c, listener)  # (no await before it: see there)
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
            self.m_open.set(len(self.conns))
            kind = c.kind or "client"
            self._closed(kind)
            if c.why:
                level = logging.INFO if kind in ("idle", "shutdown") else logging.WARNING
                self.say(("closing", kind), level, "closing %s: %s", peer, c.why)
            if kind == "shutdown" or (kind == "client" and
                                      not transport.get_write_buffer_size()):
                transport.close()  # (flushes what was written)
            else:  # (a client gone with answers unsent: they would be held for ever)
                transport.abort()

    async def _handshake(self, c: Conn, listener: Listener) -> None:
        """The TLS handshake of a connection to an SSL or SASL_SSL listener, bounded by
        ``ssl.handshake.timeout.ms``; then the principal of its client certificate. A
        failure (garbage, an untrusted or missing certificate, too slow, no mapping rule)
        is counted and logged, and closes the connection. It must begin before anything is
        awaited: the client's hello must reach TLS, not the stream reader."""
        if getattr(c.reader, "_buffer", b""):  # (the hello was read as plain bytes)
            raise Closing("its TLS hello was read before the handshake", "malformed")
        timeout = self.broker.config.listener_value(listener.name, "ssl.handshake.timeout.ms")
        secs = int(timeout) / 1000
        c.state, c.since = READING, asyncio.get_running_loop().time()
        why = None
        cls = listener.context.sslobject_class
        if getattr(cls, "on_failure", True) is None:  # (a context of tls.server_context)
            cls.on_failure = self._tls_failed
        self._shaking.add(c)
        try:
            # (awaited here, not in a task of its own as wait_for would: the hello must not
            # be read by the stream reader in between; asyncio bounds the handshake's time)
            await c.writer.start_tls(listener.context, ssl_handshake_timeout=secs)
        except TimeoutError:
            why = f"no TLS handshake in ssl.handshake.timeout.ms={timeout}"
        except ssl.SSLError as e:
            why = f"TLS handshake failed: {getattr(e, 'reason', None) or e}"
        except (ConnectionError, OSError, asyncio.IncompleteReadError, AttributeError) as e:
            # (AttributeError: asyncio 3.11's start_tls when the connection was lost first)
            why = ("no TLS handshake in ssl.handshake.timeout.ms=" + str(timeout)
                   if "taking longer" in str(e) else f"TLS handshake cut off: "
                   f"{type(e).__name__}{f': {e}' if str(e) else ''}")
        finally:
            self._shaking.discard(c)
            failed = self._tls_failures.pop(c, None)
        if failed is not None:  # (the reason OpenSSL gave, the client gone after the alert)
            why = f"TLS handshake failed: {getattr(failed, 'reason', None) or failed}"
        if why is None:
            c.transport = c.writer.transport
            if c.kind is not None:  # (closed while it shook hands: a stop)
                raise ConnectionResetError()
            ssl_object = c.writer.get_extra_info("ssl_object")
            try:
                # (SSL: the certificate says who it is; SASL_SSL: SASL does, after this)
                principal = (tls.peer_principal(ssl_object, self._mappers[listener.name])
                             if listener.protocol == "SSL" else
                             "" if ssl_object.getpeercert(binary_form=True) else None)
            except ValueError as e:
                why = f"its client certificate has no principal: {e}"
            else:
                if principal is not None:
                    if principal:
                        c.session.principal = principal
                        self.said(("tls-principal", listener.name, principal), logging.INFO,
                                  "TLS client certificate from %s on listener %s: %s", c.peer,
                                  listener.name, principal[:200])
                    self.meter.get("rivven_kafka_authentications_total", mechanism="TLS",
                                   result="success").inc()
                c.state, c.since = IDLE, asyncio.get_running_loop().time()
                return
        if c.kind is not None:  # (the stop or the sweep closed it: not the client's fault)
            raise ConnectionResetError()
        self.meter.get("rivven_kafka_authentications_total", mechanism="TLS",
                       result="failure").inc()
        self.say(("tls", listener.name), logging.WARNING, "TLS from %s on listener %s: %s",
                 c.peer, listener.name, why[:300])
        c.kind, c.why = "authentication", ""
        c.transport.abort()
        raise ConnectionResetError()

    def _tls_failed(self, obj: ssl.SSLObject, e: ssl.SSLError) -> None:
        """(tls.AlertingSSLObject) A handshake failed, its alert on its way: its reason
        kept for the log line, and in a moment the connection closed if its client has not
        closed it yet."""
        for c in self._shaking:
            if getattr(c.transport.get_protocol(), "_sslobj", None) is obj:
                self._tls_failures[c] = e
                break
        if self._drop_soon is None:
            self._drop_soon = asyncio.get_running_loop().call_later(0.5, self._drop_failed)

    def _drop_failed(self) -> None:
        self._drop_soon = None
        for c in list(self._shaking):
            if c in self._tls_failures:
                c.transport.abort()

    def _refusal(self, ip: str) -> str | None:
        cfg = self.broker.config
        if self.stopping:
            return "shutting down"
        if len(self.conns) >= cfg.max_connections:
            return f"max.connections={cfg.max_connections} reached"
        if self.per_ip[ip] >= cfg.max_connections_per_ip:
            return f"max.connections.per.ip={cfg.max_connections_per_ip} reached for {ip}"
        return None

    def _closed(self, kind: str) -> None:
        self.stats.closed += 1
        self.meter.get("rivven_kafka_connections_closed_total", reason=kind).inc()

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
            self._count("unknown", len(data), None, {}, t0)
            raise Closing(f"a malformed request header: {e}") from None
        refused = sasl.gate(c, frame.api_key, frame.api_version)
        if refused is not None:
            raise Closing(*refused)
        api = APIS.get(frame.api_key)
        name = api.name if api is not None else self._api_name(frame.api_key)
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
            self._count(name, len(data), out, errors, t0)
        if errors:
            self._log_errors(name, frame, c.peer, errors)
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

    def _denied(self, req: Request, op: str, rtype: str, name: str) -> None:
        """(any thread) An ACL refusal: counted, and logged rate-limited with who and what
        (never a secret: principal, address, operation, resource)."""
        self.meter.get("rivven_kafka_authorization_denied_total", operation=op,
                       resource_type=rtype).inc()
        s = req.session
        api = APIS.get(req.frame.api_key)
        self.say(("denied", s.principal, op, rtype), logging.WARNING,
                 "denied %s from %s: %s on %s %r (%s)", s.principal, req.peer, op, rtype,
                 name[:200], api.name if api is not None else req.frame.api_key)

    def _failed(self, api: Api, frame: Frame, c: Conn, e: Exception) -> Closing:
        self.say(("failed", api.name, type(e).__name__), logging.ERROR,
                 "%s v%d from %s failed", api.name, frame.api_version, c.peer, exc_info=e)
        return Closing(f"{api.name} failed: {type(e).__name__}: {e}", "internal")

    def _answer(self, api: Api, frame: Frame, resp: Any) -> tuple[bytes | None, dict]:
        if resp is None:
            return None, {}
        errors: collections.Counter[int] = collections.Counter()
        for path in self._paths(frame.api_key):
            _walk(resp, path, 0, errors)
        try:
            out = self.broker.messages.encode(frame.api_key, frame.api_version,
                                              frame.correlation_id, resp)
        except Exception as e:  # a handler's bug: this client only
            log.exception("%s v%d response cannot be encoded", api.name, frame.api_version)
            raise Closing(f"{api.name} response not encodable: {type(e).__name__}",
                          "internal") from None
        return out, errors

    def _paths(self, api_key: int) -> list[tuple[str, ...]]:
        """The paths to every ``error_code`` in the response of ``api_key`` (once per key)."""
        paths = self._error_paths.get(api_key)
        if paths is None:
            paths = []
            cls = self.broker.messages.response.get(api_key)
            if cls is not None:
                _error_paths(cls.fields, (), paths)
            self._error_paths[api_key] = paths
        return paths

    def _api_name(self, key: int) -> str:
        cls = self.broker.messages.request.get(key)
        return cls.__name__.removesuffix("Request") if cls is not None else "unknown"

    def _count(self, name: str, nin: int, out: bytes | None, errors: dict[int, int],
               t0: float) -> None:
        h = self._by_api.get(name)
        if h is None:
            m = self.meter
            h = self._by_api[name] = (
                m.get("rivven_kafka_requests_total", api=name),
                m.get("rivven_kafka_request_bytes_total", api=name),
                m.get("rivven_kafka_response_bytes_total", api=name),
                m.get("rivven_kafka_request_duration_seconds", api=name))
        nin += 4
        nout = len(out) if out is not None else 0
        h[0].inc()
        h[1].inc(nin)
        if nout:
            h[2].inc(nout)
        h[3].observe(time.monotonic() - t0)
        s = self.stats
        s.requests += 1
        s.bytes_in += nin
        s.bytes_out += nout
        if name == "Produce":
            s.produce_requests += 1
            s.produce_bytes += nin
        elif name == "Fetch":
            s.fetch_requests += 1
            s.fetch_bytes += nout
        for code, n in errors.items():
            s.errors += n
            self.meter.get("rivven_kafka_request_errors_total", api=name,
                           code=code_name(code)).inc(n)

    def _log_errors(self, name: str, frame: Frame, peer: str, errors: dict[int, int]) -> None:
        for code, n in errors.items():
            self.said(("answered", name, code), logging.INFO, "%s v%d from %s answered %s%s",
                     name, frame.api_version, peer, code_name(code), f" x{n}" if n > 1 else "")

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
        s = self.stats
        groups = self.group_states()
        return {"time": time.monotonic(), "listener": self.listener,
                "connections": len(self.conns), "in_flight": self.in_flight,
                **{k: getattr(s, k) for k in Stats.__slots__},
                **self._records(),
                "groups": groups}

    def _records(self) -> dict[str, float]:
        """Records appended and read by this process (the engine's own counts)."""
        got = {"records_in": 0.0, "records_out": 0.0}
        try:
            for name, _labels, vals in self.meter.values():
                if name == "rivven_records_appended_total":
                    got["records_in"] += vals[0]
                elif name == "rivven_records_read_total":
                    got["records_out"] += vals[0]
        except Exception:  # (the status line never stops the server)
            pass
        return got

    def group_states(self) -> dict[str, int] | None:
        """Groups by state from the group coordinator's hook (``Broker.group_states``), set
        into ``rivven_kafka_groups``; None when there is no coordinator."""
        hook = self.broker.group_states
        if hook is None:
            return None
        try:
            states = {str(k): int(v) for k, v in hook().items()}
        except Exception:
            log.exception("the group coordinator's group_states failed")
            return None
        for state in {*GROUP_STATES, *self._groups_seen, *states}:
            self.meter.get("rivven_kafka_groups", state=state).set(max(0, states.get(state, 0)))
        self._groups_seen.update(states)
        return states


def _error_paths(fields: dict[str, Any], prefix: tuple[str, ...],
                 out: list[tuple[str, ...]]) -> None:
    for name, f in fields.items():
        if name == "error_code":
            out.append((*prefix, name))
        elif f.is_struct_array() or f.is_struct():
            _error_paths(f.fields, (*prefix, name), out)


def _walk(obj: Any, path: tuple[str, ...], i: int, acc: collections.Counter[int]) -> None:
    v = getattr(obj, path[i], None)
    if v is None:
        return
    if i == len(path) - 1:
        if v:
            acc[v] += 1
    elif isinstance(v, list):
        for x in v:
            _walk(x, path, i + 1, acc)
    else:
        _walk(v, path, i + 1, acc)


_NAMES = {v: k for k, v in vars(codes).items() if k.isupper() and isinstance(v, int)}


def code_name(code: int) -> str:
    """Kafka's name of an error code (UNKNOWN_TOPIC_OR_PARTITION), its number if unknown."""
    name = _NAMES.get(code)
    if name is None:
        from kafka.errors import for_code

        cls = for_code(code)
        name = _NAMES[code] = (cls.message if cls.errno == code else str(code))
    return name


def _peer(writer: asyncio.StreamWriter) -> tuple[str, str]:
    p = writer.get_extra_info("peername")
    if isinstance(p, tuple) and len(p) >= 2:
        return (f"[{p[0]}]:{p[1]}" if ":" in str(p[0]) else f"{p[0]}:{p[1]}"), str(p[0])
    return str(p), str(p)


def quiet_asyncio() -> None:
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
