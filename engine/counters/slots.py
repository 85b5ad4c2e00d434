"""A process's series values in files of ``.stats/`` that other processes read.

- ``m-<pid>-<rand>.values``: float64 slots, memory-mapped in chunks of 4096. A series'
  handle adds to its slots in place: no system call, and the kernel keeps what was written
  when the process dies, kill -9 included (only a machine crash loses it).
- ``m-<pid>-<rand>.keys``: one line per series, ``<first slot> <JSON [name, labels]>``,
  written before the series' slots are first used. The process holds an exclusive flock on
  this file while it lives: whoever can take it knows the process is gone.

Readers trust nothing in either file: a line must parse, name a known series with exactly
its labels and lie inside the values file (a line that does not is skipped); a values file
larger than ``MAX_SLOTS`` is not read. The values a line names must be ones a process can
count (``check_values``): a file set holding any other is ``Damaged`` as a whole, and so is
one of its two files that is not a regular file (a FIFO, a link, a directory) — never waited
on, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import mmap
import os
import stat
from typing import Any

from ..errors import RivvenError
from ..fs import guard
from ..fs.locks import try_lock
from .names import FAILURES, LAST_SUCCESS, RUNS, SERIES, Series

CHUNK = 4096  # slots per mapping (32 KiB: a multiple of the page size)
MAX_SLOTS = 1 << 23  # 64 MiB of values; a larger file is not read
MAX_LINE = 4096
MAX_KEYS_BYTES = 64 << 20
MAX_LABEL = 512
PREFIX = "m-"
TMP = ".tmp"  # a keys file being made (flocked before it gets its name)
DAMAGED = ".damaged"  # a file set aside (its name + this): never read again

MAX_VALUE = float(1 << 63)  # a count at or past it is no count a process made
Labels = tuple[tuple[str, str], ...]


class Damaged(Exception):
    """A file of ``.stats`` no process wrote as it is: ``path`` (the file to blame) and
    ``why``. Set aside by the gather, never merged."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def check_values(s: Series, vals: list[float]) -> str | None:
    """Why ``vals`` cannot be the slots of a series of kind ``s.kind`` (None: they can).
    Every slot a finite number in [0, 2^63); a histogram's slots are its per-bucket counts
    (whole numbers: cumulative and its +Inf count equal to its count by construction), their
    total below 2^63, no sum without an observation; a run's failures at most its runs."""
    for v in vals:
        if math.isnan(v):
            return "a value is NaN"
        if not math.isfinite(v) or v >= MAX_VALUE:
            return f"a value ({v:g}) is out of range (at most 2^63)"
        if v < 0:
            return f"a value ({v:g}) is negative"
    if s.kind == "histogram":
        counts = vals[:-1]
        if not all(c.is_integer() for c in counts):
            return "a histogram bucket holds a fraction of an observation"
        if sum(counts) >= MAX_VALUE:
            return "a histogram's count is out of range (at most 2^63)"
        if not sum(counts) and vals[-1]:
            return "a histogram has a sum but no observation"
    elif s.kind == "run":
        if not (vals[RUNS].is_integer() and vals[FAILURES].is_integer()):
            return "a run count holds a fraction"
        if vals[FAILURES] > vals[RUNS]:
            return "more failed runs than runs"
        if vals[LAST_SUCCESS] and vals[FAILURES] >= vals[RUNS]:
            return "a last success without a successful run"
    return None


def check_key(name: Any, labels: Any) -> tuple[Series, Labels] | None:
    """The series and its labels, or None when they are not a known series' exactly."""
    s = SERIES.get(name) if isinstance(name, str) else None
    if s is None or not isinstance(labels, dict) or set(labels) != set(s.labels):
        return None
    if not all(isinstance(v, str) and len(v) <= MAX_LABEL for v in labels.values()):
        return None
    return s, tuple((k, labels[k]) for k in s.labels)


