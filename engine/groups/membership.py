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
import unicodedata
import uuid
from typing import Any
from urllib.parse import quote, unquote

from .. import clock
from ..errors import (
    DamagedMetadata,
    GroupKindConflict,
    InvalidArgument,
    RivvenError,
    os_error,
    plural,
)
from ..fs import guard, jsondoc
from ..fs.locks import acquire, open_lock_file, try_lock

GROUPS = "groups"
MEMBERS = "members"
LEASES = "leases"
_TMP = ".tmp."
# A group is rivven-native (engine.groups.consumer.Consumer members) or Kafka-protocol (its
# members are Kafka clients of a `rivven serve`) while it has live members, never both: the
# server holds a member file of kind KAFKA for the group while its group has members, and
# writes what it knows of them to DETAILS (advisory, read only while that file lives).
NATIVE, KAFKA = "rivven", "kafka"
DETAILS = "kafka.json"
MAX_DETAILS = 16 << 20  # a details file larger than this is not read


MAX_NAME_BYTES = 255  # one path component (NAME_MAX) on Linux and macOS
MAX_GROUP_CHARS = 249
MAX_MEMBER_CHARS = 200
MAX_MEMBER_BYTES = MAX_NAME_BYTES - len(".json")  # members/<id>.json
DEFAULT_ID_SUFFIX = 13  # "-" + 12 hex digits after the client id in a default member id
MAX_CLIENT_CHARS = MAX_MEMBER_CHARS - DEFAULT_ID_SUFFIX
MAX_CLIENT_BYTES = MAX_MEMBER_BYTES - DEFAULT_ID_SUFFIX


def check_group_name(group: str, new: bool = False) -> None:
    """A name every group operation can use: 1-249 characters whose directory name (the
    name percent-encoded) fits one path component. ``new`` (joining a group, committing to
    it) also refuses control characters, which no existing group needs to be read or deleted."""
    check_name(group, "group name", new)


def check_name(name: str, what: str, new: bool = False, max_bytes: int = MAX_NAME_BYTES,
               as_name: str = "a directory name") -> None:
    """A user-chosen name kept on disk percent-encoded (``encoded_name``): a group's, a
    transactional id's. 1-249 characters, at most ``max_bytes`` once encoded; ``new`` also
    refuses control characters (see check_group_name)."""
    if not isinstance(name, str) or not name or name in (".", ".."):
        raise InvalidArgument(f"invalid {what} {str(name)[:60]!r}: use 1 to "
                              f"{MAX_GROUP_CHARS} characters (not '.' or '..')")
    _check_text(name, what)
    size = len(encoded_name(name))
    if len(name) > MAX_GROUP_CHARS or size > max_bytes:
        raise InvalidArgument(
            f"{what} {_cut(name)!r} is too long: {len(name)} characters, {size} bytes as "
            f"{as_name}; a {what} has at most {MAX_GROUP_CHARS} characters and "
            f"{plural(max_bytes, 'byte')} once percent-encoded (letters, digits and _ . - ~ take "
            "1 byte, any other character 3 per UTF-8 byte: é takes 6, an emoji 12)")
    if new:
        _check_controls(name, what)


def check_member_id(member_id: str, what: str = "member id", max_chars: int = MAX_MEMBER_CHARS,
                    max_bytes: int = MAX_MEMBER_BYTES) -> None:
    """A member id (or client id) that fits its file name ``members/<id>.json``."""
    if not isinstance(member_id, str) or not member_id:
        raise InvalidArgument(f"invalid {what} {member_id!r}: use 1 to {max_chars} characters")
    _check_text(member_id, what)
    if "/" in member_id or member_id.startswith("."):
        raise InvalidArgument(f"invalid {what} {_cut(member_id)!r}: no '/' and no leading '.'")
    _check_controls(member_id, what)
    size = len(member_id.encode())
    if len(member_id) > max_chars or size > max_bytes:
        raise InvalidArgument(
            f"{what} {_cut(member_id)!r} is too long: {len(member_id)} characters, {size} "
            f"bytes in UTF-8; a {what} has at most {max_chars} characters and {max_bytes} "
            "bytes in UTF-8 (é takes 2, an emoji 4)")


