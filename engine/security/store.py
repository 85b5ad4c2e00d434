"""A sealed JSON document of the data dir's ``security/`` directory (users, ACLs).

The directory is 0700 and its files 0600 whatever the data dir's group policy: credentials
are for the owner alone. A change is read-modify-write under the document's lock file and
written atomically (``write_atomic``); a reader (a running ``rivven serve``) sees another
process's change at its next ``read()``: the file's identity (inode, size, mtime) is compared
with a ``stat`` and the document read again only when it differs."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from typing import Any

from ..errors import DamagedMetadata, StorageError, plural
from ..fs import guard, jsondoc
from ..fs.durable import write_atomic
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path

DIR = "security"
VERSION = 1
_MISSING = (-1, -1, -1, -1)  # (the identity of no file: no inode is -1)


class SecureDoc:
    def __init__(self, data_dir: str, name: str, what: str, key: str,
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self.dir = os.path.join(data_dir, DIR)
        self.path = os.path.join(self.dir, name)
        self.what = what
        self.key = key  # the document's one top-level entry besides "version"
        self.lock_wait = lock_wait
        self._seen: tuple[int, int, int, int] | None = None
        self._doc: Any = None
        self._mutex = threading.Lock()

    def read(self) -> Any:
        """The document's entry (``{}``/``[]`` when there is no file), read again only when
        the file changed since the last read."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:  # (the same empty value while there is no file: a
            with self._mutex:       # caller's cache of what it built from it holds)
                if self._seen != _MISSING or self._doc is None:
                    self._seen, self._doc = _MISSING, self._empty()
                return self._doc
        except OSError as e:
            raise StorageError(f"cannot read {self.what} {self.path}: {e.strerror}") from None
        seen = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._mutex:
            if seen != self._seen or self._doc is None:
                if not stat.S_ISREG(st.st_mode):
                    raise DamagedMetadata(f"{self.what} {self.path} is not a regular file: "
                                          "remove it", self.path)
                if st.st_size > 256 << 20:
                    raise DamagedMetadata(f"{self.what} {self.path} is {plural(st.st_size, 'byte')}, "
                                          "past any rivven writes: it is not rivven's",
                                          self.path)
                self._doc = self._load()
                self._seen = seen
            return self._doc

    def _empty(self) -> Any:
        return {} if self.key == "users" else []

    def _load(self) -> Any:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return self._empty()
        fix = "restore it from a backup, or remove it (and add them again)"
        doc = jsondoc.unseal(raw, self.path, self.what, fix)
        if doc.get("version") != VERSION or self.key not in doc:
            raise jsondoc.damaged(self.path, self.what,
                                  f"version {doc.get('version')!r}, {VERSION} expected", fix)
        value = doc[self.key]
        if not isinstance(value, type(self._empty())):
            raise jsondoc.damaged(self.path, self.what, f"{self.key} is not a JSON "
                                  f"{type(self._empty()).__name__}", fix)
        return value

    def update(self, change: Callable[[Any], Any]) -> Any:
        """Under the lock: ``change(current)`` returns ``(new value, result)``; the new
        value is written (not when it is None) and the result returned."""
        self._make_dir()
        with lock_path(self.path + ".lock", self.lock_wait):
            self._seen = None
            current = self._load()
            new, result = change(current)
            if new is not None:
                write_atomic(self.path, jsondoc.seal({"version": VERSION, self.key: new},
                                                     indent=1))
                self._seen = None
            return result

    def _make_dir(self) -> None:
        guard.make_dir(self.dir)
        st = os.stat(self.dir, follow_symlinks=False)
        if st.st_mode & 0o7777 != 0o700 and st.st_uid == os.geteuid():
            os.chmod(self.dir, 0o700)
