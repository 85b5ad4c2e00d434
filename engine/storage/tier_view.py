"""A partition's view of its tier manifest: which offsets below the local segments are cold.

Read without a lock (the manifest is replaced atomically), picked up again whenever the
file's identity changes: one ``stat`` when it did not. A damaged manifest is kept as
``error`` and raised to whoever needs the cold offsets; local reads go on.
"""

from __future__ import annotations

from bisect import bisect_right

from ..errors import RivvenError
from . import tier_manifest
from .tier_manifest import ColdSegment


class TierView:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.entries: list[ColdSegment] = []  # the manifest, oldest first
        self.bases: list[int] = []
        self.error: Exception | None = None
        self._stamp: tuple[int, int, int] | None = None

    def refresh(self) -> bool:
        """Reload when the manifest changed; True when it did (segments may have moved)."""
        st = tier_manifest.stamp(self.dir)
        if st == self._stamp:
            return False
        try:
            self.entries = tier_manifest.load(self.dir)
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
