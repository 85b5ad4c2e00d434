"""The data dir itself: its marker and format version, partition dirs, and the trash.

``rivven.json`` marks a data dir and holds its format version; a writable open of an empty or
new directory makes one (mode 0700: see engine.fs.guard for the mode policy). Directories
that go away (a deleted topic, the debris of a create cut short) are first renamed into
``trash/`` — one atomic step — under a short name of their own (whatever the topic's name:
a name may be 249 characters), then removed; a writable open empties whatever a crash left
there. Nothing is removed through a link (``guard.remove_tree``).
"""

from __future__ import annotations

import json
import os
import time

from ..errors import DataDirError, os_error
from ..fs import durable, guard, jsondoc, reserve
from ..fs.locks import open_lock_file
from ..segments import filenames

FORMAT_VERSION = 1
MARKER = "rivven.json"
TRASH = "trash"
# what the engine keeps in the data dir root: never followed when one of them is a link
OWN_DIRS = ("topics", "wal", TRASH, "groups", "txn", ".compaction", ".tier-cache", ".stats",
            ".streams")
TRASH_NAME_CHARS = 40  # of a topic's name kept in its trash entry's name (for people)


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
