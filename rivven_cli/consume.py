"""``rivven consume``: read records to stdout, as a format string or JSON lines."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from .common import Encoding, Isolation, IsolationOpt, PartitionsOpt, as_usage_error, open_engine
from .render import info

CHUNK = 5000  # records per poll of a group consumer
POLL_S = 0.1


def consume(
    topics: Annotated[list[str], typer.Argument(
        help="Topic(s) to read (with -r: regular expressions a whole name must match).",
        show_default=False)],
    regex: Annotated[bool, typer.Option(
        "--regex", "-r", help="The topics are regular expressions (rpk's -r): read every "
        "topic one of them matches whole, e.g. -r 'orders-.*'.")] = False,
    partition: PartitionsOpt = None,
    offset: Annotated[str, typer.Option(
        "--offset", "-o", help="beginning, end, N, -N (N before the end), +N (N after the "
        "start) or @TIME (epoch ms, RFC 3339, or relative like -2h); or a range START:END "
        "(END exclusive), e.g. 100:200, @-2h:-1h, beginning:+10.")] = "beginning",
    num: Annotated[int | None, typer.Option("--num", "-n", min=1, help="Stop after N records.")
                   ] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep reading records as they are appended (Ctrl-C to stop).")] = False,
    idle_timeout: Annotated[str | None, typer.Option(
        "--idle-timeout", help="Follow, and stop after this long without a record (e.g. 5s, "
        "500ms, 2m).")] = None,
    exit_at_end: Annotated[bool, typer.Option(
        "--exit", "-e", help="Stop at the end offsets taken at start: what consume does "
        "unless --follow (kcat's -e, accepted for its users).")] = False,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="Output format: %t topic, %p partition, %o offset, %k key, %v (%s) value, "
        "%T (%d) timestamp, %d{strftime[%F %T]}, %h headers, %K %S (%V) sizes, %H header count; "
        "escapes \\n \\t \\0 \\xNN. E.g. '%k=%v\\n'.")
    ] = None,
    json: Annotated[bool, typer.Option(
        "--json", help="One JSON object per line: topic partition offset timestamp key value "
        "headers.")] = False,
    key_encoding: Annotated[Encoding, typer.Option(
        "--key-encoding", help="utf8, base64 or hex.")] = Encoding.utf8,
    value_encoding: Annotated[Encoding, typer.Option(
        "--value-encoding", help="utf8, base64 or hex (header values too, in --json).")
    ] = Encoding.utf8,
    group: Annotated[str | None, typer.Option(
        "--group", "-g", help="Read as a member of this consumer group: resume from its "
        "committed offsets and commit what was printed.")] = None,
    member_id: Annotated[str | None, typer.Option(
        "--member-id", help="With --group: a fixed member id (default: random).")] = None,
    isolation: IsolationOpt = Isolation.read_uncommitted,
) -> None:
    """Read records from the beginning (or --offset) to the end offsets taken at start.

    With --group: the group's partitions are split between its live consumers; each resumes
    from the committed offsets (--offset beginning|end says where to start without one) and
    commits after every chunk it prints.

    With --isolation read_committed it reads only committed records, and stops (or, with
    --follow, waits) at the last stable offset while a transaction is open.
    """
    from .positions import BEGINNING, END, check_past_end, parse_duration, parse_range

    level = isolation.value
    if json and fmt is not None:
        raise typer.BadParameter("use either --json or --format, not both")
    idle_ms = None if idle_timeout is None else parse_duration(idle_timeout, "--idle-timeout")
    if exit_at_end and (follow or idle_ms is not None):
        raise typer.BadParameter("--exit stops at the end, --follow/--idle-timeout read on: "
                                 "use one", param_hint="--exit")
    follow = follow or idle_ms is not None
    from engine.format.jsonlines import json_lines
    from engine.format.text import encoder
    from engine.format.textformat import formatter

    kenc = encoder(key_encoding.value, json, on_replace=_not_utf8)
    venc = encoder(value_encoding.value, json, on_replace=_not_utf8)
    out = sys.stdout.buffer
    with as_usage_error("--format"):
        emit = json_lines(kenc, venc) if json else formatter(
            fmt if fmt is not None else "%v\n", kenc, venc)
    if group is not None:
        if partition:
            raise typer.BadParameter("--partition cannot be used with --group (the group "
                                     "assigns partitions)")
        if offset.lower() not in BEGINNING + END:
            raise typer.BadParameter("with --group, --offset is beginning or end: where to "
                                     "start a partition the group has no offset for",
                                     param_hint="--offset")
        _consume_group(topics, regex, group, member_id,
                       "earliest" if offset.lower() in BEGINNING else "latest",
                       num, follow, emit, out, idle_ms, level)
        return

    start, stop = parse_range(offset, "--offset")
    if stop is not None and follow:
        raise typer.BadParameter("a range START:END stops at END; --follow reads on: use one",
                                 param_hint="--offset")
    with open_engine(read_only=True) as eng:
        names = _names(eng, topics, regex)
        for name in names:
            check_past_end(eng, name, start, "--offset", "reading from the end offset",
                           partition, level, below_start="reading from the log start")
            check_past_end(eng, name, stop, "--offset END", "reading to the end", partition,
                           level)
        for b in eng.stream(names, partition, start, num, follow, on_idle=out.flush,
                            idle_timeout_ms=idle_ms, end=stop, isolation_level=level):
            out.write(emit(b))
        out.flush()


def _not_utf8() -> None:
    info("warning: some bytes are not UTF-8 and were replaced; use "
         "--key-encoding/--value-encoding base64 for binary data")


def _names(eng: Any, topics: list[str], regex: bool) -> list[str]:
    """The topics to read: as named, or those the -r expressions match."""
    if not regex:
        return topics
    names = eng.match_topics(topics)
    if not names:
        from .common import fail

        fail(f"no topic matches {' or '.join(repr(t) for t in topics)} (a whole name must "
             "match: 'orders-.*', not 'orders-'); see 'rivven topic list'")
    return names


def _consume_group(topics: list[str], regex: bool, group: str, member_id: str | None,
                   reset: str, num: int | None, follow: bool, emit: Callable, out: Any,
                   idle_ms: int | None = None, level: str = "read_uncommitted") -> None:
    def said(e: dict) -> None:
        if e["reason"] == "out-of-range":
            info(f"group {group}: {e['topic']}-{e['partition']} committed offset {e['prior']} "
                 f"is out of range; reset to {e['policy']} ({e['new']})")

    with open_engine() as eng, eng.consumer(group, _names(eng, topics, regex),
                                            auto_offset_reset=reset,
                                            enable_auto_commit=False, member_id=member_id,
                                            client_id="rivven-consume", on_reset=said,
                                            isolation_level=level) as c:
        left = num
        last_record = time.monotonic()
        while left is None or left > 0:
            batches = c.poll_batches(timeout_ms=int(POLL_S * 1000) if follow else 0,
                                     max_records=CHUNK if left is None else min(CHUNK, left))
            if not batches:
                c.commit()  # (a no-op unless the positions stepped over transaction markers)
                if follow and (idle_ms is None
                               or (time.monotonic() - last_record) * 1000 < idle_ms):
                    continue
                break
            last_record = time.monotonic()
            for b in batches:
                out.write(emit(b))
                if left is not None:
                    left -= len(b.keys)
            out.flush()
            c.commit()  # only what reached stdout
