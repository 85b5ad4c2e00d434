"""A partition's view of its tier manifest: which offsets below the local segments are cold.

Read without a lock (the manifest is replaced atomically), picked up again whenever the
file's identity (or the topic's ``remote.storage.uri``) changes: one ``stat`` when it did not.
Loading checks the seal and that every entry lies in the partition's own cold prefix
(engine.segments.tier_manifest), so the entries a reader or a deleter gets are checked once per
change, not per read. A damaged manifest is kept as ``error`` and raised to whoever needs the
cold offsets; local reads go on.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from ..errors import RivvenError
from ..segments import tier_manifest
from ..segments.tier_manifest import ColdSegment, Home


class TierView:
    def __init__(self, directory: str, home: Callable[[], Home]) -> None:
        self.dir = directory
        self.home = home  # where the partition's cold objects may lie, from its config
        self.entries: list[ColdSegment] = []  # the manifest, oldest first
        self.bases: list[int] = []
        self.error: Exception | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._store: str | None = None

    def refresh(self, store: str) -> bool:
        """Reload when the manifest (or ``store``, the topic's remote.storage.uri) changed;
        True when it did (segments may have moved)."""
        st = tier_manifest.stamp(self.dir)
        if st == self._stamp and store == self._store:
            return False
        if st is None and self._stamp is None and not self.entries and self.error is None:
            self._store = store  # (a first look, and no manifest: nothing moved)
            return False
        self._store = store
        try:
            self.entries = [] if st is None else tier_manifest.load(self.dir, self.home())
            self.bases = [e.base_offset for e in self.entries]
            self.error = None
        except RivvenError as e:
            self.entries = []
            self.bases = []
            self.error = e
        self._stamp = st
        return True

    def forget(self) -> None:
        """Look at the file again next time, whatever its identity (inode numbers repeat)."""
        self._stamp = None


def cold_entry(entries: list[ColdSegment], bases: list[int], offset: int) -> ColdSegment | None:
    """The entry holding ``offset`` (entries/bases as one snapshot of a TierView)."""
    i = bisect_right(bases, offset) - 1
    if i >= 0 and offset < entries[i].next_offset:
        return entries[i]
    return None
