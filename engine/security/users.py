"""SCRAM users of the data dir, ``Engine.users`` (``rivven user``, Kafka's
DescribeUserScramCredentials and AlterUserScramCredentials): each user's credentials per
mechanism, stored as SCRAM stores them (``security/users.json``: sealed, 0600)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import InvalidArgument, RivvenError, plural
from ..fs.locks import DEFAULT_WAIT, LockWait
from . import scram
from .results import UserCredentialInfo, UserInfo
from .scram import ScramCredential
from .store import SecureDoc

MAX_NAME = 255
MAX_PASSWORD = 1024

List = list  # (the services have a method named list)


class UnknownUser(RivvenError):
    pass


class UserExists(RivvenError):
    pass


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or not name.isprintable() \
            or name != name.strip():
        raise InvalidArgument(f"user name {name!r} is empty, longer than {MAX_NAME}, not "
                              "printable or padded with spaces: give a plain name")
    return name


def check_password(password: str | bytes) -> bytes:
    pw = password.encode() if isinstance(password, str) else bytes(password)
    if not pw or len(pw) > MAX_PASSWORD:
        raise InvalidArgument(f"a password is 1 to {plural(MAX_PASSWORD, 'byte')}: give another")
    return pw


class Users:
    def __init__(self, data_dir: str, writable: Callable[[], None],
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self._doc = SecureDoc(data_dir, "users.json", "the SCRAM users file", "users",
                              lock_wait)
        self._writable = writable
        self._cache: dict[tuple[str, str], ScramCredential | None] = {}
        self._typical: dict[str, int] = {}
        self._cache_of: Any = None

    @property
    def path(self) -> str:
        return self._doc.path

    # ---------------------------------------------------------------- reading
    def credential(self, name: str, mechanism: str) -> ScramCredential | None:
        """The stored credential of ``name`` for ``mechanism`` (a file changed by another
        process is read again), None when there is none."""
        users = self._doc.read()
        if users is not self._cache_of:
            self._cache, self._typical, self._cache_of = {}, {}, users
        key = (name, mechanism)
        if key not in self._cache:
            entry = users.get(name, {}).get(mechanism) if isinstance(users.get(name), dict) \
                else None
            self._cache[key] = _credential(mechanism, entry, self._doc.path) if entry else None
        return self._cache[key]

    def typical_iterations(self, mechanism: str) -> int:
        """The iteration count most users have for ``mechanism`` (what an unknown user is
        offered, so that the count does not tell who exists)."""
        users = self._doc.read()
        if users is not self._cache_of:
            self._cache, self._typical, self._cache_of = {}, {}, users
        hit = self._typical.get(mechanism)
        if hit is not None:
            return hit
        counts: dict[int, int] = {}
        for entry in users.values():
            cred = entry.get(mechanism) if isinstance(entry, dict) else None
            it = cred.get("iterations") if isinstance(cred, dict) else None
            if isinstance(it, int) and not isinstance(it, bool):
                counts[it] = counts.get(it, 0) + 1
        typical = max(counts, key=lambda k: (counts[k], -k)) if counts else \
            scram.DEFAULT_ITERATIONS
        self._typical[mechanism] = typical
        return typical

    def list(self) -> List[UserInfo]:
        users = self._doc.read()
        return [self._info(n, users[n]) for n in sorted(users)]

    def describe(self, name: str) -> UserInfo:
        users = self._doc.read()
        if name not in users:
            raise UnknownUser(f"no user {name!r}; add it with `rivven user add {name}`")
        return self._info(name, users[name])

    def _info(self, name: str, entry: Any) -> UserInfo:
        creds: List[UserCredentialInfo] = []
        for mech in sorted(entry) if isinstance(entry, dict) else []:
            c = _credential(mech, entry[mech], self._doc.path)
            creds.append({"mechanism": mech, "iterations": c.iterations})
        return {"name": name, "credentials": creds}

    # ---------------------------------------------------------------- changing
    def add(self, name: str, password: str | bytes,
            mechanisms: Iterable[str] = tuple(scram.MECHANISMS),
            iterations: int = scram.DEFAULT_ITERATIONS) -> UserInfo:
        """A new user with a credential per mechanism (UserExists when there is one)."""
        return self._set(name, password, mechanisms, iterations, must_exist=False)

    def passwd(self, name: str, password: str | bytes,
               mechanisms: Iterable[str] | None = None,
               iterations: int = scram.DEFAULT_ITERATIONS) -> UserInfo:
        """A new password for an existing user (its mechanisms, unless others are given)."""
        return self._set(name, password, mechanisms, iterations, must_exist=True)

    def _set(self, name: str, password: str | bytes, mechanisms: Iterable[str] | None,
             iterations: int, must_exist: bool) -> UserInfo:
        self._writable()
        check_name(name)
        pw = check_password(password)
        scram.check_iterations(iterations)
        mechs = None if mechanisms is None else sorted({scram.mechanism(m) for m in mechanisms})
        if mechs == []:
            raise InvalidArgument("no SCRAM mechanism given: name SCRAM-SHA-256 and/or "
                                  "SCRAM-SHA-512")

        def change(users: dict) -> tuple[dict, UserInfo]:
            if must_exist and name not in users:
                raise UnknownUser(f"no user {name!r}; add it with `rivven user add {name}`")
            if not must_exist and name in users:
                raise UserExists(f"user {name!r} exists; change its password with "
                                 f"`rivven user passwd {name}`")
            ms = mechs if mechs is not None else sorted(users[name]) or list(scram.MECHANISMS)
            entry = {m: scram.derive(m, pw, iterations).to_json() for m in ms}
            users = dict(users)
            users[name] = entry
            return users, self._info(name, entry)
        return self._doc.update(change)

    def delete(self, name: str) -> UserInfo:
        self._writable()

        def change(users: dict) -> tuple[dict, UserInfo]:
            if name not in users:
                raise UnknownUser(f"no user {name!r}; `rivven user list` shows them")
            info = self._info(name, users[name])
            return {k: v for k, v in users.items() if k != name}, info
        return self._doc.update(change)

    def alter(self, upsert: Iterable[tuple[str, str, int, bytes, bytes]],
              delete: Iterable[tuple[str, str]]) -> None:
        """Kafka's AlterUserScramCredentials, all or nothing: ``upsert`` of (user,
        mechanism, iterations, salt, salted password), ``delete`` of (user, mechanism)."""
        self._writable()
        ups = [(check_name(u), scram.mechanism(m), scram.check_iterations(i), s, p)
               for u, m, i, s, p in upsert]
        dels = [(check_name(u), scram.mechanism(m)) for u, m in delete]

        def change(users: dict) -> tuple[dict, None]:
            users = {k: dict(v) for k, v in users.items()}
            for u, m in dels:
                if m not in users.get(u, {}):
                    raise UnknownUser(f"user {u!r} has no {m} credential")
                del users[u][m]
                if not users[u]:
                    del users[u]
            for u, m, i, salt, salted in ups:
                users.setdefault(u, {})[m] = scram.from_salted(m, salted, salt, i).to_json()
            return users, None
        self._doc.update(change)


def _credential(mech: str, entry: Any, path: str) -> ScramCredential:
    from ..fs.jsondoc import damaged

    fix = "restore it from a backup, or set the user's password again"
    try:
        mech = scram.mechanism(mech)
        if not isinstance(entry, dict):
            raise ValueError("an entry is not an object")
        it = entry["iterations"]
        if isinstance(it, bool) or not isinstance(it, int) or not 1 <= it <= 1 << 24:
            raise ValueError("iterations out of range")
        parts = [base64.b64decode(entry[k], validate=True)
                 for k in ("salt", "stored_key", "server_key")]
    except (KeyError, TypeError, ValueError, binascii.Error, InvalidArgument) as e:
        raise damaged(path, "the SCRAM users file", f"a bad credential ({e})", fix) from None
    return ScramCredential(mech, parts[0], it, parts[1], parts[2])
