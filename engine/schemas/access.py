"""Who may use the schema registry's REST API: HTTP basic auth checked against the data
dir's SCRAM credentials, and Kafka's ACLs over subjects (docs/SCHEMAS.md).

Authentication: ``Authorization: Basic base64(user:password)`` is checked as SASL/PLAIN is
(the password derives the user's stored SCRAM key again: PBKDF2, milliseconds), so a success
is remembered, keyed by (user, sha256(password)), and forgotten when the users file changes
(a new password, a deleted user). An unknown user costs the same PBKDF2 as a wrong password.
The principal is ``User:<name>``; with no users configured every request is
``User:ANONYMOUS``.

Authorization (with an authorizer; none: everything is allowed): a subject is the Topic its
name gives under TopicNameStrategy (``orders-value`` and ``orders-key``: topic ``orders``;
any other subject: the topic of its own name).

- read a subject's versions, look a schema up, check compatibility: Describe on the topic
- register: Write; delete (soft or hard): Delete
- ``PUT``/``DELETE /config/{s}``: AlterConfigs on the topic; ``GET /config/{s}``,
  ``/mode/{s}``: DescribeConfigs (AlterConfigs implies it)
- ``PUT /config`` (the global level): AlterConfigs on the Cluster
- ``GET /schemas/ids/{id}``: Describe on any subject holding the id
- ``GET /subjects`` lists only the subjects the principal may Describe (as Kafka's Metadata)
- ``GET /config``, ``/mode``, ``/schemas/types``, ``/contexts``, ``/``: any authenticated principal

``state()`` says when any of this may have changed (the users file or the ACLs): the
listener keeps answers and principals while it stays the same object. The files are looked
at (a ``stat`` each) at most every ``recheck_s``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import time
from collections.abc import Callable, Iterable

from ..security import scram
from ..security.acl import ANONYMOUS, CLUSTER, CLUSTER_NAME, TOPIC, Authorizer
from ..security.users import Users
from .errors import Forbidden, Unauthorized

REALM = "rivven"
CHALLENGE = f'Basic realm="{REALM}"'
DESCRIBE, WRITE, DELETE = "Describe", "Write", "Delete"
ALTER_CONFIGS, DESCRIBE_CONFIGS = "AlterConfigs", "DescribeConfigs"
MAX_REMEMBERED = 4096  # successful logins remembered (then forgotten at once)
_MISSING = (-1, -1, -1, -1)


def topic_of(subject: str) -> str:
    """The topic a subject is authorized as (TopicNameStrategy's ``<topic>-key`` and
    ``<topic>-value``; any other subject: itself)."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


