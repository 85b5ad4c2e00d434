"""``rivven produce``: records from stdin or a file, streamed in batches as lines arrive."""

from __future__ import annotations

import json as jsonlib
import os
import sys
import time
from enum import Enum
from typing import Annotated, Any

import typer

from engine.errors import plural

from .common import fail, open_engine
from .render import human_bytes, info

READ_SIZE = 1 << 20


class InputFormat(str, Enum):
    lines = "lines"
    json = "json"


class LineError(Exception):
    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def _headers(pairs: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k:
            raise typer.BadParameter(f"header {p!r} is not in key=value form", param_hint="-H")
        out.append((k, v.encode()))
    return out


MAX_TIMESTAMP = (1 << 62) - 1  # the engine's bound on a record timestamp


def _bytes(v: Any, what: str, index: int) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return _utf8(v, what, index)
    if isinstance(v, (dict, list, int, float, bool)):
        return jsonlib.dumps(v, separators=(",", ":")).encode()  # (ASCII: \u escapes)
    raise LineError(index, f"{what} must be a string or null")


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


def _parse_json(lines: list[bytes], partitions: int) -> tuple[list, list, list, list, list]:
    keys, values, headers, parts, tss = [], [], [], [], []
    for i, line in enumerate(lines):
        obj = _load(line, i)
        if not isinstance(obj, dict):
            raise LineError(i, "expected a JSON object with key/value/headers/partition")
        unknown = set(obj) - {"key", "value", "headers", "partition", "timestamp"}
        if unknown:
            raise LineError(i, f"unknown field(s) {', '.join(sorted(unknown))}")
        keys.append(_bytes(obj.get("key"), "key", i))
        values.append(_bytes(obj.get("value"), "value", i))
        h = obj.get("headers") or []
        if isinstance(h, dict):
            h = list(h.items())
        try:
            pairs = [(str(k), v) for k, v in h]
        except (TypeError, ValueError):
            raise LineError(i, "headers must be an object or a list of [key, value] pairs") from None
        for k, _ in pairs:
            _utf8(k, "a header key", i)
        headers.append([(k, _bytes(v, "header value", i)) for k, v in pairs])
        p = obj.get("partition")
        if p is not None and (not isinstance(p, int) or isinstance(p, bool)
                              or not 0 <= p < partitions):
            raise LineError(i, f"partition must be an integer from 0 to {partitions - 1} (the "
                            f"topic has {partitions}), not {_shown(p)}")
        parts.append(p)
        t = obj.get("timestamp")
        if t is not None and (not isinstance(t, int) or isinstance(t, bool)
                              or not 0 <= t <= MAX_TIMESTAMP):
            raise LineError(i, f"timestamp must be milliseconds since the epoch (0 to "
                            f"{MAX_TIMESTAMP}), not {_shown(t)}")
        tss.append(t)
    return keys, values, headers, parts, tss


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:40] + "..."


def _fail_line(message: str) -> None:
    fail(message)


