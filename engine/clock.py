"""The wall clock, in one place: milliseconds since the epoch, as record timestamps use them.

Callers use ``clock.now_ms()`` (not ``from .clock import now_ms``), so a test can move time for
every module at once by patching ``engine.clock.now_ms``.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


_boot: list[int] = []


def boot_ms() -> int:
    """When this machine booted, ms since the epoch (``btime`` of /proc/stat; 0 where there is
    none): a process whose last write is older than it died with the machine."""
    if not _boot:
        try:
            with open("/proc/stat", "rb") as f:
                line = next((x for x in f if x.startswith(b"btime ")), b"btime 0")
            _boot.append(int(line.split()[1]) * 1000)
        except (OSError, ValueError, IndexError):
            _boot.append(0)
    return _boot[0]
