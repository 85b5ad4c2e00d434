"""The listener: connections, frames, limits, dispatch, shutdown.

One asyncio event loop reads and writes every connection; a request that touches the data
dir runs on the broker's thread pool. As Kafka's broker does, a connection's requests are
handled one at a time, in order (a client pipelines; it gets its answers in order). A frame
larger than ``socket.request.max.bytes``, a malformed header or body, or an API the server
does not know closes that connection only, with a log line naming the client; an API or
version it knows but does not serve gets Kafka's error answer. Bytes read but not yet
answered are bounded for all connections together (``queued.max.request.bytes``)."""

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
        self.budget = asyncio.Semaphore(1)  # replaced in start()
        self._budget_left = cfg.request_budget()
        self._budget_cond = asyncio.Condition()
        self.connections: set[asyncio.StreamWriter] = set()
        self.in_flight = 0
        self.stopping = False
        self._server: asyncio.base_events.Server | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.requests = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._connection, host, port,
                                                  limit=1 << 16, backlog=1024)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish (their answers sent), close."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        for w in list(self.connections):
            w.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)

    # ---------------------------------------------------------------- a connection
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                          ) -> None:
        """Read a connection's requests (up to READ_AHEAD ahead of their answers) while
        ``_answer`` handles them in order: a client that pipelines Produce requests has
        those that wait handled together, one WAL fsync for all."""
        peer = _peer(writer)
        if self.stopping or len(self.connections) >= self.broker.config.max_connections:
            log.warning("connection from %s refused: %s", peer,
                        "shutting down" if self.stopping else
                        f"max.connections={self.broker.config.max_connections} reached")
            writer.close()
            return
        self.connections.add(writer)
        conn: dict[str, Any] = {}
        queue: asyncio.Queue[tuple[memoryview, int] | None] = asyncio.Queue()
        ahead = asyncio.Semaphore(READ_AHEAD)
        answering = asyncio.create_task(self._answer(queue, ahead, writer, peer, conn))
        try:
            while not self.stopping and not answering.done():
                try:
                    head = await asyncio.wait_for(reader.readexactly(4), self.idle_s)
                except TimeoutError:
                    log.info("closing %s: idle for connections.max.idle.ms", peer)
                    return
                size = int.from_bytes(head, "big", signed=True)
                if not 8 <= size <= self.max_frame:
                    log.warning("closing %s: a request frame of %d bytes (socket.request."
                                "max.bytes=%d)", peer, size, self.max_frame)
                    return
                await ahead.acquire()
                await self._take(size)
                try:
                    data = await asyncio.wait_for(reader.readexactly(size), self.idle_s)
                except BaseException:
                    await self._give(size)
                    raise
                queue.put_nowait((memoryview(data), size))
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        finally:
            queue.put_nowait(None)  # (what was read is still answered)
            try:
                await answering
            finally:
                self.connections.discard(writer)
                writer.close()

    async def _answer(self, queue: asyncio.Queue[tuple[memoryview, int] | None],
                      ahead: asyncio.Semaphore, writer: asyncio.StreamWriter, peer: str,
                      conn: dict) -> None:
        """Answer a connection's requests in order; Produce requests waiting one after the
        other are handled as one (``api_produce.produce_group``)."""
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
                        outs, error = await self._produce_group([d for d, _ in group], peer,
                                                                conn)
                    else:
                        outs = [await self._request(group[0][0], peer, conn)]
                    for out in outs:
                        if out is not None:
                            writer.write(out)
                    await asyncio.wait_for(writer.drain(), self.idle_s)
                    if error is not None:
                        raise error
                except Closing as e:
                    log.warning("closing %s: %s", peer, e)
                    closing = True
                    writer.close()
                except (ConnectionError, TimeoutError):
                    closing = True
                    writer.close()
                finally:
                    for _, size in group:
                        await self._give(size)
                        ahead.release()
        finally:
            for it in (held, *_drain(queue)):
                if it is not None:
                    await self._give(it[1])

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


def _peer(writer: asyncio.StreamWriter) -> str:
    p = writer.get_extra_info("peername")
    return f"{p[0]}:{p[1]}" if isinstance(p, tuple) and len(p) >= 2 else str(p)


def quiet_asyncio() -> None:
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
