"""``rivven consume``: read records to stdout, as a format string or JSON lines."""

from __future__ import annotations

import base64
import json as jsonlib
import sys
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any

import typer

from .common import PartitionsOpt, open_engine
from .positions import BEGINNING, END, check_past_end, parse_range
from .render import info

CHUNK = 5000  # records per poll of a group consumer
POLL_S = 0.1


class Encoding(str, Enum):
    utf8 = "utf8"
    base64 = "base64"
    hex = "hex"


def _encoder(enc: Encoding, for_json: bool) -> Callable[[bytes | None], Any]:
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


def _unescape(fmt: str) -> str:
    return fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r").replace("\\\\", "\\")


def _formatter(fmt: str, topic: str, kenc: Callable, venc: Callable
               ) -> Callable[[int, Any, Any, list, list, Any], bytes]:
    """Compile a %-format into a function over one batch's columns."""
    tokens: list[str | None] = []
    i = 0
    lit = ""
    fmt = _unescape(fmt)
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            t = fmt[i + 1]
            if t == "%":
                lit += "%"
            elif t in "tpokvTh":
                if lit:
                    tokens.append(lit)
                    lit = ""
                tokens.append(None)
                tokens.append(t)
            else:
                raise typer.BadParameter(f"unknown format token %{t}: use %t %p %o %k %v %T %h",
                                         param_hint="--format")
            i += 2
            continue
        lit += c
        i += 1
    if lit:
        tokens.append(lit)
    if tokens == [None, "v", "\n"]:  # the common '%v\n': one join per batch
        def fast(p: int, offs: Any, ts: Any, keys: list, values: list, hs: Any) -> bytes:
            return b"\n".join([venc(v) for v in values]) + b"\n" if values else b""
        return fast
    parts: list[Callable[..., bytes]] = []
    it = iter(tokens)
    for tok in it:
        if tok is None:
            t = next(it)
            parts.append({
                "t": lambda p, o, ts, k, v, h, _t=topic.encode(): _t,
                "p": lambda p, o, ts, k, v, h: str(p).encode(),
                "o": lambda p, o, ts, k, v, h: str(o).encode(),
                "k": lambda p, o, ts, k, v, h: kenc(k),
                "v": lambda p, o, ts, k, v, h: venc(v),
                "T": lambda p, o, ts, k, v, h: str(ts).encode(),
                "h": lambda p, o, ts, k, v, h: ",".join(
                    f"{hk}={'' if hv is None else hv.decode(errors='replace')}"
                    for hk, hv in h).encode(),
            }[t])
        else:
            b = tok.encode()
            parts.append(lambda p, o, ts, k, v, h, _b=b: _b)

    def generic(p: int, offs: Any, ts: Any, keys: list, values: list, hs: Any) -> bytes:
        return b"".join([b"".join([f(p, o, t, k, v, h) for f in parts])
                         for o, t, k, v, h in zip(offs, ts, keys, values, hs)])
    return generic


def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    partition: PartitionsOpt = None,
    offset: Annotated[str, typer.Option(
        "--offset", "-o", help="beginning, end, N, -N (N before the end), +N (N after the "
        "start) or @TIME (epoch ms, RFC 3339, or relative like -2h); or a range START:END "
        "(END exclusive), e.g. 100:200, @-2h:-1h, beginning:+10.")] = "beginning",
    num: Annotated[int | None, typer.Option("--num", "-n", min=1, help="Stop after N records.")
                   ] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep reading records as they are appended (Ctrl-C to stop).")] = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="Output format with %t %p %o %k %v %T %h, e.g. '%k=%v\\n'.")
    ] = None,
    json: Annotated[bool, typer.Option(
        "--json", help="One JSON object per line: topic partition offset timestamp key value "
        "headers.")] = False,
    key_encoding: Annotated[Encoding, typer.Option(
        "--key-encoding", help="utf8, base64 or hex.")] = Encoding.utf8,
    value_encoding: Annotated[Encoding, typer.Option(
        "--value-encoding", help="utf8, base64 or hex.")] = Encoding.utf8,
    group: Annotated[str | None, typer.Option(
        "--group", "-g", help="Read as a member of this consumer group: resume from its "
        "committed offsets and commit what was printed.")] = None,
    member_id: Annotated[str | None, typer.Option(
        "--member-id", help="With --group: a fixed member id (default: random).")] = None,
) -> None:
    """Read records from the beginning (or --offset) to the end offsets taken at start.

    With --group: the group's partitions are split between its live consumers; each resumes
    from the committed offsets (--offset beginning|end says where to start without one) and
    commits after every chunk it prints.
    """
    if json and fmt is not None:
        raise typer.BadParameter("use either --json or --format, not both")
    kenc = _encoder(key_encoding, json)
    venc = _encoder(value_encoding, json)
    out = sys.stdout.buffer
    if json:
        def emit(p: int, offs: Any, ts: Any, keys: list, values: list, hs: Any) -> bytes:
            return "".join([
                jsonlib.dumps({"topic": topic, "partition": p, "offset": o, "timestamp": t,
                               "key": kenc(k), "value": venc(v),
                               "headers": [[hk, None if hv is None else venc(hv)]
                                           for hk, hv in h]},
                              separators=(",", ":")) + "\n"
                for o, t, k, v, h in zip(offs, ts, keys, values, hs)]).encode()
    else:
        emit = _formatter(fmt if fmt is not None else "%v\n", topic, kenc, venc)
    if group is not None:
        if partition:
            raise typer.BadParameter("--partition cannot be used with --group (the group "
                                     "assigns partitions)")
        if offset.lower() not in BEGINNING + END:
            raise typer.BadParameter("with --group, --offset is beginning or end: where to "
                                     "start a partition the group has no offset for",
                                     param_hint="--offset")
        _consume_group(topic, group, member_id,
                       "earliest" if offset.lower() in BEGINNING else "latest",
                       num, follow, emit, out)
        return

    start, stop = parse_range(offset, "--offset")
    if stop is not None and follow:
        raise typer.BadParameter("a range START:END stops at END; --follow reads on: use one",
                                 param_hint="--offset")
    with open_engine(read_only=True) as eng:
        check_past_end(eng, topic, start, "--offset", "reading from the end offset", partition)
        check_past_end(eng, topic, stop, "--offset END", "reading to the end", partition)
        for b in eng.stream(topic, partition, start, num, follow, on_idle=out.flush, end=stop):
            out.write(emit(b.partition, b.offsets, b.timestamps, b.keys, b.values, b.headers))
        out.flush()


def _consume_group(topic: str, group: str, member_id: str | None, reset: str, num: int | None,
                   follow: bool, emit: Callable, out: Any) -> None:
    def said(e: dict) -> None:
        if e["reason"] == "out-of-range":
            info(f"group {group}: {e['topic']}-{e['partition']} committed offset {e['prior']} "
                 f"is out of range; reset to {e['policy']} ({e['new']})")

    with open_engine() as eng, eng.consumer(group, topic, auto_offset_reset=reset,
                                            enable_auto_commit=False, member_id=member_id,
                                            client_id="rivven-consume", on_reset=said) as c:
        left = num
        while left is None or left > 0:
            batches = c.poll_batches(timeout_ms=int(POLL_S * 1000) if follow else 0,
                                     max_records=CHUNK if left is None else min(CHUNK, left))
            if not batches:
                if follow:
                    continue
                break
            for b in batches:
                out.write(emit(b.partition, b.offsets, b.timestamps, b.keys, b.values, b.headers))
                if left is not None:
                    left -= len(b.keys)
            out.flush()
            c.commit()  # only what reached stdout
