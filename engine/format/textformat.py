"""kcat's and rpk's ``%``-format strings: records out as text (``formatter``), text in as
records (``FormatInput``). ``rivven consume -f`` and ``rivven produce -F`` are these.

Tokens (``FORMAT_HELP``): ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key, ``%v``
(or ``%s``) value, ``%T`` (or ``%d``) timestamp in ms, ``%d{strftime[%F %T]}`` the timestamp
as UTC text (rpk's; ``#`` may wrap the brackets: ``{strftime##[...]##}``), ``%h`` headers,
``%K`` ``%S`` (or ``%V``) key and value size (-1 for null), ``%H`` header count, ``%%`` a
percent, ``%{`` ``%}`` braces; escapes ``\\n \\t \\r \\0 \\xNN \\\\`` (a backslash before any
other character stays). Keys and values are printed and read in an encoding of
engine.format.text (``encoder``/``decoder``); null prints as nothing.

Input reads ``%k %v %T %p`` (``%t %o`` are read and ignored): each token's text ends where
the literal after it starts, so two tokens need a separator between them, and the format's
last literal (``\\n`` unless it ends with another) ends a record: ``'%v\\0'`` reads
NUL-separated values. A format that cannot be used raises InvalidArgument.

    >>> from engine.format.records import ColumnBatch
    >>> from engine.format.text import encoder
    >>> out = formatter("%o:%k=%v\\n", encoder("utf8", False), encoder("utf8", False))
    >>> out(ColumnBatch("t", 0, [7], [0], [b"k"], [b"v"], [[]]))
    b'7:k=v\\n'
    >>> p = FormatInput("%k=%v\\n", None, None, None)
    >>> p.parse([b"k=v"], partitions=1).keys
    [b'k']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .text import MAX_TIMESTAMP, Decode, Encode, LineError, Parsed

FORMAT_HELP = ("%t topic, %p partition, %o offset, %k key, %v (or %s) value, %T (or %d) "
               "timestamp in ms (%d{strftime[%F %T]} as UTC text), %h headers, %K %S (or %V) "
               "key and value size (-1 for null), %H header count, %% percent; \\n \\t \\r \\0 "
               "\\xNN \\\\ escapes")
OUTPUT_TOKENS = "tpokvsTdhKSVH"
# what input reads each token into (None: read and ignored)
INPUT_TOKENS: dict[str, str | None] = {"k": "key", "v": "value", "s": "value",
                                       "T": "timestamp", "d": "timestamp",
                                       "p": "partition", "t": None, "o": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


# ---------------------------------------------------------------- parsing a format
def unescape(text: str) -> str:
    """``\\n \\t \\r \\0 \\\\`` and ``\\xNN``; any other backslash stays as it is. A byte
    over 0x7f stays one byte: a surrogate escape (``raw`` turns it back)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if c == "\\" and nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif c == "\\" and nxt == "x":
            digits = text[i + 2:i + 4]
            try:
                n = int(digits, 16) if len(digits) == 2 and digits.isalnum() else -1
            except ValueError:
                n = -1
            if n >= 0:
                out.append(chr(n) if n < 0x80 else chr(0xDC00 + n))
            else:
                digits = ""
            if len(digits) != 2:
                raise InvalidArgument(f"\\x takes two hex digits, as in \\x1f, not "
                                      f"{text[i:i + 4]!r}")
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def raw(text: str | None) -> bytes:
    """Literal text as bytes: bytes that argv could not decode, and ``\\xNN`` escapes, as
    they were (surrogate escapes)."""
    return (text or "").encode("utf-8", "surrogateescape")


def tokens(fmt: str, allowed: str) -> list[tuple[str, str | None]]:
    """A %-format as ``[(token, modifier)]``, with ``("", text)`` for literal text (escapes
    resolved); a token not in ``allowed`` raises InvalidArgument."""
    out: list[tuple[str, str | None]] = []
    lit = ""
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%" or i + 1 == len(fmt):
            lit += c
            i += 1
            continue
        t = fmt[i + 1]
        i += 2
        if t in "%{}":
            lit += t
            continue
        if t not in allowed:
            raise InvalidArgument(f"unknown format token %{t}: use {FORMAT_HELP}")
        mod = None
        if i < len(fmt) and fmt[i] == "{":
            mod, i = _modifier(fmt, i, t)
        if lit:
            out.append(("", unescape(lit)))
            lit = ""
        out.append((t, mod))
    if lit:
        out.append(("", unescape(lit)))
    return out


