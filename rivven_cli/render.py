"""The one place that prints data: Rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
                right: Sequence[str] = ()) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for c in columns:
        table.add_column(c, justify="right" if c in right else "left", no_wrap=True)
    for r in rows:  # (Text: a name is shown as it is, never read as Rich markup)
        table.add_row(*[Text("-" if v is None else printable(str(v))) for v in r])
    # piped output must not be cut to 80 columns
    Console(highlight=False, width=None if sys.stdout.isatty() else 4096).print(table)


def printable(text: str) -> str:
    """``text`` with control characters and line breaks escaped (``\\n``, ``\\x1b``): one
    name stays one line, and a name cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode()
                   for c in text)


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def utc(ms: int | None, timespec: str = "milliseconds") -> str | None:
    """Epoch milliseconds as RFC 3339 UTC (``...Z``); None stays None."""
    if ms is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec=timespec).replace(
        "+00:00", "Z")


def info(message: str) -> None:
    """A status line on stderr (never on stdout, which belongs to data)."""
    sys.stderr.write(message + "\n")


def warn(message: str) -> None:
    """A warning line on stderr: something found that does not stop the command."""
    sys.stderr.write(f"warning: {printable(message)}\n")


_UNSAFE = None  # (compiled on first use) JSON text a terminal or a JS parser could trip on


def json_line(data: Any) -> str:
    """``data`` as one line of JSON with non-ASCII text kept as UTF-8 (``ensure_ascii=False``)
    but C1 control characters, U+2028/U+2029 and lone surrogates still ``\\u`` escapes: still
    valid JSON, readable, and never raw control bytes on a terminal."""
    import re

    global _UNSAFE
    if _UNSAFE is None:
        _UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                       json.dumps(data, ensure_ascii=False, default=str))
