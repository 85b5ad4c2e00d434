"""Parsing of offset and time specs shared by consume and offsets."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import typer

_REL = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time(text: str, now_ms: int) -> int:
    """Epoch ms, RFC 3339 / ISO 8601 (UTC unless an offset is given), or relative like -2h."""
    t = text.strip()
    if t.lstrip("-").isdigit() and not _REL.match(t):
        v = int(t)
        if v < 0:
            raise typer.BadParameter(f"timestamp {text!r} is negative")
        return v
    m = _REL.match(t)
    if m:
        return max(0, now_ms - int(m.group(1)) * UNITS[m.group(2)])
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"cannot read time {text!r}: use epoch ms, RFC 3339 like 2026-01-31T12:00:00Z, "
            "or relative like -2h") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def resolve_offset(spec: str, start: int, end: int, time_lookup, now_ms: int) -> int:
    """``beginning | end | N | -N | @TIME`` to an offset inside [start, end]."""
    s = spec.strip()
    if s == "beginning":
        return start
    if s == "end":
        return end
    if s.startswith("@"):
        off = time_lookup(parse_time(s[1:], now_ms))
        return end if off is None else max(off, start)
    try:
        n = int(s)
    except ValueError:
        raise typer.BadParameter(
            f"offset {spec!r} is not beginning, end, N, -N or @TIMESTAMP", param_hint="--offset"
        ) from None
    if n < 0:
        return max(start, end + n)
    return min(max(n, start), end)