def _modifier(fmt: str, i: int, t: str) -> tuple[str, int]:
    """``{strftime[...]}`` after %T/%d (rpk's; any number of ``#`` may wrap the brackets:
    ``{strftime##[...]##}``): the strftime text and the index after the closing brace."""
    hint = "write %{ for a literal brace"
    if t not in "Td" or not fmt.startswith("{strftime", i):
        raise InvalidArgument(f"%{t}{{...}}: only %d and %T take a modifier, "
                              f"{{strftime[FORMAT]}} ({hint})")
    j = i + len("{strftime")
    hashes = len(fmt[j:]) - len(fmt[j:].lstrip("#"))
    close = "]" + "#" * hashes + "}"
    end = fmt.find(close, j + hashes + 1)
    if fmt[j + hashes:j + hashes + 1] != "[" or end < 0:
        raise InvalidArgument(f"%{t}{{strftime[...]}} is not closed ({hint})")
    return fmt[j + hashes + 1:end], end + len(close)


# ---------------------------------------------------------------- output
def formatter(fmt: str, kenc: Encode, venc: Encode) -> Callable[[Any], bytes]:
    """Compile a %-format into a function from one ``ColumnBatch`` to its text (bytes);
    ``kenc``/``venc``: ``encoder(..., for_json=False)`` of keys and values."""
    each = record_formatter(fmt, kenc, venc)
    return lambda b: b"".join(each(b))


def record_formatter(fmt: str, kenc: Encode, venc: Encode) -> Callable[[Any], list[bytes]]:
    """As ``formatter``, one bytes per record: what a writer needs to write whole records
    only and to know which records it wrote."""
    toks = tokens(fmt, OUTPUT_TOKENS)
    if [t for t, _ in toks] in (["v", ""], ["s", ""]) and toks[-1][1] == "\n":
        def fast(b: Any) -> list[bytes]:  # the common '%v\n'
            return [venc(v) + b"\n" for v in b.values]
        return fast
    parts = [_output_part(t, mod, kenc, venc) for t, mod in toks]

    def generic(b: Any) -> list[bytes]:
        p, t = b.partition, b.topic
        return [b"".join([f(t, p, o, ts, k, v, h) for f in parts])
                for o, ts, k, v, h in zip(b.offsets, b.timestamps, b.keys, b.values, b.headers)]
    return generic


def _output_part(t: str, mod: str | None, kenc: Encode, venc: Encode) -> Callable[..., bytes]:
    if t == "":
        lit = raw(mod)
        return lambda *_: lit
    if t in "Td" and mod is not None:
        from datetime import UTC, datetime

        return lambda tp, p, o, ts, k, v, h: datetime.fromtimestamp(ts / 1000, UTC).strftime(
            mod).encode()
    return {
        "t": lambda tp, p, o, ts, k, v, h: tp.encode(),
        "p": lambda tp, p, o, ts, k, v, h: str(p).encode(),
        "o": lambda tp, p, o, ts, k, v, h: str(o).encode(),
        "k": lambda tp, p, o, ts, k, v, h: kenc(k),
        "v": lambda tp, p, o, ts, k, v, h: venc(v),
        "s": lambda tp, p, o, ts, k, v, h: venc(v),
        "T": lambda tp, p, o, ts, k, v, h: str(ts).encode(),
        "d": lambda tp, p, o, ts, k, v, h: str(ts).encode(),
        "K": lambda tp, p, o, ts, k, v, h: b"-1" if k is None else str(len(k)).encode(),
        "S": lambda tp, p, o, ts, k, v, h: b"-1" if v is None else str(len(v)).encode(),
        "V": lambda tp, p, o, ts, k, v, h: b"-1" if v is None else str(len(v)).encode(),
        "H": lambda tp, p, o, ts, k, v, h: str(len(h)).encode(),
        "h": lambda tp, p, o, ts, k, v, h: ",".join(
            f"{hk}={'' if hv is None else hv.decode(errors='replace')}" for hk, hv in h).encode(),
    }[t]


