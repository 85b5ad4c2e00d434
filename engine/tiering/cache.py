"""A bounded local cache of cold segments, so reads of tiered offsets run at local speed.

A cold segment is downloaded whole (``.log`` and both indexes, each checked against the
manifest's size and CRC32C) into a private folder, then renamed into place: a folder in the
cache is always complete. Least recently opened folders are evicted past
``tier.cache.max.bytes``; a reader that still has a file open keeps reading it. Several
processes of one user may share the cache: a download race ends with one rename winning.

Nothing in the cache is believed unchecked (another local user, or a disk, may have put it
there):

- The root is a private directory, checked (``lstat``, never followed) before every download
  and every first open of a cached copy: a real directory, not a symlink, owned by this
  process's effective uid, without group or other write bits (the read/search bits an older
  rivven left, 0755, are taken away with ``fchmod`` on a descriptor opened ``O_NOFOLLOW``).
  ``DATA_DIR/.tier-cache`` that fails is refused (DataDirError naming it and the fix: it is
  the data dir owner's to mend). The temp-dir root of a read-only data dir,
  ``/tmp/rivven-tier-cache-<uid>-<hash>``, has a name anyone can create first: when it fails,
  this engine caches in a fresh private directory of its own (``mkdtemp``), removed when it
  closes.
- A cached copy is checked against the manifest's size and CRC32C (all three files) the
  first time this process opens it; one that differs is removed and downloaded again. The
  process then keeps the files open and trusts them (only this user can write the root).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
import uuid

from ..counters.meter import Meter
from ..errors import ColdObjectError, DataDirError, RivvenError, plural
from ..format.crc import crc32c
from ..fs import guard
from ..segments import filenames
from ..segments.segment import Segment
from ..segments.tier_manifest import ColdSegment
from . import cold

TMP_PREFIX = ".tmp-"
CACHE_DIR = ".tier-cache"
CHUNK = 1 << 20


def cache_root(data_dir: str) -> str:
    """The cold-segment cache: in the data dir, or (read-only data dir) a temp folder."""
    root = os.path.join(data_dir, CACHE_DIR)
    if os.access(data_dir, os.W_OK):
        return root
    tag = hashlib.sha1(data_dir.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"rivven-tier-cache-{os.getuid()}-{tag}")


def trusted_group(data_dir: str, root: str) -> int | None:
    """The group trusted with the cache at ``root`` (see ``not_private``): the data dir's,
    when ``root`` is the data dir's own cache and the data dir is group-shared."""
    if root != os.path.join(data_dir, CACHE_DIR) or guard.modes(data_dir)[1] == 0o700:
        return None
    return os.stat(data_dir).st_gid


def not_private(st: os.stat_result, group: int | None = None) -> str | None:
    """What makes the directory ``st`` (from lstat) unfit for this process's cache, if
    anything: a symlink, not a directory, another owner, group/other write bits. With
    ``group`` (the cache of a group-shared data dir: fs.guard.modes) the data dir's
    group is trusted as the data dir trusts it: a member of it may own the cache, and the
    group may write it; others never."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid() and (group is None or st.st_gid != group):
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & (0o002 if group is not None else 0o022):
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_dir(path: str, group: int | None = None) -> str | None:
    """Make ``path`` a private directory (0700; 2770 in a group-shared data dir) when
    missing; None when it is one (read/search bits of others, and of the group unless it is
    shared, are taken away), else what is wrong with it (left as it is)."""
    if group is not None:
        try:
            guard.make_dir(path)
        except RivvenError:
            pass  # (a link: not_private names it)
    else:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    st = os.lstat(path)
    problem = not_private(st, group)
    extra = st.st_mode & (0o007 if group is not None else 0o077)
    if problem is None and extra and st.st_uid == os.geteuid():
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return "changed while it was checked"
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~extra)
        finally:
            os.close(fd)
    return problem


def file_crc(path: str) -> tuple[int, int]:
    """(bytes, CRC32C) of a local file, read whole, not following a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with open(fd, "rb", buffering=0) as f:
        size = value = 0
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            value = crc32c(view[:n], value)
            size += n
        return size, value


def copy_problem(entry: ColdSegment, d: str) -> str | None:
    """None when the cached copy in ``d`` matches the manifest (size and CRC32C of all three
    files), else what differs (a missing file raises FileNotFoundError)."""
    for suffix in entry.suffixes():
        p = filenames.path(d, entry.base_offset, suffix)
        want = entry.expected(suffix)
        if os.lstat(p).st_size != want[0]:
            return f"{p} holds {plural(os.lstat(p).st_size, 'byte')}, the manifest records {want[0]}"
        got = file_crc(p)
        if got != want:
            return (f"{p} holds {plural(got[0], 'byte')} with CRC32C {got[1]:#010x}, the manifest "
                    f"records {plural(want[0], 'byte')} with {want[1]:#010x}")
    return None


