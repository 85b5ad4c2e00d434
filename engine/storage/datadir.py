"""The data dir itself: its marker and format version, partition dirs, and the trash.

``rivven.json`` marks a data dir and holds its format version; a writable open of an empty or
new directory makes one. Directories that go away (a deleted topic, the debris of a create cut
short) are first renamed into ``trash/`` — one atomic step — then removed; a writable open
empties whatever a crash left there.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from ..errors import DataDirError
from . import files, jsondoc
from .locks import open_lock_file

FORMAT_VERSION = 1
MARKER = "rivven.json"
TRASH = "trash"


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
        os.makedirs(path, exist_ok=True)
        if not os.path.isfile(marker):
            if [f for f in os.listdir(path) if not f.startswith(".")]:
                raise DataDirError(
                    f"{path} is not a rivven data dir (it has files but no {MARKER}); "
                    "pass an empty or new directory with --data-dir")
            os.makedirs(os.path.join(path, "topics"), exist_ok=True)
            files.write_atomic(marker, json.dumps({"format": FORMAT_VERSION}).encode())
        probe = os.path.join(path, ".write-probe")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644))
    except PermissionError as e:
        raise DataDirError(f"data dir {path} is not writable ({e.strerror}); "
                           "fix its permissions or choose another --data-dir") from None
    except OSError as e:
        if isinstance(e, DataDirError):
            raise
        raise DataDirError(f"cannot use data dir {path}: {e.strerror or e}") from None


def make_partition(data_dir: str, topic: str, p: int) -> None:
    """A partition's directory with its lock file and an empty first segment, durable."""
    d = files.partition_dir(data_dir, topic, p)
    os.makedirs(d, exist_ok=True)
    os.close(open_lock_file(os.path.join(d, files.LOCK_FILE)))
    for suffix in files.SEGMENT_FILES:
        os.close(os.open(files.path(d, 0, suffix), os.O_WRONLY | os.O_CREAT, 0o644))
    files.fsync_dir(d)
    files.fsync_dir(os.path.dirname(d))


def trash(data_dir: str, directory: str, name: str) -> None:
    """Remove ``directory``: renamed into the trash first, so it is whole or gone."""
    root = os.path.join(data_dir, TRASH)
    os.makedirs(root, exist_ok=True)
    target = os.path.join(root, f"{name}-{time.time_ns()}")
    os.rename(directory, target)
    shutil.rmtree(target, ignore_errors=True)


def empty_trash(data_dir: str) -> None:
    root = os.path.join(data_dir, TRASH)
    if os.path.isdir(root):
        for name in os.listdir(root):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
