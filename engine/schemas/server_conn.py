"""A connection of the schema registry's HTTP/1.1 listener (``server``): an
``asyncio.Protocol`` on httptools' parser (llhttp), and the answers as bytes.

- Keep-alive (HTTP/1.1's default; HTTP/1.0 with ``Connection: keep-alive``), ``Connection:
  close``; pipelined requests answered in order, all the answers to what one read brought
  written at once. Bodies by Content-Length or chunked (llhttp decodes the chunks);
  ``Expect: 100-continue`` answered.
- Bounds (``Limits``): the request line and headers (``max_head``: 431, 414 for the URL
  alone), the body (``max_body``: 413 at once when Content-Length says so), requests read
  ahead of their answers (``max_queued``: reading pauses), answers the client does not read
  (reading pauses while the socket's buffer is full). A request that breaks them, or that
  does not parse (400), is answered and the connection closed after a moment of reading and
  dropping what the client still sends (so that it sees the answer, not a reset).
- Authentication (access.py) and the routes (http.py): requests whose answer needs the
  registry to write, a schema parsed or a password's key derived run on the thread pool
  (``executor``); the others on the loop. A GET's answer kept by the listener is sent again
  while the registry's ``generation`` and the users and ACLs (``Access.state()``) stay the
  same.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.utils
import http
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol

import httptools

from ..errors import plural
from ..security.acl import ANONYMOUS
from .access import CHALLENGE, Access
from .errors import Unauthorized
from .http import (
    CONTENT_TYPE,
    INTERNAL,
    Api,
    Call,
    Registry,
    Response,
    error,
    parse_query,
    registry_error,
)

log = logging.getLogger("rivven.schemas")

GET, HEAD = b"GET", b"HEAD"


@dataclass(frozen=True)
class Limits:
    max_head: int = 32 << 10  # the request line and headers, bytes
    max_body: int = 16 << 20  # a request body, bytes (Confluent's schemas stay far below)
    idle_s: float = 30.0  # a connection without a request (rest-utils' idle.timeout.ms)
    max_queued: int = 64  # pipelined requests read ahead of their answers
    linger_s: float = 2.0  # reading (and dropping) after an answer that closes
    cache_entries: int = 16384  # GET answers kept (then all forgotten at once) ...
    cache_bytes: int = 64 << 20  # ... or past these bytes (an answer over 1/16 is not kept)
    follow_s: float = 0.05  # the registry reads other processes' appends this often
    handshake_s: float = 10.0  # a TLS handshake
# ---------------------------------------------------------------------- answers as bytes
def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


_STATUS: dict[int, bytes] = {}
_TYPE = f"Content-Type: {CONTENT_TYPE}\r\n".encode()


def head_of(status: int, length: int, headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The status line and headers before ``Date`` (which ends them)."""
    line = _STATUS.get(status)
    if line is None:
        line = _STATUS[status] = _status_line(status)
    parts = [line]
    if status != 204:
        parts += [_TYPE, b"Content-Length: %d\r\n" % length]
    for k, v in headers:
        parts.append(f"{k}: {v}\r\n".encode("latin-1", "replace"))
    return b"".join(parts)


