"""The listener: connections, frames, limits, dispatch, shutdown.

One asyncio event loop reads and writes every connection (``Connection``: each request frame
received straight into a buffer of its size); a request that touches the data dir runs on
the broker's thread pool. A connection's requests are answered in order, one at a time as
Kafka's broker does, except that requests are read up to READ_AHEAD ahead of their answers
and Produce requests waiting one after the other are handled as one (their batches stored
at once: one WAL fsync; a client pipelines Produce requests). A frame larger than
``socket.request.max.bytes``, a malformed header or body, or an API the server does not
know closes that connection only, with a log line naming the client; an API or version it
knows but does not serve gets Kafka's error answer. Bytes read but not yet answered are
bounded for all connections together (``queued.max.request.bytes``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from . import codes
from .broker import Broker
from .protocol import Frame
from .registry import APIS, Request

log = logging.getLogger("rivven.serve")
API_VERSIONS = 18
PRODUCE = 0
# requests read from a connection ahead of their answers: a client's pipelined Produce
# requests that wait are stored together (Kafka's broker reads one, then mutes the channel)
READ_AHEAD = 32


class Closing(Exception):
    """Close this connection (the reason is logged)."""


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.max_frame = cfg.socket_request_max_bytes
        self.idle_s = cfg.connections_max_idle_ms / 1000
        self._budget_left = cfg.request_budget()
        self._budget_waiters: list[asyncio.Future[None]] = []
        self.connections: set[Connection] = set()
        self.in_flight = 0
        self.stopping = False
        self._server: asyncio.base_events.Server | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.requests = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Connection(self), host, port,
                                                backlog=1024)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish (their answers sent), close."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        for c in list(self.connections):
            c.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)

    # ---------------------------------------------------------------- the byte budget
    def take_now(self, size: int) -> bool:
        """Take ``size`` bytes of the budget if they are there (one frame may always be
        read: else a frame above the budget would wait for ever)."""
        if self._budget_left >= size or self.in_flight == 0:
            self._budget_left -= size
            self.in_flight += 1
            self._idle.clear()
            return True
        return False

    async def take(self, size: int) -> None:
        loop = asyncio.get_running_loop()
        while not self.take_now(size):
            waiter = loop.create_future()
            self._budget_waiters.append(waiter)
            await waiter

    def give(self, size: int) -> None:
        self._budget_left += size
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()
        waiters, self._budget_waiters = self._budget_waiters, []
        for w in waiters:  # (each looks again)
            if not w.done():
                w.set_result(None)

    # ---------------------------------------------------------------- answering
    async def answer(self, c: Connection) -> None:
        """Answer a connection's requests in order; Produce requests waiting one after the
        other are handled as one (``api_produce.produce_group``: one WAL fsync for all)."""
        queue = c.queue
        held: tuple[memoryview, int] | None = None
        closing = False
        try:
            while True:
                item = held if held is not None else await queue.get()
                held = None
                if item is None:
                    return
                group = [item]
                if _produce(item[0]):
                    while not queue.empty():
                        nxt = queue.get_nowait()
                        if nxt is None or not _produce(nxt[0]):
                            held = nxt
                            break
                        group.append(nxt)
                try:
                    if closing:
                        continue
                    error = None
                    if len(group) > 1:
                        outs, error = await self._produce_group([d for d, _ in group], c.peer,
                                                                c.conn)
                    else:
                        outs = [await self._request(group[0][0], c.peer, c.conn)]
                    for out in outs:
                        if out is not None:
                            c.write(out)
                    await asyncio.wait_for(c.drain(), self.idle_s)
                    if error is not None:
                        raise error
                except Closing as e:
                    log.warning("closing %s: %s", c.peer, e)
                    closing = True
                    c.close()
                except (ConnectionError, TimeoutError):
                    closing = True
                    c.close()
                finally:
                    for _, size in group:
                        self.give(size)
                        c.answered()
        finally:
            for it in (held, *_drain(queue)):
                if it is not None:
                    self.give(it[1])
            c.close()

    async def _request(self, data: memoryview, peer: str, conn: dict) -> bytes | None:
        b = self.broker
        try:
            frame = b.messages.read_header(data)
        except ValueError as e:
            raise Closing(f"malformed request header: {e}") from None
        self.requests += 1
        api = APIS.get(frame.api_key)
        if api is None or not api.min_version <= frame.api_version <= api.max_version:
            return self._unsupported(frame, api is None)
        try:
            body = b.messages.decode(frame)
        except Exception as e:  # the generated decoder raises several kinds
            raise Closing(f"malformed {api.name} v{frame.api_version} request "
                          f"(correlation id {frame.correlation_id}): "
                          f"{type(e).__name__}: {e}") from None
        req = Request(b, frame, body, peer, conn)
        try:
            if api.blocking:
                resp = await b.call(api.fn, req)
            else:
                resp = await api.fn(req)
        except Closing:
            raise
        except Exception as e:
            log.exception("%s v%d from %s failed", api.name, frame.api_version, peer)
            raise Closing(f"{api.name} failed: {type(e).__name__}: {e}") from None
        if resp is None:
            return None
        try:
            return b.messages.encode(frame.api_key, frame.api_version, frame.correlation_id,
                                     resp)
        except Exception as e:  # a handler's bug: this client only
            log.exception("%s v%d response to %s cannot be encoded", api.name,
                          frame.api_version, peer)
            raise Closing(f"{api.name} response not encodable: {type(e).__name__}") from None

    async def _produce_group(self, datas: list[memoryview], peer: str, conn: dict
                             ) -> tuple[list[bytes | None], Closing | None]:
        """Produce requests read one after the other, stored at once (one WAL fsync): their
        answers, in order, and what closes the connection after them (a malformed one: those
        before it are answered, it and those after it are not)."""
        from .api_produce import produce_group

        b = self.broker
        reqs = []
        error = None
        for data in datas:
            try:
                frame = b.messages.read_header(data)
            except ValueError as e:
                error = Closing(f"malformed request header: {e}")
                break
            self.requests += 1
            try:
                body = b.messages.decode(frame)
            except Exception as e:  # the generated decoder raises several kinds
                error = Closing(f"malformed Produce v{frame.api_version} request "
                                f"(correlation id {frame.correlation_id}): "
                                f"{type(e).__name__}: {e}")
                break
            reqs.append(Request(b, frame, body, peer, conn))
        if not reqs:
            return [], error
        try:
            resps = await b.call(produce_group, reqs)
        except Exception as e:
            log.exception("Produce from %s failed", peer)
            raise Closing(f"Produce failed: {type(e).__name__}: {e}") from None
        out: list[bytes | None] = []
        for req, resp in zip(reqs, resps):
            f = req.frame
            out.append(None if resp is None else
                       b.messages.encode(f.api_key, f.api_version, f.correlation_id, resp))
        return out, error

    def _unsupported(self, frame: Frame, unknown: bool) -> bytes:
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
                          "answers the APIs its ApiVersions lists")
        log.info("%s v%d (key %d) is not served: answered UNSUPPORTED_VERSION",
                 cls.name, frame.api_version, frame.api_key)
        return m.encode(frame.api_key, frame.api_version, frame.correlation_id,
                        cls(version=frame.api_version, error_code=codes.UNSUPPORTED_VERSION))


class Connection(asyncio.BufferedProtocol):
    """One client connection: each request frame is received straight into a buffer of its
    own size (no stream buffer, no copies), once the budget has its bytes; up to READ_AHEAD
    requests are read ahead of their answers (then reading pauses), which ``Server.answer``
    writes in order. A frame larger than ``socket.request.max.bytes``, an idle connection
    (``connections.max.idle.ms`` without a request) or a client that does not read its
    answers for as long is closed."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peer = "?"
        self.conn: dict[str, Any] = {}
        self.queue: asyncio.Queue[tuple[memoryview, int] | None] = asyncio.Queue()
        self.transport: asyncio.Transport | None = None
        self._head = bytearray(4)
        self._frame: bytearray | None = None
        self._size = 0
        self._got = 0
        self._ahead = 0  # requests read, not yet answered
        self._paused = 0  # why reading is paused: bit 1 the read-ahead, bit 2 the budget
        self._writable: asyncio.Future[None] | None = None  # set while the client lags
        self._idle_timer: asyncio.TimerHandle | None = None
        self._answering: asyncio.Task[None] | None = None
        self._closed = False

    # ---------------------------------------------------------------- asyncio's calls
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = _peer(transport)
        srv = self.server
        if srv.stopping or len(srv.connections) >= srv.broker.config.max_connections:
            log.warning("connection from %s refused: %s", self.peer,
                        "shutting down" if srv.stopping else
                        f"max.connections={srv.broker.config.max_connections} reached")
            self._closed = True
            transport.close()
            return
        srv.connections.add(self)
        self._answering = asyncio.get_running_loop().create_task(srv.answer(self))
        self._arm_idle()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return memoryview(self._head)[self._got:]
        return memoryview(self._frame)[self._got:]

    def buffer_updated(self, nbytes: int) -> None:
        self._got += nbytes
        self._arm_idle()
        if self._frame is None:
            if self._got < 4:
                return
            size = int.from_bytes(self._head, "big", signed=True)
            srv = self.server
            if not 8 <= size <= srv.max_frame:
                log.warning("closing %s: a request frame of %d bytes (socket.request."
                            "max.bytes=%d)", self.peer, size, srv.max_frame)
                self.close()
                return
            self._size, self._got = size, 0
            if srv.take_now(size):
                self._frame = bytearray(size)
            else:  # (wait for the budget, reading paused)
                self._pause(2)
                asyncio.get_running_loop().create_task(self._wait_budget(size))
            return
        if self._got < self._size:
            return
        frame, size = self._frame, self._size
        self._frame, self._got = None, 0
        self._ahead += 1
        if self._ahead >= READ_AHEAD:
            self._pause(1)
        self.queue.put_nowait((memoryview(frame), size))

    def eof_received(self) -> bool:
        self.queue.put_nowait(None)  # (what was read is still answered, then closed)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self.server.connections.discard(self)
        self.queue.put_nowait(None)
        if self._frame is not None:  # (a frame cut short: its bytes back to the budget)
            self._frame = None
            self.server.give(self._size)
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # ---------------------------------------------------------------- for Server.answer
    def write(self, data: bytes) -> None:
        if not self._closed and self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        if self._closed:
            raise ConnectionResetError("connection closed")
        w = self._writable
        if w is not None and not w.done():
            await asyncio.shield(w)

    def answered(self) -> None:
        self._ahead -= 1
        if self._ahead < READ_AHEAD:
            self._resume(1)

    def close(self) -> None:
        if self.transport is not None and not self._closed:
            self._closed = True
            self.transport.close()

    # ---------------------------------------------------------------- inside
    async def _wait_budget(self, size: int) -> None:
        await self.server.take(size)
        if self._closed:
            self.server.give(size)
            return
        self._frame = bytearray(size)
        self._resume(2)

    def _pause(self, why: int) -> None:
        if not self._paused and self.transport is not None and not self._closed:
            self.transport.pause_reading()
        self._paused |= why

    def _resume(self, why: int) -> None:
        if not self._paused & why:
            return
        self._paused &= ~why
        if not self._paused and self.transport is not None and not self._closed:
            self.transport.resume_reading()

    def _arm_idle(self) -> None:
        loop = asyncio.get_running_loop()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._idle_timer = loop.call_later(self.server.idle_s, self._idle)

    def _idle(self) -> None:
        if self._ahead:  # (a request in hand: it is the client's answer that is late)
            self._arm_idle()
            return
        log.info("closing %s: idle for connections.max.idle.ms", self.peer)
        self.close()


def _produce(data: memoryview) -> bool:
    """A Produce request of a version served (its frame's first bytes: key, version)."""
    if len(data) < 4 or int.from_bytes(data[0:2], "big") != PRODUCE:
        return False
    api = APIS.get(PRODUCE)
    return api is not None and api.min_version <= int.from_bytes(data[2:4], "big") <= \
        api.max_version


def _drain(queue: asyncio.Queue) -> list:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def _peer(transport: asyncio.BaseTransport) -> str:
    p = transport.get_extra_info("peername")
    return f"{p[0]}:{p[1]}" if isinstance(p, tuple) and len(p) >= 2 else str(p)


def quiet_asyncio() -> None:
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
