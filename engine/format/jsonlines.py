"""Records as JSON lines, both ways: ``json_lines`` prints one object per record (what
``rivven consume --json`` prints), ``JsonInput`` reads them back (``rivven produce --input
json``).

An object has ``topic partition offset timestamp key value headers``; keys, values and
header values are strings in an encoding of engine.format.text (or null), headers a list of
``[key, value]`` pairs. Input is strict: an object per line (blank lines skipped), no field
it does not know, no NaN or Infinity; a value that is JSON but not a string (an object, a
number) is stored as its compact JSON text.

    >>> from engine.format.records import ColumnBatch
    >>> from engine.format.text import encoder
    >>> out = json_lines(encoder("utf8", True), encoder("base64", True))
    >>> text = out(ColumnBatch("t", 0, [7], [5], [None], [b"v"], [[("h", b"1")]]))
    >>> text[:60]
    b'{"topic":"t","partition":0,"offset":7,"timestamp":5,"key":nu'
    >>> text[60:]
    b'll,"value":"dg==","headers":[["h","MQ=="]]}\\n'
    >>> JsonInput(False, None, None).parse([b'{"value": {"n": 1}}'], partitions=1).values
    [b'{"n":1}']
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .text import MAX_TIMESTAMP, Decode, Encode, LineError, Parsed

# a JSON value to the bytes stored: a schema's serializer (``rivven produce --value-schema``)
Convert = Callable[[Any], bytes]


def json_lines(kenc: Encode, venc: Encode) -> Callable[[Any], bytes]:
    """A function from one ``ColumnBatch`` to its JSON lines (bytes): topic partition
    offset timestamp key value headers; ``kenc``/``venc``: ``encoder(..., for_json=True)``
    of keys and values (header values too)."""
    each = json_records(kenc, venc)
    return lambda b: b"".join(each(b))


def json_records(kenc: Encode, venc: Encode, henc: Encode | None = None
                 ) -> Callable[[Any], list[bytes]]:
    """As ``json_lines``, one bytes per record (its line, newline included): what a writer
    needs to write whole lines only and to know which records it wrote. ``henc``: the
    encoder of header values when it is not ``venc`` (``consume --decode`` decodes values,
    not headers)."""
    henc = venc if henc is None else henc

    def emit(b: Any) -> list[bytes]:
        topic, p = b.topic, b.partition
        return [
            (jsonlib.dumps({"topic": topic, "partition": p, "offset": o, "timestamp": t,
                            "key": kenc(k), "value": venc(v),
                            "headers": [[hk, None if hv is None else henc(hv)] for hk, hv in h]},
                           separators=(",", ":")) + "\n").encode()
            for o, t, k, v, h in zip(b.offsets, b.timestamps, b.keys, b.values, b.headers)
        ]
    return emit


class JsonInput:
    """One JSON object per line, as ``json_lines`` prints them: key, value, headers,
    timestamp, partition (used unless the line is a consumed record, one with an offset: then
    only with ``keep_partition``), topic and offset (ignored). Blank lines are skipped
    (``Parsed.lines`` maps records to lines). ``kdec``/``vdec``: decoders of keys and values
    (engine.format.text.decoder; None: UTF-8 text). ``kconv``/``vconv``, when set, turn
a key's or value's JSON value (an object, a number, a string...) into the bytes stored
instead (a schema's serializer)."""

    terminator = b"\n"
    FIELDS = {"key", "value", "headers", "partition", "timestamp", "topic", "offset"}

    def __init__(self, keep_partition: bool, kdec: Decode | None, vdec: Decode | None,
                 kconv: Convert | None = None, vconv: Convert | None = None) -> None:
        self.keep_partition, self.kdec, self.vdec = keep_partition, kdec, vdec
        self.kconv, self.vconv = kconv, vconv

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
        """The records of ``lines``; ``partitions``: the topic's count, the bound of a
        ``partition`` field."""
        out = Parsed([], [], [], [], [], [])
        assert out.keys is not None and out.headers is not None and out.lines is not None
        assert out.partitions is not None and out.timestamps is not None
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
                key = (self._bytes(obj.get("key"), "key", i, self.kdec) if self.kconv is None
                       else converted(obj.get("key"), "key", i, self.kconv))
                value = (self._bytes(obj.get("value"), "value", i, self.vdec)
                         if self.vconv is None
                         else converted(obj.get("value"), "value", i, self.vconv))
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
            out.keys.append(key)
            out.values.append(value)
            out.headers.append(headers)
            out.partitions.append(p)
            out.timestamps.append(t)
            out.lines.append(i)
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
    def _bytes(v: Any, what: str, i: int, dec: Decode | None) -> bytes | None:
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


def converted(v: Any, what: str, index: int, conv: Convert) -> bytes | None:
    """``conv(v)`` (None stays None: a tombstone), its refusal a LineError naming ``what``."""
    if v is None:
        return None
    try:
        return conv(v)
    except InvalidArgument as e:
        raise LineError(index, f"{what}: {e}") from None


class ConvertedInput:
    """Text input (``LinesInput``, ``FormatInput``) whose keys and values are JSON texts,
    each parsed and turned into the bytes stored by ``kconv``/``vconv`` (a schema's
    serializer). With ``tombstone_empty`` an empty value stays empty (a tombstone)."""

    def __init__(self, inner: Any, kconv: Convert | None, vconv: Convert | None,
                 tombstone_empty: bool) -> None:
        self.inner, self.kconv, self.vconv = inner, kconv, vconv
        self.tombstone_empty = tombstone_empty
        self.terminator = inner.terminator

    def parse(self, lines: list[bytes], partitions: int) -> Parsed:
        out = self.inner.parse(lines, partitions)
        cols = [c for c in (out.values, out.keys, out.headers, out.partitions, out.timestamps,
                            out.lines) if c is not None]
        for j in range(len(out.values)):
            line = out.lines[j] if out.lines is not None else j
            try:
                v = out.values[j]
                if self.vconv is not None and v is not None \
                        and not (self.tombstone_empty and not v):
                    out.values[j] = converted(_load(v, line), "value", line, self.vconv)
                if self.kconv is not None and out.keys is not None and out.keys[j] is not None:
                    out.keys[j] = converted(_load(out.keys[j], line), "key", line, self.kconv)
            except LineError as e:
                for c in cols:
                    del c[j:]
                out.error = e
                break
        return out


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
