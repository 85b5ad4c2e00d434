"""The data dir itself: its marker and format version, partition dirs, the trash, and the
staging of maintenance passes.

``rivven.json`` marks a data dir and holds its format version; a writable open of an empty or
new directory makes one (mode 0700: see engine.fs.guard for the mode policy). Directories
that go away (a deleted topic, the debris of a create cut short) are first renamed into
``trash/`` — one atomic step — under a short name of their own (whatever the topic's name:
a name may be 249 characters), then removed; a writable open empties whatever a crash left
there. Nothing is removed through a link (``guard.remove_tree``).

A maintenance pass run in process (compaction, re-encryption) stages what it writes in
``.compaction/<kind>-<pid>-<random>/`` and holds that folder's ``lock`` (flock) while it runs
(``staging``). A writable open, and every such pass as it starts, clears the staging of dead
passes (``clear_dead_staging``): a folder whose lock nobody holds and whose process is gone.
The same open removes the temp files that atomic writes of the data dir's root files
(``topics.json``, ``rivven.json``) leave when their process is killed (``NAME.tmp.<pid>``,
the pid gone). The Spark launcher's runs stage in the same folder under their own rule
(engine.spark.submit: a run's folder goes once its lock is free, at the next Spark run).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator

from ..errors import DataDirError, os_error
from ..fs import durable, guard, jsondoc, reserve
from ..fs.locks import open_lock_file, try_lock
from ..segments import filenames

FORMAT_VERSION = 1
MARKER = "rivven.json"
TRASH = "trash"
# what the engine keeps in the data dir root: never followed when one of them is a link
OWN_DIRS = ("topics", "wal", TRASH, "groups", "txn", ".compaction", ".tier-cache", ".stats",
            ".streams", "cold",  # (cold: the default cold store, file://DATA_DIR/cold)
            ".maintenance")  # (the background maintenance's partition locks)
TRASH_NAME_CHARS = 40  # of a topic's name kept in its trash entry's name (for people)
STAGING = ".compaction"  # (named for its first user; the name is on disk)
# in-process passes: <kind>-<pid>-<random> (a repair's: tools.repair's, without a lock file)
STAGING_KINDS = ("local", "reencrypt", "repair")
STAGING_LOCK = "lock"
_STAGED = re.compile(r"(?:local|reencrypt|repair)-([0-9]{1,9})-[0-9a-f]{12}")  # STAGING_KINDS


def check(path: str, read_only: bool) -> None:
    """Make sure ``path`` is a data dir of this format (a writable open creates one)."""
    marker = os.path.join(path, MARKER)
    if os.path.exists(path) and not os.path.isdir(path):
        raise DataDirError(f"data dir {path} is a file, not a directory; pass a directory path")
    if read_only:
        if not os.path.exists(path):
            raise DataDirError(f"no data dir at {path}: create a topic first ('rivven topic "
                               "create NAME') or point --data-dir at an existing one")
        if not os.path.isfile(marker):
            raise DataDirError(f"{path} is not a rivven data dir (no {MARKER}); check --data-dir")
    else:
        _make_writable(path, marker)
    fix = f"is {path} a rivven data dir? restore {MARKER} from a backup"
    try:
        raw = jsondoc.read(marker, "data dir marker", 1 << 16, fix)
    except OSError as e:
        raise DataDirError(f"{marker} is unreadable ({e.strerror or e}); is {path} a rivven "
                           "data dir?") from None
    if raw is None:
        raise DataDirError(f"{path} is not a rivven data dir (no {MARKER}); check --data-dir")
    doc = jsondoc.loads(raw, marker, "data dir marker", fix)
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT_VERSION:
        raise DataDirError(f"{path} has data format {fmt}; this rivven reads format "
                           f"{FORMAT_VERSION} — upgrade rivven")
    jsondoc.get_int(doc, "format", marker, "data dir marker", FORMAT_VERSION, FORMAT_VERSION,
                    fix)


def _make_writable(path: str, marker: str) -> None:
    try:
        if not os.path.isdir(path):
            # (the root itself may be a link: it is what the user pointed us at)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
        for name in OWN_DIRS:
            guard.real_dir(os.path.join(path, name))  # (raises for a link)
        if not os.path.isfile(marker):
            if [f for f in os.listdir(path) if not f.startswith(".")]:
                raise DataDirError(
                    f"{path} is not a rivven data dir (it has files but no {MARKER}); "
                    "pass an empty or new directory with --data-dir")
            guard.make_dir(os.path.join(path, "topics"))
            durable.write_atomic(marker, json.dumps({"format": FORMAT_VERSION}).encode())
        probe = os.path.join(path, ".write-probe")
        os.close(guard.open_file(probe, os.O_WRONLY | os.O_CREAT))
        reserve.keep_reserve(path)
    except PermissionError as e:
        raise DataDirError(f"data dir {path} is not writable ({e.strerror}); "
                           "fix its permissions or choose another --data-dir") from None
    except OSError as e:
        raise DataDirError(f"cannot use data dir {path}: {e.strerror or e}") from None


def make_partition(data_dir: str, topic: str, p: int) -> None:
    """A partition's directory with its lock file and an empty first segment, durable."""
    d = filenames.partition_dir(data_dir, topic, p)
    try:
        guard.make_dirs(data_dir, d)
        os.close(open_lock_file(os.path.join(d, filenames.LOCK_FILE)))
        for suffix in filenames.SEGMENT_FILES:
            os.close(guard.open_file(filenames.path(d, 0, suffix), os.O_WRONLY | os.O_CREAT))
        durable.fsync_dir(d)
        durable.fsync_dir(os.path.dirname(d))
    except OSError as e:
        raise os_error(e, "create", d) from e