class Dates:
    """``Date: ...\\r\\n`` + the connection header + the blank line, made once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.ends: tuple[bytes, bytes, bytes] = (b"", b"", b"")

    def ends_now(self) -> tuple[bytes, bytes, bytes]:
        now = int(time.time())
        if now != self.second:
            d = b"Date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n"
            self.ends = (d + b"\r\n", d + b"Connection: close\r\n\r\n",
                         d + b"Connection: keep-alive\r\n\r\n")
            self.second = now
        return self.ends


class _Refused(Exception):
    """A bound broken while parsing: answer ``response`` and close."""

    def __init__(self, response: Response) -> None:
        self.response = response


# a request as read: method, URL, Authorization, Content-Type, body, keep-alive, HTTP/1.0
Req = tuple[bytes, bytes, bytes | None, bytes | None, bytes, bool, bool]


class Host(Protocol):
    """What a connection uses of its listener (``server.Listener``)."""

    @property
    def api(self) -> Api: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def access(self) -> Access | None: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def executor(self) -> Executor | None: ...
    @property
    def conns(self) -> set[Connection]: ...
    @property
    def cache(self) -> dict[tuple[bytes, str, str], tuple[int, object, bytes, bytes]]: ...
    @property
    def dates(self) -> Dates: ...

    def keep(self, key: tuple[bytes, str, str], gen: int, token: object,
             resp: Response) -> None: ...


# ---------------------------------------------------------------------- a connection
class Connection(asyncio.Protocol):
    def __init__(self, srv: Host) -> None:
        self.srv = srv
        self.limits = srv.limits
        self.t: Any = None
        self.host = ""
        self.parser = httptools.HttpRequestParser(self)
        self.out: list[bytes] = []
        self.queue: collections.deque[Req | Response | None] = collections.deque()
        self.busy = False  # a request of this connection runs on the pool
        self.closing = False  # no more requests are read: the last one said close
        self.close_after = False  # close once what is in ``out`` is written
        self.discarding = False  # lingering: input dropped until the close
        self.writing_paused = False
        self.reading_paused = False
        self.last = time.monotonic()
        # the request being parsed
        self.url = b""
        self.auth: bytes | None = None
        self.ctype: bytes | None = None
        self.body: bytearray | None = None
        self.head_bytes = 0
        self.in_head = False
        self.expect = False
        self.method = b""
        self.v10 = False
        # the last Authorization header's principal, while the users and ACLs stay
        self.m_auth: bytes | None = None
        self.m_principal = ""
        self.m_token: object = None

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        peer = transport.get_extra_info("peername")
        self.host = peer[0] if isinstance(peer, tuple) and peer else ""
        self.srv.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.srv.conns.discard(self)
        self.queue.clear()
        self.out.clear()

    def eof_received(self) -> bool:
        """The client sent all it will (a half-close): answer what it asked, then close."""
        self.closing = True
        if self.busy or self.queue:
            self.queue.append(None)
            return True  # (keep the transport open for the answers)
        return False

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._drain()
        self.send()

    def data_received(self, data: bytes) -> None:
        if self.discarding:
            return
        self.last = time.monotonic()
        was_in_head = self.in_head
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # (answered as any request, then closed: no protocol switch)
            self.closing = True
            if self.busy or self.queue or self.writing_paused:
                self.queue.append(None)
            else:
                self.close_after = True
        except httptools.HttpParserError as e:
            cause = e.__context__
            if self.closing and not isinstance(cause, _Refused):
                pass  # (what follows a request that closes is not read: llhttp says so)
            elif isinstance(cause, _Refused):
                self._refuse(cause.response)
            elif isinstance(cause, Exception):
                log.error("schema registry: a request from %s failed while read", self.host,
                          exc_info=cause)
                self._refuse(INTERNAL)
            else:
                reason = str(e.args[0] if e.args else e).strip() or "malformed request"
                self._refuse(error(400, 400, f"Bad Request: {reason}"))
        else:
            # a header still growing over several reads (httptools keeps it until it ends)
            if was_in_head and self.in_head:
                self.head_bytes += len(data)
                if self.head_bytes > self.limits.max_head:
                    self._refuse(error(431, 431, "Request Header Fields Too Large: the "
                                       f"request line and headers pass {self.limits.max_head} "
                                       "bytes"))
        self.send()

    # ------------------------------------------------------------------ httptools
    def on_message_begin(self) -> None:
        self.url = b""
        self.auth = self.ctype = None
        self.body = None
        self.head_bytes = 0
        self.in_head = True
        self.expect = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_bytes += len(url)
        if self.head_bytes > self.limits.max_head:
            raise _Refused(error(414, 414, "URI Too Long: the request line passes "
                                 + plural(self.limits.max_head, "byte")))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4
        if self.head_bytes > self.limits.max_head:
            raise _Refused(error(431, 431, "Request Header Fields Too Large: the request "
                                 "line and headers pass " + plural(self.limits.max_head, "byte")))
        n = len(name)
        if n == 13:
            if name.lower() == b"authorization":
                self.auth = value
        elif n == 12:
            if name.lower() == b"content-type":
                self.ctype = value
        elif n == 14:
            if name.lower() == b"content-length" and value.strip().isdigit() and \
                    int(value) > self.limits.max_body:
                raise _Refused(self._too_large())
        elif n == 6 and name.lower() == b"expect":
            self.expect = value.strip().lower() == b"100-continue"

    def on_headers_complete(self) -> None:
        self.in_head = False
        self.method = self.parser.get_method()
        self.v10 = self.parser.get_http_version() == "1.0"
        if self.expect and not self.closing and not self.busy and not self.queue \
                and not self.writing_paused:
            self.send()  # (answers before this request's go first)
            self.t.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, chunk: bytes) -> None:
        if self.body is None:
            self.body = bytearray(chunk)
        else:
            self.body += chunk
        if len(self.body) > self.limits.max_body:
            raise _Refused(self._too_large())

    def on_message_complete(self) -> None:
        if self.closing:
            return  # (after a request that closes: nothing more is answered)
        keep = self.parser.should_keep_alive()
        if not keep:
            self.closing = True
        req: Req = (self.method, self.url, self.auth, self.ctype,
                    bytes(self.body) if self.body else b"", keep, self.v10)
        if self.busy or self.queue or self.writing_paused:
            self.queue.append(req)
            if len(self.queue) >= self.limits.max_queued:
                self._reading()
        else:
            self._answer(req)

    def _too_large(self) -> Response:
        return error(413, 413, "Payload Too Large: the request body passes "
                     + plural(self.limits.max_body, "byte"))

    # ------------------------------------------------------------------ answering
    def _answer(self, req: Req | Response | None) -> None:
        """Answer one request (in order: nothing of this connection runs on the pool);
        None: close now."""
        if req is None:
            self.close_after = True
            return
        if isinstance(req, Response):  # (a broken bound, after the answers before it)
            self._emit(req, False, False, False)
            self._linger()
            return
        method, url, auth, ctype, body, keep, v10 = req
        srv = self.srv
        try:
            access = srv.access
            token: object = None
            principal: str | None = ANONYMOUS
            if access is not None:
                token = access.state()
                if access.required:
                    if auth is not None and auth == self.m_auth and token is self.m_token:
                        principal = self.m_principal
                    else:
                        principal = access.remembered(auth)
                        if principal is not None:
                            self.m_auth, self.m_principal, self.m_token = auth, principal, token
                        elif not auth:
                            self._emit(registry_error(
                                Unauthorized("Unauthorized: this registry needs HTTP basic "
                                             "authentication as a rivven user"),
                                (("WWW-Authenticate", CHALLENGE),)), keep, v10, method == HEAD)
                            return
            cached = method == GET or method == HEAD
            if cached and principal is not None:
                hit = srv.cache.get((url, principal, self.host))
                if hit is not None and hit[0] == srv.registry.generation and hit[1] is token:
                    out = self.out
                    out.append(hit[2])
                    out.append(srv.dates.ends_now()[0 if keep and not v10 else 1 if not keep
                                                    else 2])
                    if method == GET:
                        out.append(hit[3])
                    if not keep:
                        self.close_after = True
                    return
            try:
                target = _origin_form(url).decode()
            except UnicodeDecodeError:
                self._emit(error(400, 400, "Bad Request: the URL is not UTF-8"), keep, v10,
                           method == HEAD)
                return
            path, _, qs = target.partition("?")
            found = srv.api.match(method.decode(), path)
            gen = srv.registry.generation
            if isinstance(found, Response) and principal is not None:
                self._emit(found, keep, v10, method == HEAD)
                if cached:
                    srv.keep((url, principal, self.host), gen, token, found)
                return
            query = parse_query(qs)
            ct = ctype.decode("latin-1") if ctype is not None else None
            if principal is None or isinstance(found, Response) or found.blocking:
                self.busy = True
                fut = asyncio.get_running_loop().run_in_executor(
                    srv.executor, self._job, found, query, body, principal, auth, ct)
                fut.add_done_callback(lambda f: self._done(f, req, gen, token))
                return
            resp = srv.api.run(found, query, body, principal, self.host, ct)
            self._emit(resp, keep, v10, method == HEAD)
            if cached:
                srv.keep((url, principal, self.host), gen, token, resp)
        except Exception:
            log.exception("schema registry: a request from %s failed", self.host)
            self._emit(INTERNAL, keep, v10, method == HEAD)

    def _job(self, call: Call | Response, query: dict[str, str], body: bytes,
             principal: str | None, auth: bytes | None, ctype: str | None
             ) -> tuple[Response, str | None]:
        """(a pool thread) Authenticate when needed (before anything, even a path with no
        route, as Confluent's), then the route."""
        if principal is None:
            access = self.srv.access
            assert access is not None
            try:
                principal = access.authenticate(auth)
            except Unauthorized as e:
                return registry_error(e, (("WWW-Authenticate", CHALLENGE),)), None
            except Exception:
                log.exception("schema registry: authenticating a request from %s failed",
                              self.host)
                return INTERNAL, None
        if isinstance(call, Response):
            return call, principal
        return self.srv.api.run(call, query, body, principal, self.host, ctype), principal

    def _done(self, fut: asyncio.Future, req: Req, gen: int, token: object) -> None:
        self.busy = False
        if self.t.is_closing():
            return
        method, url, _, _, _, keep, v10 = req
        try:
            resp, principal = fut.result()
        except Exception:
            log.exception("schema registry: a request from %s failed", self.host)
            resp, principal = INTERNAL, None
        self._emit(resp, keep, v10, method == HEAD)
        if principal is not None and (method == GET or method == HEAD):
            self.srv.keep((url, principal, self.host), gen, token, resp)
        self._drain()
        self.send()

    def _emit(self, resp: Response, keep: bool, v10: bool, head_only: bool) -> None:
        status, body, headers = resp
        out = self.out
        out.append(head_of(status, len(body), headers))
        out.append(self.srv.dates.ends_now()[0 if keep and not v10 else 1 if not keep else 2])
        if body and not head_only:
            out.append(body)
        if not keep:
            self.close_after = True

    def _drain(self) -> None:
        """Answer the requests waiting, in order, until one goes to the pool."""
        q = self.queue
        while q and not self.busy and not self.writing_paused and not self.close_after:
            self._answer(q.popleft())
        self._reading()

    def send(self) -> None:
        out = self.out
        t = self.t
        if out:
            t.write(b"".join(out) if len(out) > 1 else out[0])
            out.clear()
        if self.close_after and not self.discarding:
            t.close()

    def _reading(self) -> None:
        """Read while answers are taken and few requests wait; else let the kernel hold
        the rest."""
        pause = self.writing_paused or len(self.queue) >= self.limits.max_queued
        if pause != self.reading_paused and not self.t.is_closing():
            self.reading_paused = pause
            if pause:
                self.t.pause_reading()
            else:
                self.t.resume_reading()

    def _refuse(self, resp: Response) -> None:
        """A request that breaks a bound or does not parse: its answer after those owed,
        then the connection closes."""
        self.closing = True
        if self.busy or self.queue or self.writing_paused:
            self.queue.append(resp)
        else:
            self._answer(resp)

    def _linger(self) -> None:
        """After an answer that closes on a request not wholly read: stop answering, drop
        what the client still sends for ``linger_s``, then close (so that the client reads
        the answer instead of a reset)."""
        self.discarding = True
        self.close_after = False
        self.queue.clear()
        t = self.t
        self.send()
        if t.is_closing():
            return
        if self.reading_paused:
            self.reading_paused = False
            t.resume_reading()
        if t.can_write_eof():
            with contextlib.suppress(OSError, RuntimeError):
                t.write_eof()
        asyncio.get_running_loop().call_later(self.limits.linger_s, t.close)

    def idle(self, now: float, idle_s: float) -> bool:
        return not self.busy and not self.queue and not self.discarding and \
            now - self.last > idle_s


def _origin_form(url: bytes) -> bytes:
    """The path and query of a request target (an absolute URL: its path)."""
    if url[:1] == b"/":
        return url
    if b"://" in url:
        rest = url.partition(b"://")[2]
        slash = rest.find(b"/")
        return rest[slash:] if slash >= 0 else b"/"
    return url