class Access:
    """Authentication (``users``: the data dir's SCRAM users, None: no authentication) and
    authorization (``authorizer``: the decision now, e.g. ``rivven serve``'s
    ``Broker.authorizer``, or None for none; it may answer None: authorization off)."""

    def __init__(self, users: Users | None = None,
                 authorizer: Callable[[], Authorizer | None] | None = None,
                 recheck_s: float = 0.05) -> None:
        self.users = users
        self._authorizer_now = authorizer
        self.recheck_s = recheck_s
        self.authorizer: Authorizer | None = None  # the decision as of the last state()
        self._logins: dict[tuple[str, bytes], str] = {}
        self._users_seen: tuple[int, int, int, int] | None = None
        self._next_check = 0.0
        self._token: object = object()
        self.state()

    @classmethod
    def from_data_dir(cls, users: Users | None, acls: object | None,
                      super_users: Iterable[str] = (),
                      allow_everyone_if_no_acl_found: bool = False,
                      enabled: bool | None = None, recheck_s: float = 0.05) -> Access:
        """``rivven schema serve``'s: ``acls`` (``Engine.acls``) decided as ``rivven serve``
        decides: ``enabled`` True (always), False (never), None (once the data dir has an
        ACL)."""
        supers = frozenset(super_users)

        def now() -> Authorizer | None:
            if enabled is False or acls is None:
                return None
            auth: Authorizer = acls.authorizer(supers,  # type: ignore[attr-defined]
                                               allow_everyone_if_no_acl_found)
            return auth if enabled or len(auth) else None
        return cls(users, now, recheck_s)

    @property
    def required(self) -> bool:
        """Must a request carry credentials?"""
        return self.users is not None

    # ------------------------------------------------------------------ changes
    def state(self) -> object:
        """An object that stays the same while neither the users file nor the ACLs change
        (looked at no more often than every ``recheck_s``)."""
        now = time.monotonic()
        if now < self._next_check:
            return self._token
        self._next_check = now + self.recheck_s
        changed = False
        if self.users is not None:
            try:
                st = os.stat(self.users.path)
                seen = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            except OSError:
                seen = _MISSING
            if seen != self._users_seen:
                self._users_seen = seen
                self._logins = {}
                changed = True
        auth = self._authorizer_now() if self._authorizer_now is not None else None
        if auth is not self.authorizer:
            self.authorizer = auth
            changed = True
        if changed:
            self._token = object()
        return self._token

    # ------------------------------------------------------------------ authentication
    def remembered(self, authorization: bytes | None) -> str | None:
        """The principal of an ``Authorization`` header value already checked (no PBKDF2:
        fit for the event loop), None when it must be checked (``authenticate``)."""
        if self.users is None:
            return ANONYMOUS
        parsed = _basic(authorization)
        if parsed is None:
            return None
        user, password = parsed
        return self._logins.get((user, hashlib.sha256(password).digest()))

    def authenticate(self, authorization: bytes | None) -> str:
        """The principal of an ``Authorization`` header value (bytes as sent); Unauthorized
        when there is none or it does not match a user's credential. Derives the password's
        key when it is not remembered: call it off the event loop."""
        if self.users is None:
            return ANONYMOUS
        if not authorization:
            raise Unauthorized("Unauthorized: this registry needs HTTP basic authentication "
                               "as a rivven user (rivven user add NAME)")
        parsed = _basic(authorization)
        if parsed is None:
            raise Unauthorized("Unauthorized: the Authorization header is not Basic "
                               "base64(user:password)")
        user, password = parsed
        key = (user, hashlib.sha256(password).digest())
        # (a success goes into the table of when it began: when the users file changes
        # meanwhile, state() drops that table, and this success with it)
        logins = self._logins
        hit = logins.get(key)
        if hit is not None:
            return hit
        users = self.users
        cred = users.credential(user, "SCRAM-SHA-256") or users.credential(user, "SCRAM-SHA-512")
        if cred is not None:
            ok = bool(password) and scram.check_password(cred, password)
        else:  # (the time does not tell whether the user exists)
            scram.check_password(scram.fake("SCRAM-SHA-256", user,
                                            users.typical_iterations("SCRAM-SHA-256")), password)
            ok = False
        if not ok:
            raise Unauthorized("Unauthorized: invalid username or password")
        if len(logins) >= MAX_REMEMBERED:
            logins.clear()
        principal = logins[key] = f"User:{user}"
        return principal

    # ------------------------------------------------------------------ authorization
    def may(self, principal: str, host: str, operation: str, subject: str) -> bool:
        """May ``principal`` do ``operation`` on ``subject`` (as its topic)?"""
        auth = self.authorizer
        return auth is None or auth.authorize(principal, host, operation, TOPIC,
                                              topic_of(subject))

    def check(self, principal: str, host: str, operation: str, subject: str) -> None:
        """Forbidden unless ``principal`` may do ``operation`` on ``subject``."""
        if not self.may(principal, host, operation, subject):
            raise Forbidden(f"{principal} is not authorized to {operation} subject "
                            f"'{subject}' (topic '{topic_of(subject)}'): grant it with "
                            f"rivven acl add --allow-principal {principal} --operation {operation} "
                            f"--topic {topic_of(subject)}")

    def check_any(self, principal: str, host: str, operation: str,
                  subjects: Iterable[str], what: str) -> None:
        """Forbidden unless ``principal`` may do ``operation`` on one of ``subjects``
        (``what``: the thing asked for, for the message)."""
        if self.authorizer is None:
            return
        if not any(self.may(principal, host, operation, s) for s in subjects):
            raise Forbidden(f"{principal} is not authorized to {operation} any subject "
                            f"holding {what}: grant {operation} on one of their topics")

    def check_cluster(self, principal: str, host: str, operation: str) -> None:
        auth = self.authorizer
        if auth is not None and not auth.authorize(principal, host, operation, CLUSTER,
                                                   CLUSTER_NAME):
            raise Forbidden(f"{principal} is not authorized to {operation} the cluster (the "
                            "global compatibility level): grant it with rivven acl add "
                            f"--allow-principal {principal} --operation {operation} --cluster")

    def visible(self, principal: str, host: str, subjects: Iterable[str]) -> list[str]:
        """The ``subjects`` ``principal`` may Describe, in order."""
        if self.authorizer is None:
            return list(subjects)
        return [s for s in subjects if self.may(principal, host, DESCRIBE, s)]


def _basic(authorization: bytes | None) -> tuple[str, bytes] | None:
    """``(user, password)`` of a Basic credential, None when it is not one."""
    if not authorization or authorization[:6].lower() != b"basic ":
        return None
    try:
        raw = base64.b64decode(authorization[6:].strip(), validate=True)
        user_b, sep, password = raw.partition(b":")
        user = user_b.decode()
    except (binascii.Error, ValueError):
        return None
    if not sep or not user:
        return None
    return user, password
