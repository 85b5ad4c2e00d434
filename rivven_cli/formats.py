"""Records as text, both ways: what ``rivven consume`` prints, ``rivven produce`` reads back.

- Encodings of keys and values (``--key-encoding/--value-encoding``): utf8 (the bytes as they
  are), base64, hex.
- The %-format of ``consume -f`` and ``produce -F`` (kcat's and rpk's tokens; see FORMAT_HELP).
- The JSON lines of ``consume --json`` and ``produce --input json``.

Output is compiled once per command into a function over a whole ``ColumnBatch``; input is
parsed a chunk of lines at a time into columns for ``Engine.produce_batch``.
"""

from __future__ import annotations

import base64
import binascii
import json as jsonlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from .common import Encoding
from .render import info

MAX_TIMESTAMP = (1 << 62) - 1  # the engine's bound on a record timestamp
FORMAT_HELP = ("%t topic, %p partition, %o offset, %k key, %v (or %s) value, %T (or %d) "
               "timestamp in ms (%d{strftime[%F %T]} as UTC text), %h headers, %K %S (or %V) "
               "key and value size (-1 for null), %H header count, %% percent; \\n \\t \\r \\0 "
               "\\xNN \\\\ escapes")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}
_OUT_TOKENS = "tpokvsTdhKSVH"
_IN_TOKENS = {"k": "key", "v": "value", "s": "value", "T": "timestamp", "d": "timestamp",
              "p": "partition", "t": None, "o": None}  # None: read and ignored


# ---------------------------------------------------------------- encodings
def encoder(enc: Encoding, for_json: bool) -> Callable[[bytes | None], Any]:
    """Bytes as ``enc``: str (or None) for JSON, bytes (null as nothing) for a format."""
    warned = []

    null = None if for_json else b""  # a format string prints null as nothing
    if enc is Encoding.base64:
        return lambda b: null if b is None else (
            base64.b64encode(b).decode() if for_json else base64.b64encode(b))
    if enc is Encoding.hex:
        return lambda b: null if b is None else (b.hex() if for_json else b.hex().encode())
    if not for_json:
        return lambda b: b"" if b is None else b

    def utf8(b: bytes | None) -> str | None:
        if b is None:
            return None
        try:
            return b.decode()
        except UnicodeDecodeError:
            if not warned:
                warned.append(1)
                info("warning: some bytes are not UTF-8 and were replaced; use "
                     "--key-encoding/--value-encoding base64 for binary data")
            return b.decode(errors="replace")

    return utf8


def decoder(enc: Encoding) -> Callable[[bytes], bytes] | None:
    """Text in ``enc`` back to bytes (ValueError if it is not); None for utf8 (as it is)."""
    if enc is Encoding.base64:
        return lambda t: binascii.a2b_base64(t, strict_mode=True)
    if enc is Encoding.hex:
        return lambda t: bytes.fromhex(t.decode("ascii") if isinstance(t, bytes) else t)
    return None


# ---------------------------------------------------------------- %-formats
def unescape(text: str, option: str) -> str:
    """``\\n \\t \\r \\0 \\\\`` and ``\\xNN``; any other backslash stays as it is."""
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
            if n >= 0:  # (a byte over 0x7f stays one byte: a surrogate escape, see _raw)
                out.append(chr(n) if n < 0x80 else chr(0xDC00 + n))
            else:
                digits = ""
            if len(digits) != 2:
                raise typer.BadParameter(f"\\x takes two hex digits, as in \\x1f, not "
                                         f"{text[i:i + 4]!r}", param_hint=option)
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _raw(text: str | None) -> bytes:
    """Literal text as bytes: bytes argv could not decode, and ``\\xNN`` escapes, as they
    were (surrogate escapes)."""
    return (text or "").encode("utf-8", "surrogateescape")


def tokens(fmt: str, option: str, allowed: str) -> list[tuple[str, str | None]]:
    """A %-format as ``[(token, modifier)]`` with ``("", text)`` for literal text."""
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
            raise typer.BadParameter(f"unknown format token %{t}: use {FORMAT_HELP}",
                                     param_hint=option)
        mod = None
        if i < len(fmt) and fmt[i] == "{":
            mod, i = _modifier(fmt, i, t, option)
        if lit:
            out.append(("", unescape(lit, option)))
            lit = ""
        out.append((t, mod))
    if lit:
        out.append(("", unescape(lit, option)))
    return out


def _modifier(fmt: str, i: int, t: str, option: str) -> tuple[str, int]:
    """``{strftime[...]}`` after %T/%d (rpk's; any number of ``#`` may wrap the brackets:
    ``{strftime##[...]##}``): the strftime text and the index after the closing brace."""
    hint = "write %{ for a literal brace"
    if t not in "Td" or not fmt.startswith("{strftime", i):
        raise typer.BadParameter(f"%{t}{{...}}: only %d and %T take a modifier, "
                                 f"{{strftime[FORMAT]}} ({hint})", param_hint=option)
    j = i + len("{strftime")
    hashes = len(fmt[j:]) - len(fmt[j:].lstrip("#"))
    close = "]" + "#" * hashes + "}"
    end = fmt.find(close, j + hashes + 1)
    if fmt[j + hashes:j + hashes + 1] != "[" or end < 0:
        raise typer.BadParameter(f"%{t}{{strftime[...]}} is not closed ({hint})",
                                 param_hint=option)
    return fmt[j + hashes + 1:end], end + len(close)


