"""The TLS handshake of a connection to an SSL or SASL_SSL listener, the listener's side of
tls.py: bounded by ``ssl.handshake.timeout.ms``, the reason OpenSSL gave for a failure kept
(``AlertingSSLObject`` reports it) and the connection closed soon after its alert left, then
the principal of the client's certificate. Every outcome is counted
(``rivven_kafka_authentications_total{mechanism="TLS"}``) and a failure logged, rate-limited."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from .broker import Broker
from .conn import IDLE, READING, Closing, Conn
from .listeners import Listener
from .throttle import Throttle
from .tls import PrincipalMapper, peer_principal


class Handshakes:
    """A server's connections in a TLS handshake (server.py hands each one to ``shake``
    before it reads anything of it)."""

    def __init__(self, broker: Broker, listeners: list[Listener], meter: Any, say: Throttle,
                 said: Throttle) -> None:
        self.broker = broker
        self.meter = meter
        self.say = say  # (failures)
        self.said = said  # (a certificate's principal)
        self.shaking: set[Conn] = set()
        self.drop_soon: asyncio.TimerHandle | None = None
        self.failures: dict[Conn, ssl.SSLError] = {}  # (of those in shaking)
        self.mappers = {x.name: PrincipalMapper(broker.config.listener_value(
            x.name, "ssl.principal.mapping.rules")) for x in listeners if x.tls}

    async def shake(self, c: Conn, listener: Listener) -> None:
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
        if getattr(cls, "on_failure", True) is None:  # (a context of server_context)
            cls.on_failure = self.failed
        self.shaking.add(c)
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
            self.shaking.discard(c)
            failed = self.failures.pop(c, None)
        if failed is not None:  # (the reason OpenSSL gave, the client gone after the alert)
            why = f"TLS handshake failed: {getattr(failed, 'reason', None) or failed}"
        if why is None:
            c.transport = c.writer.transport
            if c.kind is not None:  # (closed while it shook hands: a stop)
                raise ConnectionResetError()
            ssl_object = c.writer.get_extra_info("ssl_object")
            try:
                # (SSL: the certificate says who it is; SASL_SSL: SASL does, after this)
                principal = (peer_principal(ssl_object, self.mappers[listener.name])
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

    def failed(self, obj: ssl.SSLObject, e: ssl.SSLError) -> None:
        """(AlertingSSLObject) A handshake failed, its alert on its way: its reason
        kept for the log line, and in a moment the connection closed if its client has not
        closed it yet."""
        for c in self.shaking:
            if getattr(c.transport.get_protocol(), "_sslobj", None) is obj:
                self.failures[c] = e
                break
        if self.drop_soon is None:
            self.drop_soon = asyncio.get_running_loop().call_later(0.5, self.drop_failed)

    def drop_failed(self) -> None:
        self.drop_soon = None
        for c in list(self.shaking):
            if c in self.failures:
                c.transport.abort()

