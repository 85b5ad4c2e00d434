"""Consumer-group members and partition leases: small files under ``groups/<group>/`` that a
live consumer holds an exclusive flock on.

The kernel drops a flock when its process dies, so liveness needs no heartbeat file: a member
file whose lock can be taken belongs to a dead process (and is removed by whoever finds it), and
a lease whose lock can be taken is free. A consumer reads a partition only while it holds the
partition's lease, so two consumers of one group never read the same partition at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import uuid
from typing import Any
from urllib.parse import quote, unquote

from .. import clock
from ..errors import InvalidArgument, os_error
from ..storage import files
from ..storage.locks import acquire, open_lock_file, try_lock

GROUPS = "groups"
MEMBERS = "members"
LEASES = "leases"
_TMP = ".tmp."


def check_group_name(group: str) -> None:
    if not isinstance(group, str) or not group or len(group) > 249 or group in (".", ".."):
        raise InvalidArgument(f"invalid group name {str(group)[:60]!r}: use 1-249 characters "
                              "(not '.' or '..')")


def group_dir(data_dir: str, group: str) -> str:
    check_group_name(group)
    name = quote(group, safe="")
    if name.startswith("."):  # dot-names are this dir's own debris (.deleted-*)
        name = "%2E" + name[1:]
    return os.path.join(data_dir, GROUPS, name)


def group_names(data_dir: str) -> list[str]:
    root = os.path.join(data_dir, GROUPS)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    for n in names:
        if n.startswith(".deleted-"):  # a 'group delete' cut short
            files.remove_tree(data_dir, os.path.join(root, n))
    return sorted(unquote(n) for n in names if not n.startswith("."))


def _read_json(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 1 << 16, 0)
        out = json.loads(data) if data else {}
        return out if isinstance(out, dict) else {}
    except (OSError, ValueError):
        return {}


class Member:
    """This process's membership: ``members/<id>.json``, locked for the member's life."""

    def __init__(self, gdir: str, member_id: str | None, info: dict[str, Any]) -> None:
        mdir = os.path.join(gdir, MEMBERS)
        files.make_dirs(os.path.dirname(os.path.dirname(gdir)), mdir)
        self.member_id = member_id or f"{info.get('client_id', 'rivven')}-{uuid.uuid4().hex[:12]}"
        if "/" in self.member_id or self.member_id.startswith(".") or len(self.member_id) > 200:
            raise InvalidArgument(f"invalid member id {self.member_id[:60]!r}: no '/', no "
                                  "leading '.', at most 200 characters")
        self.path = os.path.join(mdir, self.member_id + ".json")
        self.info = {"member_id": self.member_id, "pid": os.getpid(),
                     "host": socket.gethostname(), "joined": clock.now_ms(), **info}
        # Lock first under a temporary name, then rename: a file visible under its real name
        # is always already locked, so nobody mistakes a joining member for a dead one.
        tmp = os.path.join(mdir, f"{_TMP}{self.member_id}.{os.getpid()}")
        self.fd = files.open_file(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        acquire(self.fd, tmp)  # (a name of its own: nobody else holds it)
        try:
            os.write(self.fd, json.dumps(self.info).encode())
        except OSError as e:
            os.close(self.fd)
            os.unlink(tmp)
            raise os_error(e, "write", tmp) from e
        if member_id and _alive(self.path):
            os.unlink(tmp)
            os.close(self.fd)
            raise InvalidArgument(f"member id {member_id!r} is in use by a live consumer of this "
                                  "group; use another --member-id or stop that consumer")
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            os.close(self.fd)
            self.fd = -1


def _remove_dead(path: str, fd: int) -> None:
    """(``fd`` opened from ``path`` and locked by us: its member is dead.) Unlink ``path`` only
    if it still names that file: a member restarting with the same id may have renamed its own
    locked file onto ``path`` since we opened it. (It cannot do so from now on: its join
    would find the old file's lock held, by us.)"""
    try:
        if os.stat(path).st_ino == os.fstat(fd).st_ino:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _alive(path: str) -> bool:
    """Is ``path`` locked by a live process? A dead member's file is removed on the way."""
    try:
        fd = files.open_file(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if try_lock(fd):
            _remove_dead(path, fd)
            return False
        return True
    finally:
        os.close(fd)


def live_members(gdir: str) -> list[dict[str, Any]]:
    """The live members of a group, sorted by member id (dead ones are cleaned up)."""
    mdir = os.path.join(gdir, MEMBERS)
    files.check_own_dir(mdir, 3)  # (dead members' files are removed: never through a link)
    try:
        names = sorted(os.listdir(mdir))
    except FileNotFoundError:
        return []
    out = []
    now = time.time()
    for n in names:
        p = os.path.join(mdir, n)
        if n.startswith(_TMP):
            try:  # debris of a member that died while joining
                if now - os.stat(p).st_mtime > 60:
                    _alive(p)
            except FileNotFoundError:
                pass
            continue
        try:
            fd = files.open_file(p, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            if try_lock(fd):
                _remove_dead(p, fd)
                continue
            info = _read_json(fd)
            info.setdefault("member_id", n.removesuffix(".json"))
            out.append(info)
        finally:
            os.close(fd)
    return out


def members_stamp(gdir: str) -> int:
    """Changes when a member joins or leaves cleanly (not when one dies: see live_members)."""
    try:
        return os.stat(os.path.join(gdir, MEMBERS)).st_mtime_ns
    except FileNotFoundError:
        return 0


def lease_name(topic: str, partition: int) -> str:
    return f"{topic}@{partition}"  # '@' never occurs in a topic name


class Leases:
    """The partition leases this consumer holds (an open, flocked fd each)."""

    def __init__(self, gdir: str, member_id: str) -> None:
        self.dir = os.path.join(gdir, LEASES)
        files.make_dirs(os.path.dirname(os.path.dirname(gdir)), self.dir)
        self.member_id = member_id.encode()
        self.held: dict[tuple[str, int], int] = {}

    def acquire(self, topic: str, partition: int) -> bool:
        tp = (topic, partition)
        if tp in self.held:
            return True
        fd = open_lock_file(os.path.join(self.dir, lease_name(topic, partition)))
        if not try_lock(fd):
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, self.member_id, 0)
        except OSError as e:
            os.close(fd)  # (drops the lease again)
            raise os_error(e, "write", os.path.join(self.dir, lease_name(topic, partition))
                           ) from e
        self.held[tp] = fd
        return True

    def release(self, topic: str, partition: int) -> None:
        fd = self.held.pop((topic, partition), -1)
        if fd >= 0:
            os.close(fd)  # closing drops the flock

    def release_all(self) -> None:
        for tp in list(self.held):
            self.release(*tp)


def lease_owners(gdir: str) -> dict[tuple[str, int], str]:
    """Member id holding each held lease of a group."""
    ldir = os.path.join(gdir, LEASES)
    try:
        names = os.listdir(ldir)
    except FileNotFoundError:
        return {}
    out = {}
    for n in names:
        topic, at, part = n.rpartition("@")
        if not at or not part.isdigit():
            continue
        try:
            fd = files.open_file(os.path.join(ldir, n), os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            if try_lock(fd):
                fcntl.flock(fd, fcntl.LOCK_UN)
                continue
            out[(topic, int(part))] = os.pread(fd, 256, 0).decode(errors="replace")
        finally:
            os.close(fd)
    return out