def formatter(fmt: str, kenc: Callable, venc: Callable, option: str = "--format"
              ) -> Callable[[Any], bytes]:
    """Compile a %-format into a function over one ``ColumnBatch``."""
    toks = tokens(fmt, option, _OUT_TOKENS)
    if [t for t, _ in toks] in (["v", ""], ["s", ""]) and toks[-1][1] == "\n":
        def fast(b: Any) -> bytes:  # the common '%v\n': one join per batch
            return b"\n".join([venc(v) for v in b.values]) + b"\n" if b.values else b""
        return fast
    parts = [_output_part(t, mod, kenc, venc) for t, mod in toks]

    def generic(b: Any) -> bytes:
        p, t = b.partition, b.topic
        return b"".join([b"".join([f(t, p, o, ts, k, v, h) for f in parts])
                         for o, ts, k, v, h in zip(b.offsets, b.timestamps, b.keys, b.values,
                                                   b.headers)])
    return generic


def _output_part(t: str, mod: str | None, kenc: Callable, venc: Callable
                 ) -> Callable[..., bytes]:
    if t == "":
        lit = _raw(mod)
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


def json_lines(kenc: Callable, venc: Callable) -> Callable[[Any], bytes]:
    """One JSON object per record: topic partition offset timestamp key value headers."""
    def emit(b: Any) -> bytes:
        topic, p = b.topic, b.partition
        return "".join([
            jsonlib.dumps({"topic": topic, "partition": p, "offset": o, "timestamp": t,
                           "key": kenc(k), "value": venc(v),
                           "headers": [[hk, None if hv is None else venc(hv)] for hk, hv in h]},
                          separators=(",", ":")) + "\n"
            for o, t, k, v, h in zip(b.offsets, b.timestamps, b.keys, b.values, b.headers)
        ]).encode()
    return emit


