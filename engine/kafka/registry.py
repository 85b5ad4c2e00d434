"""The APIs served: each a handler registered with its key and the versions it answers. A
handler takes a ``Request`` and returns the response body (a generated message object) or
None (a Produce with acks=0). A blocking handler runs on the broker's thread pool (it calls
the engine); an ``async`` one runs on the event loop (it waits: long-poll Fetch, JoinGroup)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


class Request:
    """One request: its frame, its decoded body, the connection it came on, the broker."""

    __slots__ = ("broker", "frame", "body", "peer", "conn")

    def __init__(self, broker: Broker, frame: Frame, body: Any, peer: str, conn: Any) -> None:
        self.broker = broker
        self.frame = frame
        self.body = body
        self.peer = peer
        self.conn = conn

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
