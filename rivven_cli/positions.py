"""The one grammar of offsets and times on the command line (rpk's and kcat's), parsed into the
engine's ``Position``; what a position means in a partition is the engine's to say.

  POSITION  beginning | earliest | start | oldest   the log start offset
            end | latest | newest                   the log end offset (the next one written)
            N                                       offset N
            -N                                      N records before the end
            +N                                      N records after the log start (rpk's +N)
            @TIME                                   the first offset at or after TIME
  TIME      epoch ms (1762000000000) | RFC 3339 / ISO 8601, UTC unless it says otherwise
            (2026-11-01T08:00:00Z, 2026-11-01T10:00:00+02:00, 2026-11-01) | relative to now:
            -2h, -1h30m, -90s (units ms s m h d)
  RANGE     START:END (``consume -o`` only, rpk's): from START up to END, END exclusive;
            START: is START, :END starts at the beginning. After an @TIME start, END is a
            time too (its @ optional, rpk's @t1:t2): @-2h:-1h = @-2h:@-1h; a positive
            duration is counted from START (@2026-11-01:1h = that day's first hour); ``end``
            is the end offset at the start.

Where the colon of a range is: a value that reads as one position is one position (so
``@2026-11-01T10:00:00Z`` is a time, never a range); otherwise START is the longest time
(after @) or the word before the first colon, and the colon after it separates. The colons
inside an RFC 3339 time (hours, minutes, a +02:00 offset) thus stay in the time.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import typer

from engine import clock
from engine.fetch.positions import Position

from .common import fail

UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DUR = r"(?:\d+(?:ms|s|m|h|d))+"
_REL = re.compile(rf"^([+-])({_DUR})$")
# a TIME at the head of a range (after its @), longest form first
_TIME_HEAD = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?"
    rf"|[+-]{_DUR}|\d+")
BEGINNING = ("beginning", "earliest", "start", "oldest")
END = ("end", "latest", "newest")
EXAMPLE_TIME = "2026-11-01T00:00:00Z"
FORMS = "beginning, end, N, -N, +N or @TIME"
TIME_FORMS = f"epoch ms, RFC 3339 like {EXAMPLE_TIME}, or relative like -2h"


class _Bad(ValueError):
    """A value outside the grammar (the message says which part)."""


_SPAN = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def duration_ms(text: str) -> int:
    """``1h30m``, ``90s``, ``250ms``, ``1.5m`` (units ms s m h d) in milliseconds."""
    return int(sum((int(n) if n.isdigit() else float(n)) * UNITS[u]
                   for n, u in _SPAN_PART.findall(text)))
_ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def parse_duration(text: str, option: str) -> int:
    """A length of time as milliseconds: ``90s``, ``500ms``, ``1.5m``, ``1h30m``, ``2d``
    (units ms s m h d), or ISO 8601 as Kafka's tools take it (``PT2H``, ``P1DT30M``).
    Anything else is a usage error of ``option``."""
    t = text.strip()
    if _SPAN.fullmatch(t.lower()):
        return duration_ms(t.lower())
    m = _ISO_DURATION.fullmatch(t.upper())
    if m and any(m.groups()):
        d, h, mi, sec = m.groups()
        return int((int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60
                    + float(sec or 0)) * 1000)
    raise typer.BadParameter(f"cannot read duration {text!r}: use 90s, 500ms, 30m, 1h30m, 2d, "
                             "or ISO 8601 like PT2H or P1DT30M", param_hint=option)


def _time(text: str, now: int | None = None) -> int:
    t = text.strip()
    if t.isdigit():
        return int(t)
    m = _REL.match(t)
    if m:
        base = clock.now_ms() if now is None else now
        d = duration_ms(m.group(2))
        return max(0, base - d if m.group(1) == "-" else base + d)
    if t.lstrip("-").isdigit():
        raise _Bad(f"timestamp {text!r} is negative")
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise _Bad(f"cannot read time {text!r}: use {TIME_FORMS}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return max(0, int(dt.timestamp() * 1000))


def parse_time(text: str, option: str, now: int | None = None) -> int:
    """A TIME (no @): epoch ms, RFC 3339 / ISO 8601 (UTC unless an offset is given), or
    relative to now like -2h, -1h30m."""
    try:
        return _time(text, now)
    except _Bad as e:
        fail(f"{option}: {e}", 2)


def _position(text: str) -> Position:
    s = text.strip()
    if s.startswith("@"):
        return Position("timestamp", _time(s[1:]))
    if s.lower() in BEGINNING:
        return Position("beginning")
    if s.lower() in END:
        return Position("end")
    sign, digits = (s[0], s[1:]) if s[:1] in "+-" else ("", s)
    if digits.isdigit():
        n = int(digits)
        return Position({"": "offset", "+": "from_start", "-": "from_end"}[sign], n)
    raise _Bad(f"{text!r} is not a position")


def _refused(pos: Position, refuse: Collection[str], option: str, text: str) -> None:
    if pos.kind in refuse:
        fail(f"{option} {text!r}: {KIND_WORDS[pos.kind]} makes no sense here; use "
             f"{accepted(refuse)}", 2)


KIND_WORDS = {"beginning": "beginning", "end": "end", "offset": "N", "from_end": "-N",
              "from_start": "+N", "timestamp": "@TIME"}


def accepted(refuse: Collection[str] = ()) -> str:
    words = [w for k, w in KIND_WORDS.items() if k not in refuse]
    return ", ".join(words[:-1]) + " or " + words[-1]


def parse_position(text: str, option: str, reading: bool = False,
                   refuse: Collection[str] = ()) -> Position:
    """A POSITION. With ``reading`` the whole grammar (beginning, end, N, -N, +N, @TIME)
    but the kinds in ``refuse`` (``Position`` kinds: a word that makes no sense for the
    command); without it only ``N`` or ``@TIME`` (the older, narrower form)."""
    try:
        pos = _position(text)
    except _Bad as e:
        if text.strip().startswith("@"):
            fail(f"{option}: {e}", 2)
        pos = None
    example = f"(e.g. {option} 1000 or {option} @{EXAMPLE_TIME})"
    if pos is None or (not reading and pos.kind not in ("offset", "timestamp")):
        if not reading:
            fail(f"{option} {text!r} is neither an offset nor @TIMESTAMP {example}", 2)
        fail(f"{option} {text!r} is not a position: use {accepted(refuse)} {example}", 2)
    _refused(pos, refuse, option, text)
    return pos


def parse_time_position(text: str, option: str) -> Position:
    """A TIME without its @ (``offsets --time 1762000000000``, ``--time -2h``: as before), or
    any POSITION (``--time @-2h``, ``beginning``, ``-10``, ``+10``). A bare number is a time
    (epoch ms), never an offset."""
    s = text.strip()
    if s.isdigit() or _REL.match(s) or not (s[:1] in "+-@" or s.lower() in BEGINNING + END):
        return Position("timestamp", parse_time(s, option))
    return parse_position(s, option, reading=True)


def parse_range(text: str, option: str) -> tuple[Position, Position | None]:
    """``START``, ``START:END``, ``START:`` or ``:END`` (see the module docstring): the start
    position and the end one (None: no END)."""
    s = text.strip()
    try:
        return _position(s), None
    except _Bad:
        pass
    try:
        return _range(s)
    except _Bad as e:
        fail(f"{option} {text!r}: {e}; use {FORMS}, or a range START:END like 100:200, "
             "@-2h:-1h, beginning:+10", 2)


def _range(s: str) -> tuple[Position, Position | None]:
    if s.startswith("@"):
        m = _TIME_HEAD.match(s, 1)
        head = "" if s.startswith("@:") else (m.group(0) if m else None)
        if head is None or s[1 + len(head):2 + len(head)] != ":":
            raise _Bad("cannot read a time at its start")
        rest = s[2 + len(head):]
        if not head:  # rpk's @:t, up to a time
            return Position("beginning"), _end_time(rest, None)
        start = Position("timestamp", _time(head))
        return start, (_end_time(rest, start.value) if rest else None)
    head, _, rest = s.partition(":")
    start = _position(head) if head else Position("beginning")
    if not rest:
        return start, None
    end = _position(rest)
    if start.kind == end.kind == "offset" and end.value <= start.value:
        raise _Bad(f"END {end.value} is not after START {start.value}")
    return start, end


def _end_time(text: str, start_ms: int | None) -> Position:
    """The END after an @TIME start: a time (its @ optional), ``end``, or a positive
    duration counted from START."""
    t = text[1:] if text.startswith("@") else text
    if t.lower() in END:
        return Position("end")
    if start_ms is not None and re.fullmatch(rf"\+?{_DUR}", t):
        end = Position("timestamp", start_ms + duration_ms(t))
    else:
        end = Position("timestamp", _time(t))
    if start_ms is not None and end.value <= start_ms:
        raise _Bad(f"END {t!r} is not after START")
    return end


# ---------------------------------------------------------------- notes
def shown(pos: Position) -> str:
    """A position as the grammar writes it (times in UTC)."""
    from .render import utc

    if pos.kind == "timestamp":
        return f"@{utc(pos.value)}"
    return {"beginning": "beginning", "end": "end", "offset": str(pos.value),
            "from_end": f"-{pos.value}", "from_start": f"+{pos.value}"}[pos.kind]


def note_past_end(what: str, pos: Position, rows: Iterable[dict[str, Any]], then: str,
                  topic: str | None = None) -> None:
    """One ``note:`` line on stderr naming the partitions where ``pos`` lies past the end
    (rows with ``past_end``, ``partition``, an end offset and a ``topic`` or ``topic=``)."""
    from .render import info, printable

    past = [r for r in rows if r.get("past_end")]
    if not past:
        return
    parts = [f"{r.get('topic', topic)}-{r['partition']} (end offset "
             f"{r.get('end_offset', r.get('log_end_offset'))})" for r in past[:4]]
    more = f" and {len(past) - 4} more partition(s)" if len(past) > 4 else ""
    why = " (no record is at or after that time)" if pos.kind == "timestamp" else ""
    info(printable(f"note: {what} {shown(pos)} is past the end of {', '.join(parts)}{more}"
                   f"{why}: {then}"))


def check_past_end(eng: Any, topic: str, pos: Position | None, what: str, then: str,
                   partitions: Sequence[int] | None = None,
                   isolation_level: str = "read_uncommitted", below_start: str | None = None
                   ) -> None:
    """``note_past_end`` for a position of one topic, asking the engine where it lies (only
    for the kinds that can lie past the end: N, +N, @TIME; read_committed: past the last
    stable offset). With ``below_start`` (what is done instead), an offset N below a
    partition's log start gets a note too (kcat calls it out of range)."""
    if pos is None or pos.kind not in ("offset", "from_start", "timestamp"):
        return
    rows = [r for r in eng.offsets.list_offsets(topic, pos, isolation_level=isolation_level)
            if not partitions or r["partition"] in partitions]
    note_past_end(what, pos, rows, then, topic)
    if below_start is not None and pos.kind == "offset":
        note_below_start(what, pos, [r for r in rows if pos.value < r["start_offset"]],
                         below_start, topic)


def note_below_start(what: str, pos: Position, rows: Sequence[dict[str, Any]], then: str,
                     topic: str) -> None:
    """One ``note:`` line on stderr naming the partitions whose log start is past offset
    ``pos`` (their records before it were deleted: retention, delete-records, compaction)."""
    from .render import info, printable

    if not rows:
        return
    parts = [f"{topic}-{r['partition']} (log start offset {r['start_offset']})" for r in rows[:4]]
    more = f" and {len(rows) - 4} more partition(s)" if len(rows) > 4 else ""
    info(printable(f"note: {what} {shown(pos)} is before the log start of {', '.join(parts)}"
                   f"{more}: the records before it were deleted; {then}"))
