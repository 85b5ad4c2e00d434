"""What every handler shares: the engine, the settings, this node's identity (node 0, the
advertised address, the cluster id), the thread pool the engine is called on, and the
wake-up of long-polling fetches when records are appended."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..security.acl import Authorizer
from .config import ServeConfig
from .protocol import Messages

log = logging.getLogger("rivven.serve")
NODE_ID = 0
# how often a waiting Fetch looks again for what other processes appended (this process's
# own appends wake it at once)
POLL_S = 0.02


class Appends:
    """Wakes fetches waiting for records: this process's produce calls ``appended()`` (from
    any thread); a waiter also looks again every ``POLL_S`` for other processes' appends."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def appended(self) -> None:
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), max(0.0, min(timeout, POLL_S)))
        except TimeoutError:
            pass


class Broker:
    def __init__(self, engine: Any, config: ServeConfig, host: str, port: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.config = config
        self.host = host
        self.port = port
        self.node_id = NODE_ID
        self.loop = loop
        self.messages = Messages()
        self.pool = ThreadPoolExecutor(config.num_io_threads, thread_name_prefix="rivven-io")
        self.appends = Appends(loop)
        self.cluster_id = cluster_id(engine.path)
        self.log = log
        self.stopping = False
        self.groups: Any = None  # the group coordinator (engine.kafka.groups), set by the server
        self.txns: Any = None  # transactional ids' producers (engine.kafka.txn), likewise
        self.producer_ids: Any = None  # idempotent producers' ids (api_txn.ProducerIds)
        # the group coordinator sets this: its groups counted by Kafka's state names
        # ({"Stable": 3, "Empty": 1}), read on the event loop about once a second for
        # rivven_kafka_groups and the status line
        self.group_states: Callable[[], Mapping[str, int]] | None = None
        # authorization: on, off, or on when the data dir has ACLs (None)
        self.authorizer_on = config.authorizer_on()
        self.super_users = config.super_user_set()
        # the listener sets this: a refusal counted and logged (principal, address, what)
        self.on_denied: Callable[[Any, str, str, str], None] | None = None
        # the listeners (engine.kafka.listeners.Listener), set by serve(): each answers its
        # own advertised address (endpoint)
        self.listeners: list[Any] = []
        self.insecure = False  # --insecure: PLAIN allowed on a listener without TLS
        self.busy = 0  # calls running on the pool now (a forced stop cannot close under them)
        self._busy_lock = threading.Lock()

    def authorizer(self) -> Authorizer | None:
        """The ACL decision now (the data dir's ACLs as stored, a change by any process
        seen at once), or None when authorization is off (every principal may do
        everything, as a Kafka broker without an authorizer)."""
        if self.authorizer_on is False:
            return None
        auth = self.engine.acls.authorizer(self.super_users,
                                           self.config.allow_everyone_if_no_acl_found)
        if self.authorizer_on is None and not len(auth):
            return None
        return auth

    def endpoint(self, listener: str | None = None) -> tuple[str, int]:
        """The address clients of ``listener`` (a name; None: the first) are told to
        connect to (Metadata, FindCoordinator, DescribeCluster): its advertised one, else
        where it listens (an any-address bind: localhost). Kafka answers the same way, by
        the listener the request came on."""
        for x in self.listeners:
            if listener is None or x.name == listener:
                if x.advertised is not None:  # (port 0: the one it is bound to)
                    return x.advertised[0], x.advertised[1] or x.port
                return (x.host if x.host not in ("", "0.0.0.0", "::") else "localhost",
                        x.port)
        return self.host, self.port

    def advertised(self) -> str:
        """Every listener's advertised address (``HOST:PORT`` for a single one, else
        ``NAME://HOST:PORT`` comma-separated): what ``rivven group describe`` shows."""
        if len(self.listeners) <= 1:
            host, port = self.endpoint()
            return f"{host}:{port}"
        return ",".join(x.url(*self.endpoint(x.name)) for x in self.listeners)

    def denied(self, req: Any, op: str, rtype: str, name: str) -> None:
        if self.on_denied is not None:
            self.on_denied(req, op, rtype, name)

    async def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the thread pool (it calls the engine: blocking I/O)."""
        return await self.loop.run_in_executor(self.pool, self._counted, fn, args)

    def _counted(self, fn: Any, args: tuple) -> Any:
        with self._busy_lock:
            self.busy += 1
        try:
            return fn(*args)
        finally:
            with self._busy_lock:
                self.busy -= 1


def cluster_id(data_dir: str) -> str:
    """A stable cluster id of the data dir (Kafka's 22-character base64 of 16 bytes)."""
    u = uuid.uuid5(uuid.NAMESPACE_URL, "rivven:" + os.path.realpath(data_dir))
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
