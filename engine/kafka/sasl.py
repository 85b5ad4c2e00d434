"""SASL on a ``SASL_PLAINTEXT`` or ``SASL_SSL`` listener: SaslHandshake (v0-1) and
SaslAuthenticate (v0-2) with SCRAM-SHA-256, SCRAM-SHA-512 (``engine.security.scram``,
against ``Engine.users``) and PLAIN (RFC 4616, checked against the user's SCRAM credential),
as Kafka's ``SaslServerAuthenticator`` does it:

- until a connection is authenticated only ApiVersions (once, first), SaslHandshake and then
  SaslAuthenticate are accepted; anything else closes it (logged). Every frame before then is
  at most ``sasl.server.max.receive.size`` bytes.
- SaslHandshake v0: the frames that follow are raw SASL tokens (a 4-byte length and the token,
  no Kafka header), and so are the answers.
- A mechanism not offered: UNSUPPORTED_SASL_MECHANISM with the list offered. PLAIN is not
  offered on a listener without TLS unless the connection came over a loopback address or
  the server runs with ``--insecure``.
- A failed authentication is answered (SASL_AUTHENTICATION_FAILED and Kafka's message) after
  ``connection.failed.authentication.delay.ms`` (the event loop serves the others meanwhile),
  and the connection is closed.
- Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 SaslAuthenticate
  v1+ tells the client its session's lifetime; the client sends SaslHandshake and
  SaslAuthenticate again on the same connection (at most once a second), as the same
  principal (another one: closed); a request after the session ended closes the connection.

Every exchange counts in ``rivven_kafka_authentications_total{mechanism,result}`` (mechanism:
one of ``MECHANISMS`` or ``other``); a failure is logged rate-limited with the principal tried
and the client's address. No password, nonce, proof, salt or key is logged, answered or
labelled."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidConfig
from ..maintenance import scheduler
from ..security import scram
from . import codes
from .config import BOOLS, INTS, ServeConfig
from .registry import APIS, Request, Session, api

# conn.Conn and server.Server (server.py imports this module: no import back)
Conn = Any
Server = Any

KEY = "sasl"  # Conn.data[KEY]: the connection's Auth (SASL listeners only)
SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
REAUTH_MIN_S = 1.0  # Kafka: a connection re-authenticates at most once a second
LINGER_S = 0.5  # after a failure's answer, how long the client may take to close first
# the states of Kafka's SaslServerAuthenticator
INITIAL, HANDSHAKE, AUTHENTICATE, COMPLETE, REAUTH = range(5)
_EXPECTS = {INITIAL: (API_VERSIONS, SASL_HANDSHAKE), HANDSHAKE: (SASL_HANDSHAKE,),
            AUTHENTICATE: (SASL_AUTHENTICATE,), REAUTH: (SASL_HANDSHAKE,)}
PLAIN_FAILED = "Authentication failed: Invalid username or password"
AUTHZID_FAILED = ("Authentication failed: Client requested an authorization id that is "
                  "different from username")


@dataclass(frozen=True)
class Settings:
    """A listener's SASL settings (``listener.name.<l>.<setting>`` or the server's)."""

    mechanisms: tuple[str, ...]
    reauth_ms: int
    delay_ms: int
    max_receive: int


def settings(config: ServeConfig, listener: str) -> Settings:
    """InvalidConfig naming the setting when a value is bad (checked at start)."""
    def number(name: str) -> int:
        v = scheduler.setting_value(name, config.listener_value(listener, name), INTS, BOOLS)
        assert isinstance(v, int)
        return v

    names = [m.strip() for m in config.listener_value(listener, "sasl.enabled.mechanisms")
             .split(",") if m.strip()]
    bad = [m for m in names if m not in MECHANISMS]
    if bad or not names:
        raise InvalidConfig(f"sasl.enabled.mechanisms of listener {listener}: "
                            f"{', '.join(bad) or 'none given'}; rivven offers "
                            f"{', '.join(MECHANISMS)} (Kafka's names, upper case)")
    return Settings(tuple(dict.fromkeys(names)), number("connections.max.reauth.ms"),
                    number("connection.failed.authentication.delay.ms"),
                    number("sasl.server.max.receive.size"))


def label(mechanism: str | None) -> str:
    """The metric label of a mechanism a client named (never the client's text)."""
    return mechanism if mechanism in MECHANISMS else "other"


class Failed(Exception):
    """The exchange failed: ``str()`` is what the client is told."""


class Auth:
    """A SASL connection's state (``Conn.data[KEY]``)."""

    def __init__(self, s: Settings, plain_ok: bool, server: Server, peer: str) -> None:
        self.settings = s
        self.offered = [m for m in s.mechanisms if m != "PLAIN" or plain_ok]
        self.plain_refused = "PLAIN" in s.mechanisms and not plain_ok
        self.server = server
        self.peer = peer
        self.state = INITIAL
        self.raw = False  # SaslHandshake v0: raw tokens follow
        self.mechanism: str | None = None
        self.scram: scram.ScramServer | None = None
        self.previous: str | None = None  # re-authenticating: the principal before
        self.bad_reauth: str | None = None  # a re-authentication with another mechanism
        self.reauth_at = 0.0  # (monotonic) the last re-authentication began
        self.failed: str | None = None  # why: answered after the delay, then closed

    @property
    def limit(self) -> int | None:
        """The largest frame accepted now (None: the server's own limit)."""
        return None if self.state == COMPLETE else self.settings.max_receive

    # ------------------------------------------------------------------ the exchange
    def handshake(self, mechanism: str, version: int) -> int:
        """A SaslHandshake: the error code to answer."""
        if mechanism not in self.offered:
            if mechanism == "PLAIN" and self.plain_refused:
                why = ("PLAIN refused: this listener has no TLS and the connection is not on "
                       "a loopback address, so the password would cross the network in "
                       "clear; use SASL_SSL or a SCRAM mechanism, or serve with --insecure")
            else:
                why = (f"SASL mechanism {mechanism[:40]!r} not offered (offered: "
                       f"{', '.join(self.offered)})")
            self.fail(label(mechanism), None, why)
            return codes.UNSUPPORTED_SASL_MECHANISM
        if self.previous is not None and mechanism != self.mechanism:
            # Kafka answers the handshake, then fails at the first token with no answer
            self.bad_reauth = (f"SASL mechanism '{mechanism}' requested by client is not "
                               f"supported for re-authentication of mechanism "
                               f"'{self.mechanism}'")
        self.mechanism = mechanism
        self.scram = None
        if mechanism in scram.MECHANISMS:
            users = self.server.broker.engine.users
            # (an unknown user is offered the count most users have: it tells nothing)
            self.scram = scram.ScramServer(mechanism,
                                           lambda user: users.credential(user, mechanism),
                                           users.typical_iterations(mechanism))
        self.raw = version == 0
        self.state = AUTHENTICATE
        return codes.NONE

    def token(self, data: bytes, session: Session) -> tuple[bytes, int | None]:
        """(a pool thread) One client token: the answer and, when the exchange is complete,
        the session's lifetime in ms (0: for ever). ``Failed``: ``self.failed`` is set."""
        mech = self.mechanism
        assert mech is not None
        if self.bad_reauth is not None:
            self.fail(mech, None, self.bad_reauth)
            raise Failed(self.bad_reauth)
        if mech == "PLAIN":
            user = self._plain(data)
            return b"", self._complete(session, user)
        ex = self.scram
        assert ex is not None
        first = ex.cred is None
        try:
            out = ex.first(data) if first else ex.final(data)
        except scram.ScramError as e:
            tried = ex.user
            reason = str(e).removeprefix("Authentication failed: ")
            if ex.authzid and tried and ex.authzid != tried:
                self.fail(mech, tried, reason)
                raise Failed(AUTHZID_FAILED) from None
            # Kafka tells the client no more than this (not whether the user exists)
            msg = (f"Authentication failed during {self._during()} due to invalid "
                   f"credentials with SASL mechanism {mech}")
            self.fail(mech, tried, reason)
            raise Failed(msg) from None
        if first:
            return out, None
        assert ex.user is not None
        return out, self._complete(session, ex.user)

    def _plain(self, data: bytes) -> str:
        """RFC 4616: authzid NUL authcid NUL passwd, checked against the SCRAM credential."""
        parts = bytes(data).split(b"\0")
        if len(parts) != 3:
            self.fail("PLAIN", None, "a malformed PLAIN message")
            raise Failed("Authentication failed: Invalid SASL/PLAIN response: expected 3 "
                         "tokens")
        try:
            authzid, user = parts[0].decode(), parts[1].decode()
        except UnicodeDecodeError:
            self.fail("PLAIN", None, "a PLAIN user name not UTF-8")
            raise Failed(PLAIN_FAILED) from None
        pw = parts[2]
        if not user:
            self.fail("PLAIN", None, "no user name")
            raise Failed("Authentication failed: username not specified")
        if not pw:
            self.fail("PLAIN", user, "no password")
            raise Failed("Authentication failed: password not specified")
        users = self.server.broker.engine.users
        cred = (users.credential(user, "SCRAM-SHA-256")
                or users.credential(user, "SCRAM-SHA-512"))
        if cred is not None:
            ok = scram.check_password(cred, pw)
        else:  # an unknown user costs the same PBKDF2 as a known one (the time tells nothing)
            scram.check_password(scram.fake("SCRAM-SHA-256", user,
                                            users.typical_iterations("SCRAM-SHA-256")), pw)
            ok = False
        if not ok:
            self.fail("PLAIN", user, "invalid credentials" if cred is not None
                      else "invalid credentials (no such user)")
            raise Failed(PLAIN_FAILED)
        if authzid and authzid != user:
            self.fail("PLAIN", user, "an authorization id other than the user name")
            raise Failed(AUTHZID_FAILED)
        return user

    def _during(self) -> str:
        return "re-authentication" if self.previous is not None else "authentication"

    def _complete(self, session: Session, user: str) -> int:
        principal = f"User:{user}"
        mech = self.mechanism
        assert mech is not None
        if self.previous is not None and principal != self.previous:
            was = self.previous.replace(":", ".", 1)
            msg = ("Cannot change principals during re-authentication from "
                   f"{was}: {principal.replace(':', '.', 1)}")
            self.fail(mech, user, msg)
            raise Failed(msg)
        session.principal = principal
        session.mechanism = mech
        session.authenticated = True
        ms = self.settings.reauth_ms
        session.expires = time.monotonic() + ms / 1000 if ms > 0 else None
        self.state = COMPLETE
        self.raw = False
        self.scram = None
        self.previous = None
        self.server.meter.get("rivven_kafka_authentications_total", mechanism=mech,
                              result="success").inc()
        return ms

    def fail(self, mech_label: str, tried: str | None, reason: str) -> None:
        """Count and log a failure (rate-limited; the name tried, the client, the reason:
        never a secret); the connection is answered after the delay, then closed."""
        self.failed = f"SASL {self._during()} failed ({label(mech_label)}): {reason}"
        self.server.meter.get("rivven_kafka_authentications_total",
                              mechanism=label(mech_label), result="failure").inc()
        who = f"User:{tried[:100]!r}" if tried is not None else "a client"
        self.server.say(("sasl-failed", label(mech_label)), logging.WARNING,
                        "%s %s of %s from %s failed: %s", label(mech_label), self._during(),
                        who, self.peer, reason)


# ---------------------------------------------------------------------- the listener's side
def begin(server: Server, c: Conn) -> None:
    """A new connection: on a SASL listener, its Auth (``Conn.data[KEY]``)."""
    s = c.session
    if not s.protocol.startswith("SASL_"):
        return
    local = c.writer.get_extra_info("sockname")
    host = str(local[0]) if isinstance(local, tuple) and local else ""
    plain_ok = (s.protocol == "SASL_SSL" or _loopback(host)
                or server.broker.insecure)
    c.data[KEY] = Auth(settings(server.broker.config, s.listener), plain_ok, server, c.peer)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def gate(c: Conn, api_key: int, version: int) -> tuple[str, str] | None:
    """Before a request is handled: (why, kind) when the connection must close instead (not
    authenticated; its session ended); a SaslHandshake on an authenticated connection whose
    session ends begins a re-authentication."""
    a: Auth | None = c.data.get(KEY)
    if a is None:
        return None
    s = c.session
    if a.state == COMPLETE:
        if s.expires is None:
            return None
        now = time.monotonic()
        if api_key == SASL_HANDSHAKE and now - a.reauth_at >= REAUTH_MIN_S:
            a.reauth_at = now
            a.previous, a.state = s.principal, REAUTH
            return None
        if now >= s.expires:
            return (f"the SASL session of {s.principal} ended (connections.max.reauth.ms="
                    f"{a.settings.reauth_ms}) and it did not authenticate again", "expired")
        return None
    if api_key not in _EXPECTS.get(a.state, ()):
        api = APIS.get(api_key)
        what = api.name if api is not None else f"API key {api_key}"
        if api_key == API_VERSIONS:
            return f"ApiVersions again during SASL {a._during()}", "authentication"
        return (f"{what} before SASL {a._during()} completed: listener {s.listener} "
                f"({s.protocol}) takes only ApiVersions, SaslHandshake and SaslAuthenticate "
                "until then", "authentication")
    if api_key == API_VERSIONS:
        api = APIS.get(API_VERSIONS)
        if api is not None and api.min_version <= version <= api.max_version:
            a.state = HANDSHAKE  # (an unsupported version: answered, asked again)
    return None


def raw(c: Conn) -> Auth | None:
    """The Auth of a connection whose next frame is a raw SASL token (handshake v0)."""
    a: Auth | None = c.data.get(KEY)
    return a if a is not None and a.raw and a.state == AUTHENTICATE else None


async def raw_token(server: Server, a: Auth, c: Conn, data: bytes) -> bytes | None:
    """A raw token (after SaslHandshake v0): the raw answer, None when it failed (Kafka
    answers a failed raw exchange with nothing: the connection closes after the delay)."""
    try:
        out, _ = await server.broker.call(a.token, data, c.session)
    except Failed:
        return None
    return len(out).to_bytes(4, "big") + out


async def failed(c: Conn, out: bytes | None) -> str:
    """A failed authentication: after ``connection.failed.authentication.delay.ms`` the
    answer (if any) is written and flushed; then the connection is to close (the reason)."""
    a: Auth = c.data[KEY]
    c.waiting = True  # (gone meanwhile: the sweep stops the wait)
    try:
        await asyncio.sleep(a.settings.delay_ms / 1000)
    finally:
        c.waiting = False
    if out is not None and not c.transport.is_closing():
        c.transport.set_write_buffer_limits(high=0)  # (drain: until all of it is sent)
        c.writer.write(out)
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(c.writer.drain(), 5)
            # the client closes first if it does within LINGER_S: kafka-python drops an
            # answer that arrives together with the server's close
            await asyncio.wait_for(_until_eof(c.reader), LINGER_S)
    return a.failed or "SASL authentication failed"


async def _until_eof(reader: asyncio.StreamReader) -> None:
    while await reader.read(1 << 16):  # (what it sends now is not read as requests)
        pass


# ---------------------------------------------------------------------- the APIs
@api(17, "SaslHandshake", 0, 1)
async def sasl_handshake(req: Request) -> Any:
    a: Auth | None = req.conn.get(KEY)
    if a is None or a.state not in (INITIAL, HANDSHAKE, REAUTH):
        # (a listener without SASL, or authenticated already: Kafka's KafkaApis answer)
        return req.respond(error_code=codes.ILLEGAL_SASL_STATE, mechanisms=[])
    code = a.handshake(req.body.mechanism or "", req.version)
    return req.respond(error_code=code, mechanisms=list(a.offered))


@api(36, "SaslAuthenticate", 0, 2)
def sasl_authenticate(req: Request) -> Any:
    a: Auth | None = req.conn.get(KEY)
    if a is None or a.state != AUTHENTICATE:
        return req.respond(error_code=codes.ILLEGAL_SASL_STATE,
                           error_message="SaslAuthenticate request received after "
                                         "successful authentication", auth_bytes=b"")
    try:
        out, lifetime = a.token(bytes(req.body.auth_bytes or b""), req.session)
    except Failed as e:
        if a.bad_reauth is not None:
            return None  # (Kafka: closed with no answer)
        return req.respond(error_code=codes.SASL_AUTHENTICATION_FAILED, error_message=str(e),
                           auth_bytes=b"", session_lifetime_ms=0)
    return req.respond(error_code=codes.NONE, error_message=None, auth_bytes=out,
                       session_lifetime_ms=lifetime or 0)