def _check_text(name: str, what: str) -> None:
    try:
        name.encode()
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"invalid {what} {_cut(name)!r}: character {e.start + 1} is not "
                              "valid text (bytes that are not UTF-8?)") from None


def _check_controls(name: str, what: str) -> None:
    for i, ch in enumerate(name):
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            raise InvalidArgument(f"invalid {what} {_cut(name)!r}: character {i + 1} is a "
                                  f"control character (U+{ord(ch):04X}); control characters "
                                  "and line breaks are not allowed")


def _cut(name: str) -> str:
    return name if len(name) <= 60 else name[:60] + "..."


def encoded_name(name: str) -> str:
    """``name`` percent-encoded as one path component (a group's directory, a transactional
    id's file): only letters, digits and ``_ . - ~`` stay as they are, and a leading dot is
    encoded too (dot-names are a directory's own debris, e.g. ``.deleted-*``)."""
    out = quote(name, safe="")
    if out.startswith("."):
        out = "%2E" + out[1:]
    return out


def group_dir(data_dir: str, group: str) -> str:
    check_group_name(group)
    return os.path.join(data_dir, GROUPS, encoded_name(group))


def group_names(data_dir: str, tidy: bool = True) -> list[str]:
    """The data dir's groups; with ``tidy``, what a 'group delete' cut short is removed."""
    root = os.path.join(data_dir, GROUPS)
    try:
        names = set(os.listdir(root))
    except FileNotFoundError:
        return []
    for n in names:
        if tidy and n.startswith(".deleted-"):  # a 'group delete' cut short
            guard.remove_tree(data_dir, os.path.join(root, n))
    return sorted(g for g in map(unquote, names) if _is_group_dir(g, names))


def _is_group_dir(group: str, names: set[str]) -> bool:
    """Is ``group`` the name of one of ``names``? (A directory that no group name maps to,
    e.g. one made by hand, is not a group.)"""
    try:
        check_group_name(group)
    except InvalidArgument:
        return False
    return encoded_name(group) in names


def _read_json(fd: int, path: str) -> dict[str, Any]:
    """A member file's information (what the member wrote about itself; unchecked content
    reads as nothing)."""
    try:
        data = os.pread(fd, 1 << 16, 0)
        out = jsondoc.loads(data, path, "member file") if data else {}
    except (OSError, DamagedMetadata):
        return {}
    if not isinstance(out, dict):
        return {}
    topics = out.get("topics")
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        out["topics"] = []
    return out