def trash(data_dir: str, directory: str, name: str) -> None:
    """Remove ``directory``: renamed into the trash first, so it is whole or gone. The trash
    entry's name is bounded (``<first 40 characters of name>-<ns>-<pid>``): a file name has
    at most 255 bytes, a topic name up to 249."""
    root = os.path.join(data_dir, TRASH)
    try:
        guard.make_dir(root)
        target = os.path.join(root, f"{name[:TRASH_NAME_CHARS]}-{time.time_ns()}-{os.getpid()}")
        os.rename(directory, target)
    except OSError as e:
        raise os_error(e, "move to the trash", directory) from e
    guard.remove_tree(data_dir, target)


def empty_trash(data_dir: str) -> None:
    """Remove what a crash left in the trash (never through a link: UnexpectedLink)."""
    root = os.path.join(data_dir, TRASH)
    if guard.real_dir(root):
        for name in os.listdir(root):
            guard.remove_tree(data_dir, os.path.join(root, name))


def clear_debris(data_dir: str) -> None:
    """What dead processes left (a writable open): the trash, the staging of dead passes,
    the temp files of atomic writes of the root's files."""
    empty_trash(data_dir)
    clear_dead_staging(data_dir)
    for name in os.listdir(data_dir):
        stem, sep, pid = name.rpartition(".tmp.")
        if sep and stem and pid.isdigit() and len(pid) < 10 and not alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(data_dir, name))


def alive(pid: int) -> bool:
    """Is process ``pid`` running (as far as this process can tell)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # (another user's)
    return True


@contextlib.contextmanager
def staging(data_dir: str, kind: str) -> Iterator[str]:
    """A new staging folder ``.compaction/<kind>-<pid>-<random>`` for one pass in this
    process, its lock held while the pass runs; removed afterwards (and, when this process is
    killed, by the next writable open or pass). The staging of dead passes is cleared first."""
    assert kind in STAGING_KINDS
    clear_dead_staging(data_dir)
    path = os.path.join(data_dir, STAGING, f"{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    guard.make_dirs(data_dir, path)
    fd = open_lock_file(os.path.join(path, STAGING_LOCK))
    try:
        try_lock(fd)  # (a new file: nobody else holds it)
        try:
            yield path
        finally:
            guard.remove_tree(data_dir, path)
    finally:
        os.close(fd)


def clear_dead_staging(data_dir: str) -> None:
    """Remove the staging folders of in-process passes that died: their lock is free (or was
    never taken) and their process is gone. A live pass always holds its lock; the process
    check covers the moment between its folder's creation and the lock."""
    root = os.path.join(data_dir, STAGING)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        m = _STAGED.fullmatch(name)
        if m is None or alive(int(m.group(1))):
            continue
        d = os.path.join(root, name)
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode):  # (a link goes, never followed)
                guard.remove_tree(data_dir, d)
                continue
            fd = guard.open_file(os.path.join(d, STAGING_LOCK), os.O_RDWR)
        except FileNotFoundError:  # killed before it took its lock (or gone meanwhile)
            guard.remove_tree(data_dir, d)
            continue
        try:
            if try_lock(fd):
                guard.remove_tree(data_dir, d)
        finally:
            os.close(fd)
