"""SCRAM (RFC 5802, RFC 7677): the stored credential and the server's side of the exchange.

A credential is what SCRAM stores: the salt, the iteration count, StoredKey = H(ClientKey)
and ServerKey = HMAC(SaltedPassword, "Server Key"), where SaltedPassword =
PBKDF2-HMAC(password, salt, iterations) and ClientKey = HMAC(SaltedPassword, "Client Key").
The password itself is never kept. PLAIN checks a password against the same credential (it
derives StoredKey again and compares in constant time).

``ScramServer`` runs one exchange: client-first -> server-first -> client-final ->
server-final. An unknown user gets a made-up salt and iteration count (the same for the same
name, from a per-process secret) and fails only at the proof, as a wrong password does: the
answer does not tell which users exist."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from ..errors import InvalidArgument

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's minimum (and kafka-configs' default)
MAX_ITERATIONS = 16384  # Kafka's maximum
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
_FAKE_SECRET = os.urandom(32)
MAX_MESSAGE = 4096  # a SCRAM message longer than this is not a client's


class ScramError(Exception):
    """The exchange failed: ``str()`` is what the client is told (never a secret)."""


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_json(self) -> dict[str, object]:
        return {"salt": _b64(self.salt), "iterations": self.iterations,
                "stored_key": _b64(self.stored_key), "server_key": _b64(self.server_key)}


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _hmac(algo: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, algo).digest()


def mechanism(name: str) -> str:
    up = name.upper() if isinstance(name, str) else ""
    if up not in MECHANISMS:
        raise InvalidArgument(f"unknown SCRAM mechanism {name!r}; valid: "
                              f"{', '.join(MECHANISMS)}")
    return up


def check_iterations(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not MIN_ITERATIONS <= n <= MAX_ITERATIONS:
        raise InvalidArgument(f"SCRAM iterations {n!r} out of range: give "
                              f"{MIN_ITERATIONS}..{MAX_ITERATIONS} (Kafka's bounds)")
    return n


def salted_password(mech: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mech], password, salt, iterations)


def from_salted(mech: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a salted password (AlterUserScramCredentials sends one)."""
    algo = MECHANISMS[mech]
    client_key = _hmac(algo, salted, b"Client Key")
    return ScramCredential(mech, salt, iterations, hashlib.new(algo, client_key).digest(),
                           _hmac(algo, salted, b"Server Key"))


def derive(mech: str, password: str | bytes, iterations: int = DEFAULT_ITERATIONS,
           salt: bytes | None = None) -> ScramCredential:
    mech = mechanism(mech)
    check_iterations(iterations)
    pw = password.encode() if isinstance(password, str) else password
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return from_salted(mech, salted_password(mech, pw, salt, iterations), salt, iterations)


def check_password(cred: ScramCredential, password: bytes) -> bool:
    """Does ``password`` make ``cred`` (PLAIN against a SCRAM credential)?"""
    again = from_salted(cred.mechanism, salted_password(cred.mechanism, password, cred.salt,
                                                        cred.iterations),
                        cred.salt, cred.iterations)
    return hmac.compare_digest(again.stored_key, cred.stored_key)


def fake(mech: str, user: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A credential for a user who does not exist: the same salt for the same name (from a
    per-process secret), keys nobody has; ``iterations`` as real users have (so the count
    offered does not tell them apart either). PLAIN checks a password against it too: an
    unknown user costs the same PBKDF2 as a known one."""
    seed = _hmac("sha256", _FAKE_SECRET, f"{mech}\0{user}".encode())
    return ScramCredential(mech, seed, iterations, os.urandom(64), os.urandom(64))


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Authentication failed: invalid SCRAM user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError("Authentication failed: malformed SCRAM message")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """One SCRAM exchange on the server's side. ``lookup(user)`` returns the user's
    credential of this mechanism, or None."""

    def __init__(self, mech: str, lookup: object,
                 fake_iterations: int = DEFAULT_ITERATIONS) -> None:
        self.mechanism = mech
        self.fake_iterations = fake_iterations
        self.algo = MECHANISMS[mech]
        self.lookup = lookup
        self.user: str | None = None
        self.authzid = ""
        self.cred: ScramCredential | None = None
        self.known = False
        self.done = False
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    def first(self, data: bytes) -> bytes:
        """client-first-message -> server-first-message."""
        msg = _text(data)
        if msg.startswith("p="):
            raise ScramError("Authentication failed: channel binding is not supported")
        if not (msg.startswith("n,") or msg.startswith("y,")):
            raise ScramError("Authentication failed: malformed SCRAM client-first message")
        flag, sep, rest = msg.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not sep or not sep2:
            raise ScramError("Authentication failed: malformed SCRAM client-first message")
        if authz and not authz.startswith("a="):
            raise ScramError("Authentication failed: malformed SCRAM authorization id")
        self._gs2 = f"{flag},{authz},"
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("Authentication failed: malformed SCRAM client-first message")
        if any(k == "m" for k, _ in attrs):
            raise ScramError("Authentication failed: mandatory SCRAM extension not supported")
        user = _unescape(attrs[0][1])
        if not user:
            raise ScramError("Authentication failed: empty SCRAM user name")
        self.authzid = _unescape(authz[2:]) if authz else ""
        if self.authzid and self.authzid != user:
            raise ScramError("Authentication failed: the authorization id is not the user name")
        cred = self.lookup(user)  # type: ignore[operator]
        self.known = cred is not None
        self.cred = cred if cred is not None else fake(self.mechanism, user,
                                                        self.fake_iterations)
        self.user = user
        self._first_bare = bare
        self._nonce = attrs[1][1] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = (f"r={self._nonce},s={_b64(self.cred.salt)},"
                              f"i={self.cred.iterations}")
        return self._server_first.encode()

    def final(self, data: bytes) -> bytes:
        """client-final-message -> server-final-message (ScramError: a wrong proof)."""
        if self.cred is None or self.done:
            raise ScramError("Authentication failed: SCRAM message out of order")
        msg = _text(data)
        attrs = _attrs(msg)
        keys = [k for k, _ in attrs]
        if len(attrs) < 3 or keys[0] != "c" or keys[1] != "r" or keys[-1] != "p":
            raise ScramError("Authentication failed: malformed SCRAM client-final message")
        values = dict(attrs)
        if values["c"] != _b64(self._gs2.encode()):
            raise ScramError("Authentication failed: invalid SCRAM channel binding")
        # Kafka checks only that the nonce ends with the server's (librdkafka before 2.1,
        # kcat's, sends its own nonce twice); the proof covers the message as sent
        if not values["r"].endswith(self._nonce):
            raise ScramError("Authentication failed: invalid SCRAM nonce")
        try:
            proof = base64.b64decode(values["p"], validate=True)
        except ValueError:
            raise ScramError("Authentication failed: malformed SCRAM proof") from None
        without_proof = msg[:msg.rindex(",p=")]
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        cred = self.cred
        signature = _hmac(self.algo, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        ok = hmac.compare_digest(hashlib.new(self.algo, client_key).digest(), cred.stored_key)
        if not (ok and self.known):
            raise ScramError("Authentication failed: Invalid user credentials")
        self.done = True
        return f"v={_b64(_hmac(self.algo, cred.server_key, auth_message))}".encode()


def _text(data: bytes) -> str:
    if len(data) > MAX_MESSAGE:
        raise ScramError("Authentication failed: SCRAM message too long")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Authentication failed: SCRAM message not UTF-8") from None
