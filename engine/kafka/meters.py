"""What ``rivven serve`` counts and shows: every request in the engine's meter
(``rivven_kafka_*``: per API, bytes in and out, duration, per error code), connections
(opened, closed by reason, open), ACL refusals, the groups by state; once per request or
connection, never per record. The error codes of an answer are found by walking the paths to
every ``error_code`` of its response schema (worked out once per API). ``snapshot()`` is what
the status line of ``rivven serve`` shows (its rates are deltas of two)."""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from . import codes
from .broker import Broker
from .protocol import Frame
from .registry import APIS, Request
from .throttle import Throttle

log = logging.getLogger("rivven.serve")
# Kafka's consumer group states (the group coordinator fills rivven_kafka_groups)
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


class Stats:
    """This server's totals since it started (the status line's rates are their deltas)."""

    __slots__ = ("requests", "bytes_in", "bytes_out", "errors", "opened", "closed",
                 "produce_requests", "produce_bytes", "fetch_requests", "fetch_bytes")

    def __init__(self) -> None:
        self.requests = self.bytes_in = self.bytes_out = self.errors = 0
        self.opened = self.closed = 0
        self.produce_requests = self.produce_bytes = self.fetch_requests = self.fetch_bytes = 0


class Meters:
    """A server's counts: its handles in the engine's meter (made once per API or label),
    its ``Stats``; ``say`` logs refusals, ``said`` error answers (both rate-limited)."""

    def __init__(self, broker: Broker, say: Throttle, said: Throttle) -> None:
        self.broker = broker
        self.say = say
        self.said = said
        meter = broker.engine.meter
        self.meter = meter
        self.stats = Stats()
        self.m_open = meter.get("rivven_kafka_connections")
        self.m_opened = meter.get("rivven_kafka_connections_opened_total")
        self._by_api: dict[str, tuple[Any, Any, Any, Any]] = {}
        self._error_paths: dict[int, list[tuple[str, ...]]] = {}
        self._groups_seen: set[str] = set()

    # ---------------------------------------------------------------- connections
    def opened(self) -> None:
        self.stats.opened += 1
        self.m_opened.inc()

    def open_now(self, n: int) -> None:
        self.m_open.set(n)

    def closed(self, kind: str) -> None:
        self.stats.closed += 1
        self.meter.get("rivven_kafka_connections_closed_total", reason=kind).inc()

    def denied(self, req: Request, op: str, rtype: str, name: str) -> None:
        """(any thread) An ACL refusal: counted, and logged rate-limited with who and what
        (never a secret: principal, address, operation, resource)."""
        self.meter.get("rivven_kafka_authorization_denied_total", operation=op,
                       resource_type=rtype).inc()
        s = req.session
        api = APIS.get(req.frame.api_key)
        self.say(("denied", s.principal, op, rtype), logging.WARNING,
                 "denied %s from %s: %s on %s %r (%s)", s.principal, req.peer, op, rtype,
                 name[:200], api.name if api is not None else req.frame.api_key)

    # ---------------------------------------------------------------- requests
    def api_name(self, key: int) -> str:
        """The name a request of an API rivven does not serve is counted under."""
        cls = self.broker.messages.request.get(key)
        return cls.__name__.removesuffix("Request") if cls is not None else "unknown"

    def errors_in(self, api_key: int, resp: Any) -> collections.Counter[int]:
        """The error codes of a response (other than 0) and how often each."""
        errors: collections.Counter[int] = collections.Counter()
        for path in self.paths(api_key):
            _walk(resp, path, 0, errors)
        return errors

    def paths(self, api_key: int) -> list[tuple[str, ...]]:
        """The paths to every ``error_code`` in the response of ``api_key`` (once per key)."""
        paths = self._error_paths.get(api_key)
        if paths is None:
            paths = []
            cls = self.broker.messages.response.get(api_key)
            if cls is not None:
                _error_paths(cls.fields, (), paths)
            self._error_paths[api_key] = paths
        return paths

    def count(self, name: str, nin: int, out: bytes | None, errors: dict[int, int],
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

    def log_errors(self, name: str, frame: Frame, peer: str, errors: dict[int, int]) -> None:
        for code, n in errors.items():
            self.said(("answered", name, code), logging.INFO, "%s v%d from %s answered %s%s",
                     name, frame.api_version, peer, code_name(code), f" x{n}" if n > 1 else "")

    # ---------------------------------------------------------------- what it shows
    def snapshot(self, listener: str, connections: int, in_flight: int) -> dict[str, Any]:
        """Totals since start, and what is open now (the status line takes deltas)."""
        s = self.stats
        groups = self.group_states()
        return {"time": time.monotonic(), "listener": listener,
                "connections": connections, "in_flight": in_flight,
                **{k: getattr(s, k) for k in Stats.__slots__},
                **self.records(),
                "groups": groups}

    def records(self) -> dict[str, float]:
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