def _parse_lines(lines: list[bytes], key: bytes | None, sep: bytes | None
                 ) -> tuple[list, list]:
    if sep is None:
        return [key] * len(lines), lines
    keys, values = [], []
    for i, line in enumerate(lines):
        k, s, v = line.partition(sep)
        if not s:
            raise LineError(i, f"no key separator {sep.decode(errors='replace')!r} in the line")
        keys.append(k)
        values.append(v)
    return keys, values


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    key: Annotated[str | None, typer.Option("--key", "-k", help="Key for every record.")] = None,
    key_separator: Annotated[str | None, typer.Option(
        "--key-separator", "-K", help="Split each line into KEY<SEP>VALUE at the first SEP.")
    ] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", "-H", help="Header key=value on every record (repeatable).")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", "-p", min=0, help="Write every record to this partition.")] = None,
    compression: Annotated[str | None, typer.Option(
        "--compression", "-z", help="none, gzip, snappy, lz4 or zstd (default: topic config).")
    ] = None,
    tombstone_empty: Annotated[bool, typer.Option(
        "--tombstone-empty", help="An empty value becomes a null value (a tombstone).")] = False,
    input_format: Annotated[InputFormat, typer.Option(
        "--input", help="lines: one value per line; json: one object per line with "
        "key/value/headers/partition/timestamp.")] = InputFormat.lines,
    print_offsets: Annotated[bool, typer.Option(
        "--print-offsets", help="Print 'PARTITION OFFSET' per record once it is durable.")
    ] = False,
    file: Annotated[str | None, typer.Option(
        "--file", "-f", help="Read records from this file instead of stdin.")] = None,
    batch_records: Annotated[int, typer.Option(
        "--batch-records", min=1, help="Most records per produce call.")] = 10_000,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    json: Annotated[bool, typer.Option(
        "--json", help="--print-offsets as JSON lines, and the summary as JSON on stderr.")
    ] = False,
) -> None:
    """Produce records: one per line from stdin (or --file), written as lines arrive."""
    if key is not None and key_separator is not None:
        raise typer.BadParameter("use either --key or --key-separator, not both")
    if key_separator == "":
        raise typer.BadParameter("--key-separator must not be empty")
    if compression is not None:
        from engine.format.codecs import codec_id

        codec_id(compression)
    hdrs = _headers(header or [])
    kbytes = key.encode() if key is not None else None
    sep = key_separator.encode() if key_separator is not None else None
    if file is not None:
        try:
            fd = os.open(file, os.O_RDONLY)
        except OSError as e:
            fail(f"cannot read --file {file}: {e.strerror}")
    else:
        fd = sys.stdin.fileno()
    out = sys.stdout.buffer
    started = time.perf_counter()
    count = nbytes = 0
    line_no = 0  # lines consumed before the current chunk

    with open_engine() as eng:
        eng.topic(topic, create_hint=True)

        def send(lines: list[bytes]) -> None:
            nonlocal count, nbytes, line_no
            error: LineError | None = None
            try:
                if input_format is InputFormat.json:
                    nparts = eng.topic(topic).partitions  # (partitions may have been added)
                    keys, values, hs, parts, tss = _parse_json(lines, nparts)
                else:
                    keys, values = _parse_lines(lines, kbytes, sep)
                    hs, parts, tss = None, None, None
            except LineError as e:
                error = e
                lines = lines[: e.index]
                if input_format is InputFormat.json:
                    keys, values, hs, parts, tss = _parse_json(lines, nparts)
                else:
                    keys, values = _parse_lines(lines, kbytes, sep)
                    hs, parts, tss = None, None, None
            if lines:
                if tombstone_empty:
                    values = [v if v else None for v in values]
                if hdrs:
                    hs = [list(hdrs) + list(h) for h in hs] if hs else [hdrs] * len(values)
                try:
                    acks = eng.produce_batch(topic, values, keys=keys, headers=hs,
                                             timestamps=tss, partition=partition,
                                             partitions=parts, compression=compression)
                except Exception as e:
                    idx = getattr(e, "index", None)
                    if idx is not None:
                        _fail_line(f"line {line_no + idx + 1}: {e}; records before this "
                                   "line's batch are stored, none after")
                    raise
                if print_offsets:
                    fmt = '{{"partition":{},"offset":{}}}\n' if json else "{} {}\n"
                    out.write("".join([fmt.format(p, o) for p, o in acks]).encode())
                    out.flush()
                count += len(values)
                nbytes += sum(len(v) for v in values if v is not None)
                line_no += len(lines)
            if error is not None:
                _fail_line(f"line {line_no + 1}: {error}; the {plural(count, 'record')} before "
                           f"it {'is' if count == 1 else 'are'} stored, none after")

        pending = b""
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError as e:
                fail(f"cannot read input: {e.strerror}")
            if not data:
                break
            pending += data
            lines = pending.split(b"\n")
            pending = lines.pop()
            for i in range(0, len(lines), batch_records):
                send(lines[i: i + batch_records])
        if pending:
            send([pending])
    el = time.perf_counter() - started
    if json and not quiet:
        info(jsonlib.dumps({"topic": topic, "records": count, "bytes": nbytes,
                            "seconds": round(el, 3)}))
    elif not quiet:
        info(f"produced {plural(count, 'record')} ({human_bytes(nbytes)}) to {topic} in {el:.2f} s "
             f"({count / el if el else 0:,.0f} records/s)")