class SlotFile:
    """This process's two files (created on the first series), or memory alone when they
    cannot be made (a read-only data dir, a full disk): then other processes do not see
    this one's counts, and this process's own gather still does."""

    def __init__(self, stats_dir: str | None) -> None:
        self.stats_dir = stats_dir
        self.ident = f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
        self.keys_fd = -1
        self.values_fd = -1
        self.chunks: list[Any] = []  # mmap.mmap (a file) or bytearray (memory alone)
        self.views: list[Any] = []  # (float64 views: memoryview.cast("d"))
        self.used = 0
        self.lines: list[tuple[int, str, Labels]] = []  # (slot, name, labels): the key table
        self.failed = stats_dir is None
        self.closed = False

    @property
    def keys_path(self) -> str:
        return os.path.join(self.stats_dir or "", self.ident + ".keys")

    @property
    def values_path(self) -> str:
        return os.path.join(self.stats_dir or "", self.ident + ".values")

    def _open(self) -> None:
        assert self.stats_dir is not None
        tmp = self.keys_path + TMP
        try:
            guard.make_dir(self.stats_dir)
            # the keys file is made under another name and flocked before it is named: a
            # gather never sees this process without its flock (nor thinks it dead)
            fd = guard.open_file(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            self.keys_fd = fd
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.values_fd = guard.open_file(self.values_path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            os.rename(tmp, self.keys_path)
        except (OSError, RivvenError):  # counting never fails a caller
            self._close_fds()
            for p in (tmp, self.values_path):
                with contextlib.suppress(OSError):
                    os.unlink(p)
            self.failed = True

    def allocate(self, name: str, labels: Labels, n: int) -> tuple[Any, int]:
        """(caller holds the meter's lock.) ``n`` consecutive slots in one chunk for a new
        series, its key line written first: (the chunk's view, the first slot in it)."""
        if self.keys_fd < 0 and not self.failed:
            self._open()
        first = self.used
        if first // CHUNK != (first + n - 1) // CHUNK:
            first = (first // CHUNK + 1) * CHUNK  # a series never straddles two chunks
        while len(self.views) <= (first + n - 1) // CHUNK:
            self._grow()
        self.used = first + n
        self.lines.append((first, name, labels))
        if self.keys_fd >= 0:
            line = f"{first} {json.dumps([name, dict(labels)], separators=(',', ':'))}\n"
            try:
                os.write(self.keys_fd, line.encode())
            except OSError:
                pass  # (others miss this series; this process still counts it)
        return self.views[first // CHUNK], first % CHUNK

    def _grow(self) -> None:
        k = len(self.views)
        chunk: Any = None
        if self.values_fd >= 0:
            try:
                # blocks allocated now: a write to a page of a sparse file on a full disk
                # would be a SIGBUS in the middle of a produce
                os.posix_fallocate(self.values_fd, k * CHUNK * 8, CHUNK * 8)
                chunk = mmap.mmap(self.values_fd, CHUNK * 8, offset=k * CHUNK * 8)
            except (OSError, ValueError):
                chunk = None
        if chunk is None:
            chunk = bytearray(CHUNK * 8)
        self.chunks.append(chunk)
        self.views.append(memoryview(chunk).cast("d"))

    def values(self) -> list[tuple[str, Labels, list[float]]]:
        """(from memory) every series of this process with its slot values."""
        out = []
        for first, name, labels in self.lines:
            view = self.views[first // CHUNK]
            i = first % CHUNK
            out.append((name, labels, list(view[i:i + SERIES[name].slots])))
        return out

    def _close_fds(self) -> None:
        for fd in (self.keys_fd, self.values_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.keys_fd = self.values_fd = -1

    def close(self, remove: bool) -> None:
        """(the meter's lock held, its handles unbound) Let the files go (with ``remove``,
        deleted: the caller merged them first) and unmap them (each mapping holds an fd of
        its own). A series counted after this gets memory alone: never a merged file."""
        if remove and self.keys_fd >= 0:
            for p in (self.values_path, self.keys_path):
                with contextlib.suppress(OSError):
                    os.unlink(p)
        self.release()
        self.failed = self.closed = True

    def release(self) -> None:
        """Close the fds and mappings (a forked child: its copies; the files stay)."""
        self._close_fds()
        for view, chunk in zip(self.views, self.chunks):
            if isinstance(chunk, mmap.mmap):
                view.release()
                with contextlib.suppress(BufferError):  # (a count in flight: left mapped)
                    chunk.close()
        self.views, self.chunks, self.lines, self.used = [], [], [], 0


# ---------------------------------------------------------------- other processes' files
def process_files(stats_dir: str) -> list[str]:
    """The idents (``m-<pid>-<rand>``) of every process file set in ``stats_dir``."""
    try:
        names = os.listdir(stats_dir)
    except OSError:
        return []
    return sorted(n[:-5] for n in names if n.startswith(PREFIX) and n.endswith(".keys"))


def remove_unborn(stats_dir: str) -> None:
    """Keys files a process died making (``.keys.tmp`` no longer flocked), with their
    values: nothing was counted in them yet (a series is counted once it is named)."""
    try:
        names = os.listdir(stats_dir)
    except OSError:
        return
    for n in names:
        if n.startswith(PREFIX) and n.endswith(".keys" + TMP):
            ident = n[: -len(".keys" + TMP)]
            with contextlib.suppress(OSError):
                if is_live(stats_dir, ident, ".keys" + TMP) is False:
                    for suffix in (".values", ".keys" + TMP):
                        with contextlib.suppress(OSError):
                            os.unlink(os.path.join(stats_dir, ident + suffix))


def open_regular(path: str) -> int:
    """An fd of a regular file for reading: never a link followed, never a FIFO waited on
    (``Damaged`` for anything but a regular file; FileNotFoundError when it is gone; other
    OSErrors when it cannot be read now)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket or a FIFO's kin
            raise Damaged(path, _kind(path) + ", not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Damaged(path, _kind(path, mode) + ", not a regular file")
    return fd


def _kind(path: str, mode: int | None = None) -> str:
    """What ``path`` is, in words (for a message)."""
    if mode is None:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return "something"
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return word
    return "something"


def read_regular(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file (``open_regular``); None past the limit."""
    fd = open_regular(path)
    try:
        if os.fstat(fd).st_size > limit:
            return None
        parts = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
            if sum(map(len, parts)) > limit:
                return None
        return b"".join(parts)
    finally:
        os.close(fd)


def is_live(stats_dir: str, ident: str, suffix: str = ".keys") -> bool | None:
    """Does the process of ``ident`` still live (its keys file flocked)? None: the file is
    gone; OSError when it cannot be looked at."""
    try:
        fd = open_regular(os.path.join(stats_dir, ident + suffix))
    except FileNotFoundError:
        return None
    try:
        return not try_lock(fd)
    finally:
        os.close(fd)


def read_process(stats_dir: str, ident: str) -> list[tuple[str, Labels, list[float]]] | None:
    """Every series a process file set holds, each checked; lines that do not parse or name
    no known series are skipped, values no process counts (``check_values``) are
    ``Damaged`` (naming the values file). None when the files are gone; OSError when they
    cannot be read now."""
    values_path = os.path.join(stats_dir, ident + ".values")
    try:
        keys = read_regular(os.path.join(stats_dir, ident + ".keys"), MAX_KEYS_BYTES) or b""
        raw = read_regular(values_path, MAX_SLOTS * 8) or b""
    except FileNotFoundError:
        return None
    values = memoryview(raw[: len(raw) - len(raw) % 8]).cast("d")
    out = []
    seen: set[int] = set()
    for line in keys.split(b"\n")[:-1]:  # (a last line without its newline is being written)
        if len(line) > MAX_LINE:
            continue
        first_text, _, doc = line.partition(b" ")
        try:
            first = int(first_text)
            name, labels = json.loads(doc)
        except (ValueError, TypeError, RecursionError):
            continue
        key = check_key(name, labels)
        if key is None or not 0 <= first < MAX_SLOTS or first in seen:
            continue
        s, lab = key
        if first + s.slots > len(values):
            continue  # (the file grows before a key line names its slots: damage)
        seen.add(first)
        slots = list(values[first:first + s.slots])
        why = check_values(s, slots)
        if why is not None:
            raise Damaged(values_path, f"{name} {dict(lab)} at slot {first}: {why}")
        out.append((name, lab, slots))
    return out


def set_aside(stats_dir: str, ident: str) -> list[str]:
    """Rename a damaged file set out of the way (``<file>.damaged``, kept for a look; the
    keys file first: without it the values are never read). Returns the new names."""
    out = []
    for suffix in (".keys", ".values"):
        path = os.path.join(stats_dir, ident + suffix)
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, path + DAMAGED)
            out.append(path + DAMAGED)
    return out


def set_aside_count(stats_dir: str) -> int:
    """How many files of ``stats_dir`` were set aside as damaged (``*.damaged``)."""
    try:
        return sum(1 for n in os.listdir(stats_dir) if n.endswith(DAMAGED))
    except OSError:
        return 0


def remove_process(stats_dir: str, ident: str) -> None:
    """A merged process's files: values first, the keys file (its identity) last."""
    for suffix in (".values", ".keys"):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(stats_dir, ident + suffix))
