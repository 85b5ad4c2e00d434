"""The APIs served: each a handler registered with its key and the versions it answers. A
handler takes a ``Request`` and returns the response body (a generated message object) or
None (a Produce with acks=0). A blocking handler runs on the broker's thread pool (it calls
the engine); an ``async`` one runs on the event loop (it waits: long-poll Fetch, JoinGroup)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..security.acl import ANONYMOUS, OPERATIONS

if TYPE_CHECKING:
    from ..security.acl import Authorizer
    from .broker import Broker
    from .protocol import Frame


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    fn: Callable[[Request], Any]
    blocking: bool


APIS: dict[int, Api] = {}
_UNSET = object()


def api(key: int, name: str, min_version: int, max_version: int
        ) -> Callable[[Callable[[Request], Any]], Callable[[Request], Any]]:
    """Register the handler of API ``key`` for versions ``min_version..max_version``."""
    def register(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        if key in APIS:
            raise AssertionError(f"API {key} ({name}) registered twice")
        APIS[key] = Api(key, name, min_version, max_version, fn,
                        not inspect.iscoroutinefunction(fn))
        return fn
    return register


class Session:
    """Who is on a connection: the principal (``User:ANONYMOUS`` until a SASL exchange or a
    client certificate says otherwise), the client's address, the listener it came to and
    that listener's security protocol."""

    __slots__ = ("principal", "host", "listener", "protocol", "mechanism", "authenticated",
                 "expires")

    def __init__(self, host: str, listener: str = "PLAINTEXT", protocol: str = "PLAINTEXT",
                 principal: str = ANONYMOUS) -> None:
        self.principal = principal
        self.host = host
        self.listener = listener
        self.protocol = protocol
        self.mechanism: str | None = None  # the SASL mechanism it authenticated with
        # PLAINTEXT and SSL are authenticated by the connection itself; SASL by its exchange
        self.authenticated = not protocol.startswith("SASL_")
        self.expires: float | None = None  # (monotonic) when its SASL session ends


class Request:
    """One request: its frame, its decoded body, the connection it came on, the broker."""

    __slots__ = ("broker", "frame", "body", "peer", "conn", "session", "_auth")

    def __init__(self, broker: Broker, frame: Frame, body: Any, peer: str, conn: Any,
                 session: Session | None = None) -> None:
        self.broker = broker
        self.frame = frame
        self.body = body
        self.peer = peer
        self.conn = conn
        self.session = session if session is not None else Session(peer.rpartition(":")[0])
        self._auth: Any = _UNSET

    @property
    def principal(self) -> str:
        return self.session.principal

    def _authorizer(self) -> Authorizer | None:
        """The ACLs as they are at this request (one look at the file per request)."""
        if self._auth is _UNSET:
            self._auth = self.broker.authorizer()
        return self._auth

    def allowed(self, op: str, rtype: str, name: str, log: bool = True) -> bool:
        """May this request's principal do ``op`` (``Read``...) on the ``rtype`` (``Topic``,
        ``Group``, ``TransactionalId``, ``Cluster``) named ``name``? A refusal is counted and
        logged (rate-limited) unless ``log`` is false (a filter: Metadata of all topics)."""
        auth = self._authorizer()
        if auth is None:
            return True
        s = self.session
        if auth.authorize(s.principal, s.host, op, rtype, name):
            return True
        if log:
            self.broker.denied(self, op, rtype, name)
        return False

    def allowed_any(self, op: str, rtype: str) -> bool:
        """May the principal do ``op`` on some ``rtype`` (Kafka's authorizeByResourceType)."""
        auth = self._authorizer()
        return auth is None or auth.authorize_any(self.session.principal, self.session.host,
                                                  op, rtype)

    def authorized_operations(self, rtype: str, name: str, ops: tuple[str, ...]) -> int:
        """Kafka's bit field of the operations in ``ops`` the principal may do on the
        resource (Metadata's and DescribeCluster's ``*_authorized_operations``)."""
        bits = 0
        for op in ops:
            if self.allowed(op, rtype, name, log=False):
                bits |= 1 << OPERATIONS[op]
        return bits

    @property
    def version(self) -> int:
        return self.frame.api_version

    @property
    def R(self) -> Any:  # noqa: N802  (the response class: R.<NestedType>(...))
        return self.broker.messages.response[self.frame.api_key]

    def respond(self, **fields: Any) -> Any:
        """The response body at this request's version (fields it has no room for dropped)."""
        cls = self.R
        known = cls.fields
        v = self.version
        return cls(version=v, **{k: val for k, val in fields.items()
                                 if k in known and known[k].for_version_q(v)})