# ---------------------------------------------------------------- input
class FormatInput:
    """Records as a %-format describes them (rpk's ``produce -f``): ``%k %v %T %p`` (``%t
    %o`` read and ignored); each token's text ends where the literal after it starts; the
    format's last literal (``\\n`` unless it ends with another) ends a record. ``key``: the
    key of every record (a format without %k); ``kdec``/``vdec``: decoders of keys and
    values (engine.format.text.decoder; None: as they are). ``fields``: what the format reads
    (``key``, ``value``, ``timestamp``, ``partition``)."""

    def __init__(self, fmt: str, key: bytes | None, kdec: Decode | None,
                 vdec: Decode | None) -> None:
        toks = tokens(fmt, "".join(INPUT_TOKENS) + "hKSVH")
        for t, mod in toks:
            if t and t not in INPUT_TOKENS:
                raise InvalidArgument(
                    f"%{t} is printed by consume but not read by produce: use %k %v %T %p "
                    "(and %t %o, read and ignored); JSON lines carry headers")
            if mod is not None and t:
                raise InvalidArgument(f"%{t}{{...}}: produce reads timestamps as epoch ms")
        if not toks or toks[-1][0] != "":
            toks.append(("", "\n"))
        self.terminator = raw(toks[-1][1])
        # (token, None) or ("", literal bytes)
        self.steps = [(t, None if t else raw(m)) for t, m in toks[:-1]]
        for (a, _), (b, _) in zip(self.steps, self.steps[1:]):
            if a and b:
                raise InvalidArgument(f"%{a}%{b}: put a separator between two tokens (where "
                                      f"%{a} ends)")
        self.fields = {INPUT_TOKENS[t] for t, _ in self.steps if t} - {None}
        if key is not None and "key" in self.fields:
            raise InvalidArgument("a key for every record cannot be given with a format "
                                  "that has %k")
        self.key, self.kdec, self.vdec = key, kdec, vdec

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
        """The records of ``lines`` (split at ``terminator``); ``partitions``: the topic's
        count, the bound of ``%p``."""
        f = self.fields
        out = Parsed([], [] if "key" in f or self.key is not None else None, None,
                     [] if "partition" in f else None, [] if "timestamp" in f else None)
        steps = self.steps
        for i, rec in enumerate(lines):
            pos = 0
            got: dict[str, Any] = {}
            try:
                for n, (t, lit) in enumerate(steps):
                    if not t:
                        assert lit is not None
                        if not rec.startswith(lit, pos):
                            raise LineError(i, f"expected {lit.decode(errors='replace')!r} at "
                                            f"byte {pos + 1}")
                        pos += len(lit)
                        continue
                    end = len(rec)
                    if n + 1 < len(steps):
                        nxt = steps[n + 1][1]
                        assert nxt is not None
                        end = rec.find(nxt, pos)
                        if end < 0:
                            raise LineError(i, f"no {nxt.decode(errors='replace')!r} after "
                                            f"%{t}")
                    got[t] = rec[pos:end]
                    pos = end
                if pos != len(rec):
                    raise LineError(i, f"unexpected text at byte {pos + 1}")
                value = _field(got, "vs", self.vdec, i, "value")
                key = _field(got, "k", self.kdec, i, "key") if "k" in got else self.key
                ts = _number(got, "Td", i, "timestamp", MAX_TIMESTAMP)
                part = _number(got, "p", i, "partition", partitions - 1)
            except LineError as e:
                out.error = e
                return out
            out.values.append(value)
            if out.keys is not None:
                out.keys.append(key)
            if out.timestamps is not None:
                out.timestamps.append(ts)
            if out.partitions is not None:
                out.partitions.append(part)
        return out


def _field(got: dict, names: str, dec: Decode | None, i: int, what: str) -> bytes | None:
    for n in names:
        if n in got:
            if dec is None:
                return got[n]
            try:
                return dec(got[n])
            except ValueError as e:
                raise LineError(i, f"{what}: {e}") from None
    return b"" if what == "value" else None


def _number(got: dict, names: str, i: int, what: str, top: int) -> int | None:
    for n in names:
        if n in got:
            text = got[n].strip()
            if not text.isdigit() or int(text) > top:
                shown = text[:40].decode(errors="replace")
                raise LineError(i, f"{what} must be an integer from 0 to {top}, not {shown!r}")
            return int(text)
    return None
