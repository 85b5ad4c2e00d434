"""The one grammar of offsets and times on the command line (rpk's and kcat's), parsed into the
engine's ``Position``; what a position means in a partition is the engine's to say.

  TIME      epoch ms, RFC 3339 / ISO 8601 (UTC unless an offset is given), or relative: -2h
  POSITION  N (an offset) | @TIME, and where a command reads: beginning | end | -N (N before
            the end)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from engine import clock
from engine.client.read import Position

from .common import fail

_REL = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
EXAMPLE_TIME = "2026-11-01T00:00:00Z"


def parse_time(text: str, option: str, now: int | None = None) -> int:
    """Epoch ms, RFC 3339 / ISO 8601 (UTC unless an offset is given), or relative like -2h."""
    t = text.strip()
    if t.lstrip("-").isdigit() and not _REL.match(t):
        v = int(t)
        if v < 0:
            fail(f"{option}: timestamp {text!r} is negative", 2)
        return v
    m = _REL.match(t)
    if m:
        base = clock.now_ms() if now is None else now
        return max(0, base - int(m.group(1)) * UNITS[m.group(2)])
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        fail(f"{option}: cannot read time {text!r}: use epoch ms, RFC 3339 like "
             f"{EXAMPLE_TIME}, or relative like -2h", 2)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_position(text: str, option: str, reading: bool = False) -> Position:
    """``N`` or ``@TIME``; with ``reading`` also ``beginning``, ``end`` and ``-N``."""
    s = text.strip()
    if s.startswith("@"):
        return Position("timestamp", parse_time(s[1:], option))
    if reading and s in ("beginning", "end"):
        return Position(s)
    try:
        n = int(s)
    except ValueError:
        n = None
    if n is not None and n >= 0:
        return Position("offset", n)
    if n is not None and reading:
        return Position("from_end", -n)
    forms = "an offset, @TIMESTAMP, beginning, end or -N" if reading else \
        "neither an offset nor @TIMESTAMP"
    fail(f"{option} {text!r} is {'not ' if reading else ''}{forms} (e.g. {option} 1000 or "
         f"{option} @{EXAMPLE_TIME})", 2)
