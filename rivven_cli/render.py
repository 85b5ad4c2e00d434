"""The one place that prints data: Rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
                right: Sequence[str] = (), drop: Sequence[str] = (),
                wrap: Sequence[str] = ()) -> None:
    """A table on stdout. Piped, it is one row per line, nothing cut. On a terminal it fits
    the width without cutting a value: first the ``wrap`` columns (free text) wrap, then the
    ``drop`` columns go, in that order (a note on stderr names them), and last the other text
    columns (names) fold onto more lines. Numbers, offsets and counts never fold, headers are
    never cut, and no cell ends in "…"."""
    cells = [["-" if v is None else printable(str(v)) for v in r] for r in rows]
    tty = sys.stdout.isatty()
    if not tty and title is None and _plain(columns, cells, right):
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    hard = [[_unbreakable(v, c) for v, c in zip(r, cr)] for r, cr in zip(rows, cells)]
    console = Console(highlight=False)
    keep, widths = _layout(list(columns), cells, hard, drop, wrap,
                           console.width if tty else None)
    total = sum(widths) + 2 * (len(widths) - 1)
    # (Text: a name is shown as it is, never read as Rich markup)
    table = Table(title=Text(_fold(printable(title), total)) if title else None, box=None,
                  header_style="bold", pad_edge=False)
    for i, w in zip(keep, widths):
        table.add_column(columns[i], justify="right" if columns[i] in right else "left",
                         width=w, overflow="fold")
    for r in cells:
        table.add_row(*[Text(_fold(r[i], w)) for i, w in zip(keep, widths)])
    if tty:
        console.width = max(console.width, total)  # (only when even folded it cannot fit)
        console.print(table)
    else:  # piped: no line ends in the padding Rich adds (a script's diff or grep $ trips)
        console = Console(highlight=False, width=max(total, 1))
        with console.capture() as out:
            console.print(table)
        sys.stdout.write("".join(line.rstrip(" ") + "\n" for line in out.get().splitlines()))
        sys.stdout.flush()  # (as console.print did: before a line on stderr that follows)
    gone = [columns[i] for i in range(len(columns)) if i not in keep]
    if gone:
        info(f"not shown, to fit {console.width} columns: {', '.join(gone)} "
             "(a wider terminal or --json shows them)")


def _plain(columns: Sequence[str], cells: list[list[str]], right: Sequence[str]) -> bool:
    """Piped: the very lines Rich prints for an ASCII table at its natural width (columns
    two spaces apart; no trailing blanks, as print_table strips them), without Rich's cost (a
    10,000-partition ``topic list`` spent a tenth of its time there). False when Rich must
    do it (wide or non-ASCII text, a cell with edge spaces, colour forced on by the environment)."""
    import os

    if any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")):
        return False
    if not all(h.isascii() and h.isprintable() for h in columns) or not all(
            c.isascii() and c.isprintable() and c == c.strip(" ") for r in cells for c in r):
        return False
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(columns)]
    rjust = [h in right for h in columns]
    out = []
    for r in [list(columns), *cells]:
        out.append("  ".join(c.rjust(w) if rj else c.ljust(w)
                             for c, w, rj in zip(r, widths, rjust)).rstrip(" ") + "\n")
    sys.stdout.write("".join(out))
    return True


# a value that is one token, never folded: a number (1,234 or 1.5 KiB), a duration (4m05s);
# an offset range folds only after its "..", each offset whole
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?%?(?: [KMGT]?i?B)?|\d+(?:\.\d)?(?:ms|s)"
                     r"|\d+[dhm]\d\d[hms]|-")
_RANGE = re.compile(r"(\d+\.\.)(\d+)")
WRAP_MIN = 16  # a wrapping column keeps at least this width (or its widest value)
FOLD_MIN = 8   # a name folds to no less than this (or its header)
_BREAKS = (" ,;", "-_/", ".=:")  # where a line may end, the better first


def _unbreakable(v: Any, text: str) -> int:
    """How much of a cell must stay on one line: all of a number, each end of a range, none
    of a name (which folds, as a last resort)."""
    from rich.cells import cell_len

    if isinstance(v, int | float) or (isinstance(v, str) and _NUMBER.fullmatch(v)):
        return cell_len(text)
    m = _RANGE.fullmatch(text)
    return max(len(m.group(1)), len(m.group(2))) if m else 0


def _layout(headers: list[str], cells: list[list[str]], unbreakable: list[list[int]],
            drop: Sequence[str], wrap: Sequence[str], width: int | None
            ) -> tuple[list[int], list[int]]:
    """The columns to show and their widths: every column at its natural width when
    ``width`` is None (piped) or when that fits; else the wrap columns narrow, then the drop
    columns go one by one, then the text columns fold (widest first)."""
    from rich.cells import cell_len

    n = len(headers)
    head = [cell_len(h) for h in headers]
    nat = [max([head[i]] + [cell_len(r[i]) for r in cells]) for i in range(n)]
    if width is None:
        return list(range(n)), nat
    hard = [max([head[i]] + [u[i] for u in unbreakable]) for i in range(n)]
    wrap_floor = [max(hard[i], min(nat[i], WRAP_MIN)) for i in range(n)]
    fold_floor = [max(hard[i], min(nat[i], FOLD_MIN)) for i in range(n)]
    keep = list(range(n))
    order = [headers.index(c) for c in drop if c in headers]
    while True:
        w = _fill(keep, nat, wrap_floor, {headers.index(c) for c in wrap if c in headers},
                  width)
        if w is not None:
            return keep, w
        if not order:
            break
        keep.remove(order.pop(0))
    w = _fill(keep, nat, fold_floor, set(keep), width)
    return keep, w if w is not None else [fold_floor[i] for i in keep]


def _fill(keep: list[int], nat: list[int], floor: list[int], shrink: set[int], width: int
          ) -> list[int] | None:
    """Widths of the ``keep`` columns within ``width``: the ``shrink`` ones come down, the
    widest first, to no less than their floor (None when that is not enough)."""
    room = width - 2 * (len(keep) - 1) - sum(nat[i] for i in keep if i not in shrink)
    cols = [i for i in keep if i in shrink]

    def used(cap: int) -> int:
        return sum(max(floor[i], min(nat[i], cap)) for i in cols)

    if used(0) > room:
        return None
    lo, hi = 0, max([nat[i] for i in cols], default=0)
    while lo < hi:  # the largest cap that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if used(mid) <= room else (lo, mid - 1)
    return [max(floor[i], min(nat[i], lo)) if i in shrink else nat[i] for i in keep]


def _fold(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` cells, broken after a separator where one is
    near the end of a line: a space or comma first, then a dash, then a dot or "="."""
    from rich.cells import cell_len

    lines = []
    while cell_len(text) > width:
        n = used = 0
        while used + cell_len(text[n]) <= width:
            used += cell_len(text[n])
            n += 1
        n = max(n, 1)
        if n >= len(text):
            break
        if text[n] == " ":
            piece, text = text[:n], text[n + 1:]
        else:
            b = next((b for b in (max(text.rfind(c, 0, n) for c in chars) for chars in _BREAKS)
                      if b >= max(n // 3, 1)), -1)
            if b < 0:
                piece, text = text[:n], text[n:]
            elif text[b] == " ":
                piece, text = text[:b], text[b + 1:]
            else:
                piece, text = text[:b + 1], text[b + 1:]
        lines.append(piece)
    lines.append(text)
    return "\n".join(lines)


def printable(text: str) -> str:
    """``text`` with control characters and line breaks escaped (``\\n``, ``\\x1b``): one
    name stays one line, and a name cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode()
                   for c in text)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def human_ms(ms: int | None) -> str | None:
    """A length of time, short and exact enough to compare: ``850ms``, ``12.3s``, ``4m05s``,
    ``2h03m``, ``3d04h``; None stays None."""
    if ms is None:
        return None
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def utc(ms: int | None, timespec: str = "milliseconds") -> str | None:
    """Epoch milliseconds as RFC 3339 UTC (``...Z``); None stays None; a time no calendar
    date can show (past year 9999) as its number of milliseconds."""
    if ms is None:
        return None
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec=timespec).replace(
            "+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms"


def info(message: str) -> None:
    """A status line on stderr: a note, a summary of data written or checked, progress (stdout
    belongs to data)."""
    sys.stderr.write(message + "\n")


def done(message: str) -> None:
    """The line saying what an admin command changed ("topic T ready", "topic T deleted") on
    stdout, where Kafka's tools print theirs ("Created topic T."); with --json the JSON is
    printed instead."""
    sys.stdout.write(message + "\n")


def warn(message: str) -> None:
    """A warning line on stderr: something found that does not stop the command."""
    sys.stderr.write(f"warning: {printable(message)}\n")


# JSON text a terminal or a JS parser could trip on
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def json_line(data: Any) -> str:
    """``data`` as one line of JSON with non-ASCII text kept as UTF-8 (``ensure_ascii=False``)
    but C1 control characters, U+2028/U+2029 and lone surrogates still ``\\u`` escapes: still
    valid JSON, readable, and never raw control bytes on a terminal."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                       json.dumps(data, ensure_ascii=False, default=str))


# ---------------------------------------------------------------- what opening an engine did
def recovery_report(rec: Mapping[str, Any]) -> list[str]:
    """The lines on stderr about what opening the engine recovered
    (``Engine.last_recovery``): WAL streams of crashed writers replayed, or deferred (the disk
    is full), and a damaged (not merely cut short) WAL."""
    out = []
    if rec.get("deferred"):
        out.append("the WAL of crashed writers waits to be replayed (the disk is full); "
                   "free space, then produce again")
    if rec.get("streams"):
        out.append(f"recovered {len(rec['streams'])} WAL stream(s) of crashed writers: "
                   f"{rec['applied']} batch(es) replayed, {rec['skipped']} already in the log"
                   + (f", {rec['dropped']} after a hole dropped" if rec.get("dropped") else "")
                   + ("; the disk is full: the streams are kept and replayed again once there "
                      "is room" if rec.get("kept") else ""))
        for t in rec.get("torn_tails", []):
            if not t.get("incomplete", True):  # (a write a crash cut short is routine)
                out.append(f"warning: WAL {t['file']} damaged at position {t['position']} "
                           f"({t['reason']}): its records after that were not replayed")
    return out


def repairs_report(repairs: list[dict[str, Any]]) -> list[str]:
    """The lines on stderr about what the engine mended or set aside while the command ran
    (``Engine.repairs``)."""
    from engine.errors import plural

    out = []
    for c in repairs:
        if c.get("action") == "ignored":  # damaged metadata: reported, never acted on
            out.append(f"warning: {c['reason']}")
            continue
        out.append(f"repaired: cut {plural(c['bytes'], 'byte')} at {c['file']}:{c['position']} "
                   f"({c['reason']}); the WAL restores what was acknowledged")
    return out