class Member:
    """This process's membership: ``members/<id>.json``, locked for the member's life."""

    def __init__(self, gdir: str, member_id: str | None, info: dict[str, Any]) -> None:
        mdir = os.path.join(gdir, MEMBERS)
        guard.make_dirs(os.path.dirname(os.path.dirname(gdir)), mdir)
        self.member_id = member_id or f"{info.get('client_id', 'rivven')}-{uuid.uuid4().hex[:12]}"
        check_member_id(self.member_id)
        os.makedirs(mdir, exist_ok=True)
        self.path = os.path.join(mdir, self.member_id + ".json")
        self.info = {"member_id": self.member_id, "pid": os.getpid(),
                     "host": socket.gethostname(), "joined": clock.now_ms(), **info}
        # Lock first under a temporary name, then rename: a file visible under its real name
        # is always already locked, so nobody mistakes a joining member for a dead one.
        # (named without the id, which may take a whole file name's 250 bytes itself)
        tmp = os.path.join(mdir, f"{_TMP}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.fd = guard.open_file(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
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


def kind(info: dict[str, Any]) -> str:
    """A live member's kind: KAFKA (a server's mark of a Kafka-protocol group) or NATIVE."""
    return KAFKA if info.get("kind") == KAFKA else NATIVE


class ProtocolMark(Member):
    """The mark a ``rivven serve`` holds on a group it coordinates over Kafka's protocol while
    the group has members: a member file of kind KAFKA (flocked: the kernel drops it with the
    server), and ``DETAILS`` beside it: the members as the server sees them."""

    def __init__(self, gdir: str, info: dict[str, Any]) -> None:
        super().__init__(gdir, f"kafka-{os.getpid()}-{uuid.uuid4().hex[:8]}",
                         {**info, "kind": KAFKA, "topics": []})
        self.details_path = os.path.join(gdir, DETAILS)

    def publish(self, details: dict[str, Any]) -> None:
        """Replace the details (tmp, rename: a reader sees the old or the new; no fsync: they
        describe live members, which a crash ends anyway)."""
        if self.fd < 0:
            return
        data = json.dumps({**details, "mark": self.member_id}, separators=(",", ":")).encode()
        tmp = f"{self.details_path}{_TMP}{os.getpid()}"
        fd = guard.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            raise os_error(e, "write", tmp) from e
        finally:
            os.close(fd)
        os.replace(tmp, self.details_path)

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.unlink(self.details_path)
            except FileNotFoundError:
                pass
        super().close()


def read_details(gdir: str, mark: dict[str, Any]) -> dict[str, Any]:
    """The details a live mark's server published (``{}``: none yet, or not of that mark)."""
    path = os.path.join(gdir, DETAILS)
    try:
        fd = guard.open_file(path, os.O_RDONLY)
    except (OSError, RivvenError):
        return {}
    try:
        data = os.pread(fd, MAX_DETAILS + 1, 0)
    except OSError:
        return {}
    finally:
        os.close(fd)
    try:
        out = jsondoc.loads(data, path, "group details") if len(data) <= MAX_DETAILS else {}
    except DamagedMetadata:
        return {}
    if not isinstance(out, dict) or out.get("mark") != mark.get("member_id"):
        return {}
    members = out.get("members")
    out["members"] = [m for m in members if isinstance(m, dict)] if isinstance(members,
                                                                               list) else []
    return out


def claim(gdir: str, group: str, info: dict[str, Any]) -> ProtocolMark:
    """Mark ``group`` as Kafka-protocol (this process's server coordinates it): refused with
    GroupKindConflict while it has live members of any other kind or owner. The mark is made
    first and the others looked for after, as a native consumer does the other way round:
    of two that start at once, at least one sees the other."""
    mark = ProtocolMark(gdir, info)
    others = [m for m in live_members(gdir) if m["member_id"] != mark.member_id]
    if others:
        mark.close()
        if kind(others[0]) == KAFKA:
            raise GroupKindConflict(
                f"group {group!r} is coordinated by another rivven serve on this data dir "
                f"(pid {others[0].get('pid')}); use that server or another group id")
        ids = ", ".join(str(m.get("member_id")) for m in others[:3])
        raise GroupKindConflict(
            f"group {group!r} has {plural(len(others), 'live rivven consumer')} ({ids}); a "
            "group is either rivven-native or Kafka-protocol while it has live members: stop "
            "them or use another group id")
    return mark


def refuse_kafka_members(gdir: str, group: str, own: str) -> None:
    """(A native member ``own`` just joined.) GroupKindConflict if a server holds the group
    for Kafka-protocol members."""
    for m in live_members(gdir):
        if kind(m) == KAFKA and m["member_id"] != own:
            n = len(read_details(gdir, m).get("members", ()))
            raise GroupKindConflict(
                f"group {group!r} has live Kafka-protocol members ({plural(n, 'member')} "
                f"through rivven serve, pid {m.get('pid')}); a group is either rivven-native "
                "or Kafka-protocol while it has live members: stop them or use another group")


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
        fd = guard.open_file(path, os.O_RDWR)
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
    guard.check_own_dir(mdir, 3)  # (dead members' files are removed: never through a link)
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
            fd = guard.open_file(p, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            if try_lock(fd):
                _remove_dead(p, fd)
                continue
            info = _read_json(fd, p)
            info["member_id"] = n.removesuffix(".json")  # (its file name is its id)
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
        guard.make_dirs(os.path.dirname(os.path.dirname(gdir)), self.dir)
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
            fd = guard.open_file(os.path.join(ldir, n), os.O_RDWR)
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
