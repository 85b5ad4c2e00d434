"""A connection of ``rivven serve`` as the listener's parts see it (server.py, handshake.py,
sasl.py): what it is doing now (the idle sweep closes one idle, reading or writing too
long), who its client is, why it closed; ``Closing``, the exception that closes it."""

from __future__ import annotations

import asyncio
from typing import Any

from .registry import Session

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

