"""Records as text lines: what the three text codecs share, and the plainest of them.

The text codecs turn records into lines of text and lines back into records: what ``rivven
consume`` prints and ``rivven produce`` reads, usable from Python as they are (pure
functions and classes over bytes: no I/O, no printing). Three modules:

- ``text`` (here): the encodings of keys and values (``encoder``/``decoder``: utf8, the bytes
  as they are; base64; hex), the parsed result of a chunk of input lines (``Parsed``, with the
  first bad line as a ``LineError``), and ``LinesInput``, one value per line.
- ``textformat``: kcat's and rpk's ``%``-format strings, out (``formatter``) and in
  (``FormatInput``).
- ``jsonlines``: one JSON object per record, out (``json_lines``) and in (``JsonInput``).

Output is compiled once into a function over a whole ``ColumnBatch`` (bytes out); input is
parsed a chunk of lines at a time into columns, the arguments of ``Engine.produce_batch``.
Every input parser has the same face: ``terminator`` (the bytes that end a record: split the
input at it), ``parse(lines, partitions) -> Parsed``. A bad line does not raise: the records
before it come back with ``error`` set, so a caller can store them and name the line.

Example, one value per line with a key for each, values in hex::

    >>> p = LinesInput(key=b"k", sep=None, kdec=None, vdec=decoder("hex"))
    >>> parsed = p.parse([b"6869", b"zz"], partitions=1)
    >>> parsed.values, parsed.keys, parsed.error.index
    ([b'hi'], [b'k'], 1)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument

ENCODINGS = ("utf8", "base64", "hex")  # of keys and values as text
MAX_TIMESTAMP = (1 << 62) - 1  # the engine's bound on a record timestamp (engine.produce.path)

Encode = Callable[[bytes | None], Any]
Decode = Callable[[Any], bytes]


# ---------------------------------------------------------------- encodings
def _check(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise InvalidArgument(f"unknown encoding {encoding!r}: use {', '.join(ENCODINGS)}")


def encoder(encoding: str, for_json: bool, on_replace: Callable[[], None] | None = None
            ) -> Encode:
    """Bytes (or None) as ``encoding`` (one of ``ENCODINGS``): for JSON a str, or None for
    None; for a %-format bytes, null printed as nothing. utf8 for JSON replaces bytes that
    are not UTF-8 (U+FFFD) and calls ``on_replace`` the first time it does (a warning:
    base64 keeps binary data)."""
    _check(encoding)
    null = None if for_json else b""  # a format string prints null as nothing
    if encoding == "base64":
        return lambda b: null if b is None else (
            base64.b64encode(b).decode() if for_json else base64.b64encode(b))
    if encoding == "hex":
        return lambda b: null if b is None else (b.hex() if for_json else b.hex().encode())
    if not for_json:
        return lambda b: b"" if b is None else b
    warned: list[int] = []

    def utf8(b: bytes | None) -> str | None:
        if b is None:
            return None
        try:
            return b.decode()
        except UnicodeDecodeError:
            if not warned:
                warned.append(1)
                if on_replace is not None:
                    on_replace()
            return b.decode(errors="replace")

    return utf8


def decoder(encoding: str) -> Decode | None:
    """Text (str or bytes) in ``encoding`` back to bytes, raising ValueError when it is not
    that encoding; None for utf8 (the text is the bytes)."""
    _check(encoding)
    if encoding == "base64":
        return lambda t: binascii.a2b_base64(t, strict_mode=True)
    if encoding == "hex":
        return lambda t: bytes.fromhex(t.decode("ascii") if isinstance(t, bytes) else t)
    return None


# ---------------------------------------------------------------- parsed input
class LineError(InvalidArgument):
    """The input line (0-based within its chunk) that cannot be a record, and why."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index

    def __repr__(self) -> str:
        return f"LineError({self.index}, {str(self)!r})"


@dataclass
class Parsed:
    """A chunk's records as columns (``Engine.produce_batch``'s ``values``, ``keys``,
    ``headers``, ``partitions``, ``timestamps``; None: not in this input). ``lines[i]`` is
    the chunk line of record ``i`` (None: record i is line i); ``error``: the first bad line
    (the records before it are here)."""

    values: list
    keys: list | None = None
    headers: list | None = None
    partitions: list | None = None
    timestamps: list | None = None
    lines: list[int] | None = None
    error: LineError | None = None


class LinesInput:
    """One value per line; ``key`` for every record, or ``sep`` to split KEY<SEP>VALUE at
    the first SEP (not both). An empty line is an empty value. ``kdec``/``vdec``:
    ``decoder``s of keys and values (None: as they are)."""

    terminator = b"\n"

    def __init__(self, key: bytes | None, sep: bytes | None, kdec: Decode | None,
                 vdec: Decode | None) -> None:
        if key is not None and sep is not None:
            raise InvalidArgument("give either a key or a key separator, not both")
        if sep == b"":
            raise InvalidArgument("the key separator must not be empty")
        self.key, self.sep, self.kdec, self.vdec = key, sep, kdec, vdec

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
        if self.sep is None and self.vdec is None:
            return Parsed(lines, None if self.key is None else [self.key] * len(lines))
        keys: list = []
        values: list = []
        for i, line in enumerate(lines):
            k: bytes | None = self.key
            v = line
            if self.sep is not None:
                k, s, v = line.partition(self.sep)
                if not s:
                    return Parsed(values, keys, error=LineError(i, "no key separator "
                                  f"{self.sep.decode(errors='replace')!r} in the line"))
                if self.kdec is not None:
                    try:
                        k = self.kdec(k)
                    except ValueError as e:
                        return Parsed(values, keys, error=LineError(i, f"key: {e}"))
            if self.vdec is not None:
                try:
                    v = self.vdec(v)
                except ValueError as e:
                    return Parsed(values, keys, error=LineError(i, f"value: {e}"))
            keys.append(k)
            values.append(v)
        return Parsed(values, keys)
