"""A bounded local cache of cold segments, so reads of tiered offsets run at local speed.

A cold segment is downloaded whole (``.log`` and both indexes, each checked against the
manifest's size and CRC32C) into a private folder, then renamed into place: a folder in the
cache is always complete. Least recently opened folders are evicted past
``tier.cache.max.bytes``; a reader that still has a file open keeps reading it. Several
processes may share the cache: a download race ends with one rename winning.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
import uuid

from ..errors import ColdObjectError
from ..storage import files
from ..storage.segment import Segment
from ..storage.tier_manifest import SUFFIXES, ColdSegment
from . import cold

TMP_PREFIX = ".tmp-"


def cache_root(data_dir: str) -> str:
    """The cold-segment cache: in the data dir, or (read-only data dir) a temp folder."""
    root = os.path.join(data_dir, ".tier-cache")
    if os.access(data_dir, os.W_OK):
        return root
    tag = hashlib.sha1(data_dir.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"rivven-tier-cache-{os.getuid()}-{tag}")


class ColdCache:
    def __init__(self, root: str, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._open: dict[str, Segment] = {}
        self.hits = 0
        self.downloads = 0
        self.downloaded_bytes = 0

    def folder(self, entry: ColdSegment) -> str:
        return os.path.join(self.root, hashlib.sha1(entry.object.encode()).hexdigest()[:24])

    def segment(self, entry: ColdSegment) -> Segment:
        """A read-only Segment over the cached copy of ``entry`` (downloaded when missing)."""
        with self._lock:
            seg = self._open.get(entry.object)
            if seg is not None and os.path.exists(seg.path):
                self.hits += 1
                return seg
            d = self.folder(entry)
            for attempt in range(3):  # another process may evict it between look and open
                try:
                    seg = self._open_cached(entry, d)
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise
            seg.size = entry.bytes
            seg.next_offset = entry.next_offset
            seg.max_timestamp = entry.max_timestamp
            seg.loaded = True
            self._open[entry.object] = seg
            self._evict(keep=d)
            return seg

    def _open_cached(self, entry: ColdSegment, d: str) -> Segment:
        log_path = files.path(d, entry.base_offset, files.LOG)
        try:
            ok = os.path.getsize(log_path) == entry.bytes
        except OSError:
            ok = False
        if ok:
            self.hits += 1
            os.utime(log_path)
        else:
            files.remove_tree(self.root, d)  # (an incomplete or altered copy)
            self._download(entry, d)
        return Segment(d, entry.base_offset, writable=False)

    def _download(self, entry: ColdSegment, d: str) -> None:
        files.make_dir(self.root)
        tmp = os.path.join(self.root, f"{TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        files.make_dir(tmp)
        try:
            self.downloaded_bytes += download_segment(entry, tmp)
            try:
                os.rename(tmp, d)
            except OSError:  # another process put it there first
                if not os.path.isdir(d):
                    raise
            self.downloads += 1
        finally:
            files.remove_tree(self.root, tmp)

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
                        files.remove_tree(self.root, d)  # a downloader died
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
            files.remove_tree(self.root, d)
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
    for suffix in SUFFIXES:
        url = entry.url(suffix)
        got = cold.fetch(url, files.path(dest_dir, entry.base_offset, suffix))
        want = entry.expected(suffix)
        if got != want:
            raise ColdObjectError(
                f"cold object {url} is damaged: it holds {got[0]} bytes with CRC32C "
                f"{got[1]:#010x}, the tier manifest records {want[0]} bytes with "
                f"{want[1]:#010x}; check the cold store with 'rivven segment verify --cold'")
        total += got[0]
    return total