class ColdCache:
    def __init__(self, root: str, max_bytes: int, fallback: bool = False,
                 group: int | None = None, meter: Meter | None = None) -> None:
        self.root = root
        m = meter if meter is not None else Meter(None, enabled=False)
        self.m_hits = m.get("rivven_cold_cache_hits_total")
        self.m_misses = m.get("rivven_cold_cache_misses_total")
        self.m_bytes = m.get("rivven_cold_cache_download_bytes_total")
        self.group = group  # the group of a group-shared data dir (see not_private)
        self.max_bytes = max_bytes
        self.fallback = fallback  # a bad root: use a fresh private one (else refuse)
        self.own_root = False  # the root is this engine's own mkdtemp (removed at close)
        self._lock = threading.Lock()
        self._open: dict[str, Segment] = {}
        self.hits = 0
        self.downloads = 0
        self.downloaded_bytes = 0

    @classmethod
    def for_data_dir(cls, data_dir: str, max_bytes: int, meter: Meter | None = None
                     ) -> ColdCache:
        """The cache of an engine over ``data_dir`` (see ``cache_root``)."""
        root = cache_root(data_dir)
        return cls(root, max_bytes, fallback=root != os.path.join(data_dir, CACHE_DIR),
                   group=trusted_group(data_dir, root), meter=meter)

    def close(self) -> None:
        with self._lock:
            self._open.clear()
            if self.own_root:
                shutil.rmtree(self.root, ignore_errors=True)

    def _check_root(self) -> None:
        """(Lock held.) The root is private, or becomes a fresh private one, or DataDirError."""
        try:
            problem = private_dir(self.root, self.group)
        except OSError as e:
            problem = f"cannot be made or checked ({e.strerror or e})"
        if problem is None:
            return
        if not self.fallback or self.own_root:
            raise DataDirError(
                f"the cold cache {self.root} {problem}: rivven does not use it, another user "
                f"could have put data there; remove it (rm -r '{self.root}'), it is only a "
                "cache, and retry")
        self.root = tempfile.mkdtemp(prefix="rivven-tier-cache-")
        self.own_root = True

    def folder(self, entry: ColdSegment) -> str:
        return os.path.join(self.root, hashlib.sha1(entry.object.encode()).hexdigest()[:24])

    def segment(self, entry: ColdSegment) -> Segment:
        """A read-only Segment over the cached copy of ``entry`` (downloaded when missing,
        checked against the manifest when this process first opens it)."""
        with self._lock:
            seg = self._open.get(entry.object)
            if seg is not None and os.path.exists(seg.path):
                self.hits += 1
                self.m_hits.inc()
                return seg
            self._check_root()
            d = self.folder(entry)
            for attempt in range(3):  # another process may evict it between look and open
                try:
                    seg = self._open_cached(entry, d)
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise
            assert seg is not None
            seg.size = entry.bytes
            seg.next_offset = entry.next_offset
            seg.max_timestamp = entry.max_timestamp
            seg.loaded = True
            self._open[entry.object] = seg
            self._evict(keep=d)
            return seg

    def _open_cached(self, entry: ColdSegment, d: str) -> Segment:
        try:
            intact = copy_problem(entry, d) is None
        except OSError:
            intact = False
        if intact:
            self.hits += 1
            self.m_hits.inc()
            os.utime(filenames.path(d, entry.base_offset, filenames.LOG), follow_symlinks=False)
        else:
            guard.remove_tree(self.root, d)  # (an incomplete or altered copy)
            if not self._download(entry, d) and copy_problem(entry, d) is not None:
                raise FileNotFoundError(d)  # another process's copy, altered: again
        return Segment(d, entry.base_offset, writable=False)

    def _download(self, entry: ColdSegment, d: str) -> bool:
        """Download into ``d``; False when another process put a copy there first."""
        tmp = os.path.join(self.root, f"{TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        guard.make_dir(tmp)
        try:
            n = download_segment(entry, tmp)
            self.downloaded_bytes += n
            self.downloads += 1
            self.m_misses.inc()
            self.m_bytes.inc(n)
            try:
                os.rename(tmp, d)
            except OSError:  # another process put it there first
                if not os.path.isdir(d):
                    raise
                return False
            return True
        finally:
            guard.remove_tree(self.root, tmp)

    def forget(self, obj: str) -> None:
        """Remove the cached copy of the cold object ``obj`` (replaced or deleted: a copy of
        what a re-encryption rewrote must not linger in plaintext)."""
        with self._lock:
            seg = self._open.pop(obj, None)
            d = os.path.join(self.root, hashlib.sha1(obj.encode()).hexdigest()[:24])
            if seg is not None or os.path.isdir(d):
                guard.remove_tree(self.root, d)

    def _evict(self, keep: str) -> None:
        """Drop least recently opened folders until the cache fits (never ``keep``)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        folders = []
        total = 0
        now = time.time()
        for n in names:
            d = os.path.join(self.root, n)
            try:
                entries = list(os.scandir(d))
                size = sum(e.stat().st_size for e in entries)
                used = max((e.stat().st_mtime for e in entries), default=0.0)
            except OSError:
                continue
            if n.startswith(TMP_PREFIX):
                try:  # (its own mtime: a download that just began holds no file yet)
                    if now - max(used, os.stat(d).st_mtime) > 3600:
                        guard.remove_tree(self.root, d)  # a downloader died
                except FileNotFoundError:
                    pass
                continue
            total += size
            folders.append((used, d, size))
        folders.sort()
        for _, d, size in folders:
            if total <= self.max_bytes:
                break
            if d == keep:
                continue
            guard.remove_tree(self.root, d)
            total -= size
            for obj, seg in list(self._open.items()):
                if seg.directory == d:
                    del self._open[obj]  # closed when its last reader lets go

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "downloads": self.downloads,
                "downloaded_bytes": self.downloaded_bytes}


def download_segment(entry: ColdSegment, dest_dir: str) -> int:
    """Fetch a cold segment's three files into ``dest_dir`` (named as in a partition dir),
    each checked against the manifest's size and CRC32C; returns the bytes fetched."""
    total = 0
    for suffix in entry.suffixes():
        url = entry.url(suffix)
        got = cold.fetch(url, filenames.path(dest_dir, entry.base_offset, suffix))
        want = entry.expected(suffix)
        if got != want:
            raise ColdObjectError(
                f"cold object {url} is damaged: it holds {plural(got[0], 'byte')} with CRC32C "
                f"{got[1]:#010x}, the tier manifest records {plural(want[0], 'byte')} with "
                f"{want[1]:#010x}; check the cold store with 'rivven segment verify --cold'")
        total += got[0]
    return total
