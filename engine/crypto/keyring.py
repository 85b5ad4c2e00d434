"""Master keys, named by id, kept outside the data dir: the keyring.

A keyring file is a JSON object ``{"<key id>": "<base64 of 32 bytes>", ...}``. It must be a
regular file (not a link), owned by the user running rivven, and readable by nobody else
(mode 0600 or 0400): anything else is refused with the fix (``KeyringError``). Its path comes
from ``Engine.open(keyring=...)``, ``--keyring FILE`` or ``RIVVEN_KEYRING``. An object with a
``get(key_id) -> bytes`` method can stand in for the file, so a KMS can hold the keys.

The file is read when the keyring is opened, and again whenever a key id is asked for that it
did not hold (a key added for ``rivven key rewrap``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import stat
import threading
from typing import Any, Protocol

from ..errors import KeyringError, KeyUnavailable, plural

ENV = "RIVVEN_KEYRING"
KEY_BYTES = 32
MAX_FILE = 1 << 20
KEY_ID = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")
KEY_ID_RULE = "1-200 characters from A-Z a-z 0-9 . _ : / @ + -"


class Keyring(Protocol):
    """Master keys by id. ``get`` returns the 32-byte key, or raises (any exception: the key
    is unavailable)."""

    def get(self, key_id: str) -> bytes: ...


class FileKeyring:
    """The keyring file at ``path`` (checked and read at once)."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._mutex = threading.Lock()
        self._keys = read_file(self.path)

    def __repr__(self) -> str:
        return f"FileKeyring({self.path!r})"

    def ids(self) -> list[str]:
        return sorted(self._keys)

    def get(self, key_id: str) -> bytes:
        key = self._keys.get(key_id)
        if key is None:
            with self._mutex:  # (a key added since: read the file again; misses are rare)
                try:
                    self._keys = read_file(self.path)
                except KeyringError:
                    pass  # (the error to give is the missing key's)
                key = self._keys.get(key_id)
        if key is None:
            raise KeyUnavailable(f"master key {key_id!r} is not in the keyring {self.path}; add "
                                 f"it to the file (\"{key_id}\": \"<base64 of 32 bytes>\")")
        return key


def read_file(path: str) -> dict[str, bytes]:
    """The keys of a keyring file, every rule checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise KeyringError(f"keyring {path} does not exist; create it (a JSON object of "
                           "base64 32-byte keys, mode 0600) or fix --keyring/RIVVEN_KEYRING"
                           ) from None
    except OSError as e:
        if os.path.islink(path):
            raise KeyringError(f"keyring {path} is a symbolic link: point --keyring or "
                               f"RIVVEN_KEYRING at the file itself ({os.path.realpath(path)})"
                               ) from None
        raise KeyringError(f"keyring {path} cannot be opened ({e.strerror or e}); fix its "
                           "permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyringError(f"keyring {path} is not a regular file: point --keyring or "
                               "RIVVEN_KEYRING at a JSON file")
        if st.st_uid != os.geteuid():
            raise KeyringError(f"keyring {path} is owned by uid {st.st_uid}, not by this user "
                               f"(uid {os.geteuid()}): chown it, or use your own keyring")
        if st.st_mode & 0o077:
            raise KeyringError(f"keyring {path} has mode {stat.S_IMODE(st.st_mode):04o}, "
                               f"readable by others: run 'chmod 600 {path}'")
        if st.st_size > MAX_FILE:
            raise KeyringError(f"keyring {path} is larger than {plural(MAX_FILE, 'byte')}: it holds "
                               "master keys only (a JSON object of base64 32-byte keys)")
        raw = os.read(fd, MAX_FILE + 1)
    finally:
        os.close(fd)
    return parse(raw, path)


def parse(raw: bytes, path: str) -> dict[str, bytes]:
    """``{key id: 32 bytes}`` of a keyring file's bytes (KeyringError naming the problem)."""
    def bad(reason: str) -> KeyringError:
        return KeyringError(f"keyring {path} {reason}; it must be a JSON object "
                            '{"<key id>": "<base64 of 32 bytes>", ...}')

    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"is not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise bad(f"holds a JSON {type(doc).__name__}, not an object")
    keys: dict[str, bytes] = {}
    for kid, text in doc.items():
        if not KEY_ID.fullmatch(kid):
            raise bad(f"has an invalid key id {kid[:60]!r} (use {KEY_ID_RULE})")
        if not isinstance(text, str):
            raise bad(f"holds a JSON {type(text).__name__} for key {kid!r}, not a base64 string")
        try:
            key = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise bad(f"holds key {kid!r} that is not valid base64") from None
        if len(key) != KEY_BYTES:
            raise bad(f"holds key {kid!r} of {plural(len(key), 'byte')}, not {KEY_BYTES} (make one with "
                      "'head -c 32 /dev/urandom | base64')")
        keys[kid] = key
    return keys


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class CustomKeyring:
    """A caller's keyring object (a KMS client): its answers checked, its errors made one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"CustomKeyring({self.inner!r})"

    def get(self, key_id: str) -> bytes:
        try:
            key = self.inner.get(key_id)
        except Exception as e:  # noqa: BLE001 - whatever a KMS client raises
            raise KeyUnavailable(f"master key {key_id!r} is not available from the keyring "
                                 f"{self.inner!r} ({type(e).__name__}: {e})") from None
        if key is None:
            raise KeyUnavailable(f"master key {key_id!r} is not in the keyring {self.inner!r}")
        if not isinstance(key, bytes | bytearray | memoryview) or len(key) != KEY_BYTES:
            raise KeyringError(f"the keyring {self.inner!r} returned "
                               f"{type(key).__name__} for master key {key_id!r}, not "
                               f"{plural(KEY_BYTES, 'byte')}")
        return bytes(key)


def check_outside(keyring: Keyring | None, data_dir: str) -> None:
    """A keyring file inside the data dir it protects is refused: it would be copied, backed
    up and shared with the very data it is meant to keep apart from."""
    if not isinstance(keyring, FileKeyring):
        return
    inside = os.path.realpath(data_dir) + os.sep
    if os.path.realpath(keyring.path).startswith(inside):
        raise KeyringError(f"keyring {keyring.path} is inside the data dir {data_dir}: keep "
                           "master keys outside it (move the file, and point --keyring or "
                           "RIVVEN_KEYRING at its new place)")


def resolve(spec: Any) -> Keyring | None:
    """The keyring ``spec`` names: a path, an object with ``get``, or None for
    ``RIVVEN_KEYRING`` (None when that is unset or empty too)."""
    if spec is None:
        spec = os.environ.get(ENV) or None
        if spec is None:
            return None
    if isinstance(spec, FileKeyring | CustomKeyring):
        return spec
    if isinstance(spec, str | os.PathLike):
        return FileKeyring(os.fspath(spec))
    if callable(getattr(spec, "get", None)):
        return CustomKeyring(spec)
    raise KeyringError(f"keyring {spec!r} is neither a file path nor an object with a "
                       "get(key_id) method")
