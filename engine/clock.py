"""The wall clock, in one place: milliseconds since the epoch, as record timestamps use them.

Callers use ``clock.now_ms()`` (not ``from .clock import now_ms``), so a test can move time for
every module at once by patching ``engine.clock.now_ms``.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