# ---------------------------------------------------------------- input
class LineError(Exception):
    """The input line (0-based within its chunk) that cannot be a record, and why."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


@dataclass
class Parsed:
    """A chunk's records as columns; ``lines[i]`` is the chunk line of record ``i`` (None:
    record i is line i); ``error``: the first bad line (the records before it are here)."""

    values: list
    keys: list | None = None
    headers: list | None = None
    partitions: list | None = None
    timestamps: list | None = None
    lines: list[int] | None = None
    error: LineError | None = None


class LinesInput:
    """One value per line; ``-k KEY`` for every record or ``-K SEP`` to split KEY<SEP>VALUE.
    An empty line is an empty value."""

    terminator = b"\n"

    def __init__(self, key: bytes | None, sep: bytes | None, kdec: Callable | None,
                 vdec: Callable | None) -> None:
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


class FormatInput:
    """Records as ``produce -F`` describes them (rpk's ``produce -f``): each token's text ends
    where the literal after it starts; the format's last literal (``\\n`` unless it ends with
    another) ends a record, so ``-F '%v\\0'`` reads NUL-separated values."""

    def __init__(self, fmt: str, key: bytes | None, kdec: Callable | None,
                 vdec: Callable | None, option: str = "--format") -> None:
        toks = tokens(fmt, option, "".join(_IN_TOKENS) + "hKSVH")
        for t, mod in toks:
            if t and t not in _IN_TOKENS:
                raise typer.BadParameter(
                    f"%{t} is printed by consume but not read by produce: use %k %v %T %p "
                    "(and %t %o, read and ignored); --input json carries headers",
                    param_hint=option)
            if mod is not None and t:
                raise typer.BadParameter(f"%{t}{{...}}: produce reads timestamps as epoch ms",
                                         param_hint=option)
        if not toks or toks[-1][0] != "":
            toks.append(("", "\n"))
        self.terminator = _raw(toks[-1][1])
        # (token, None) or ("", literal bytes)
        self.steps = [(t, None if t else _raw(m)) for t, m in toks[:-1]]
        for (a, _), (b, _) in zip(self.steps, self.steps[1:]):
            if a and b:
                raise typer.BadParameter(f"%{a}%{b}: put a separator between two tokens (where "
                                         f"%{a} ends)", param_hint=option)
        self.fields = {_IN_TOKENS[t] for t, _ in self.steps if t}
        if key is not None and "key" in self.fields:
            raise typer.BadParameter("--key cannot be used with a --format that has %k",
                                     param_hint="--key")
        self.key, self.kdec, self.vdec = key, kdec, vdec

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
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
                        if not rec.startswith(lit, pos):  # type: ignore[arg-type]
                            raise LineError(i, f"expected {lit.decode(errors='replace')!r} at "
                                            f"byte {pos + 1}")  # type: ignore[union-attr]
                        pos += len(lit)  # type: ignore[arg-type]
                        continue
                    end = len(rec)
                    if n + 1 < len(steps):
                        nxt = steps[n + 1][1]
                        end = rec.find(nxt, pos)  # type: ignore[arg-type]
                        if end < 0:
                            raise LineError(i, f"no {nxt.decode(errors='replace')!r} after "
                                            f"%{t}")  # type: ignore[union-attr]
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


def _field(got: dict, names: str, dec: Callable | None, i: int, what: str) -> bytes | None:
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


class JsonInput:
    """One JSON object per line, as ``consume --json`` prints them: key, value, headers,
    timestamp, partition (used unless the line is a consumed record, one with an offset: then
    only with ``keep_partition``), topic and offset (ignored). Blank lines are skipped."""

    terminator = b"\n"
    FIELDS = {"key", "value", "headers", "partition", "timestamp", "topic", "offset"}

    def __init__(self, keep_partition: bool, kdec: Callable | None,
                 vdec: Callable | None) -> None:
        self.keep_partition, self.kdec, self.vdec = keep_partition, kdec, vdec

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
        out = Parsed([], [], [], [], [], [])
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                obj = _load(line, i)
                if not isinstance(obj, dict):
                    raise LineError(i, "expected a JSON object with key/value/headers/"
                                    "partition/timestamp")
                unknown = set(obj) - self.FIELDS
                if unknown:
                    raise LineError(i, f"unknown field(s) {', '.join(sorted(unknown))}")
                key = self._bytes(obj.get("key"), "key", i, self.kdec)
                value = self._bytes(obj.get("value"), "value", i, self.vdec)
                headers = self._headers(obj.get("headers"), i)
                p = obj.get("partition")
                if "offset" in obj and not self.keep_partition:
                    p = None  # (where a record was read from is not where it goes)
                if p is not None and (not isinstance(p, int) or isinstance(p, bool)
                                      or not 0 <= p < partitions):
                    raise LineError(i, f"partition must be an integer from 0 to {partitions - 1}"
                                    f" (the topic has {partitions}), not {_shown(p)}")
                t = obj.get("timestamp")
                if t is not None and (not isinstance(t, int) or isinstance(t, bool)
                                      or not 0 <= t <= MAX_TIMESTAMP):
                    raise LineError(i, f"timestamp must be milliseconds since the epoch (0 to "
                                    f"{MAX_TIMESTAMP}), not {_shown(t)}")
            except LineError as e:
                out.error = e
                return out
            out.keys.append(key)  # type: ignore[union-attr]
            out.values.append(value)
            out.headers.append(headers)  # type: ignore[union-attr]
            out.partitions.append(p)  # type: ignore[union-attr]
            out.timestamps.append(t)  # type: ignore[union-attr]
            out.lines.append(i)  # type: ignore[union-attr]
        return out

    def _headers(self, h: Any, i: int) -> list[tuple[str, bytes | None]]:
        h = h or []
        if isinstance(h, dict):
            h = list(h.items())
        try:
            pairs = [(str(k), v) for k, v in h]
        except (TypeError, ValueError):
            raise LineError(i, "headers must be an object or a list of [key, value] "
                            "pairs") from None
        for k, _ in pairs:
            _utf8(k, "a header key", i)
        return [(k, self._bytes(v, "header value", i, self.vdec)) for k, v in pairs]

    @staticmethod
    def _bytes(v: Any, what: str, i: int, dec: Callable | None) -> bytes | None:
        if v is None:
            return None
        if dec is not None:
            if not isinstance(v, str):
                raise LineError(i, f"{what} must be a string (or null) in the encoding given")
            try:
                return dec(v)
            except (ValueError, UnicodeEncodeError) as e:
                raise LineError(i, f"{what}: {e}") from None
        if isinstance(v, str):
            return _utf8(v, what, i)
        if isinstance(v, (dict, list, int, float, bool)):
            return jsonlib.dumps(v, separators=(",", ":")).encode()  # (ASCII: \u escapes)
        raise LineError(i, f"{what} must be a string or null")


def _utf8(text: str, what: str, index: int) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        raise LineError(index, f"{what} holds {text[e.start]!r} at character {e.start + 1}, "
                        "half of a UTF-16 surrogate pair: not text") from None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range")
    return v


def _load(line: bytes, index: int) -> Any:
    """One input line as JSON, strictly: no NaN or Infinity, no number too large for a float,
    nesting only as deep as the parser goes (LineError otherwise)."""
    try:
        return jsonlib.loads(line, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:
        raise LineError(index, "malformed JSON (nested too deeply)") from None
    except jsonlib.JSONDecodeError as e:
        raise LineError(index, f"malformed JSON ({e.msg} at column {e.colno})") from None
    except ValueError as e:  # bad UTF-8, NaN/Infinity, an int of too many digits
        reason = str(e) if len(str(e)) <= 120 else str(e)[:120] + "..."
        raise LineError(index, f"malformed JSON ({reason})") from None


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:40] + "..."
