"""``rivven consume``: read records to stdout, as a format string or JSON lines."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer

from .common import Encoding, Isolation, IsolationOpt, PartitionsOpt, as_usage_error, open_engine
from .habits import same_or_refuse, x_choice, x_settings
from .render import info

CHUNK = 5000  # records per poll of a group consumer
POLL_S = 0.1
# kcat's -X keys (librdkafka's settings) that mean something here
X_TAKES = {"auto.offset.reset": "-o beginning|end", "group.id": "--group",
           "isolation.level": "--isolation", "client.id": "a group member's client id"}
RESETS = {"earliest": "beginning", "smallest": "beginning", "beginning": "beginning",
          "latest": "end", "largest": "end", "end": "end"}


def consume(
    topics: Annotated[list[str] | None, typer.Argument(
        metavar="[TOPIC]...", help="Topic(s) to read (with -r: regular expressions a whole "
        "name must match).", show_default=False)] = None,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="A topic to read, as the argument (Kafka's and kcat's "
        "spelling; repeatable).", show_default=False)] = None,
    regex: Annotated[bool, typer.Option(
        "--regex", "-r", help="The topics are regular expressions (rpk's -r): read every "
        "topic one of them matches whole, e.g. -r 'orders-.*'.")] = False,
    partition: PartitionsOpt = None,
    offset: Annotated[list[str] | None, typer.Option(
        "--offset", "-o", help="beginning, end, N, -N (N before the end), +N (N after the "
        "start) or @TIME (epoch ms, RFC 3339, or relative like -2h); or a range START:END "
        "(END exclusive), e.g. 100:200, @-2h:-1h, beginning:+10. kcat's s@TS and e@TS "
        "(start at, stop before the first record at or after TS) too: -o s@A -o e@B.",
        show_default=False)] = None,
    from_beginning: Annotated[bool, typer.Option(
        "--from-beginning", help="-o beginning (Kafka's console consumer; the default "
        "here).")] = False,
    num: Annotated[int | None, typer.Option(
        "--num", "-n", min=1, help="Stop after N records (also -c N, kcat's, and "
        "--max-messages N, Kafka's); with --group exactly N are committed.")] = None,
    count: Annotated[int | None, typer.Option(
        "--max-messages", "-c", min=1, hidden=True, help="--num.")] = None,
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
        "--json", "-J", help="One JSON object per line: topic partition offset timestamp key "
        "value headers (-J: kcat's, this shape).")] = False,
    key_encoding: Annotated[Encoding, typer.Option(
        "--key-encoding", help="utf8, base64 or hex.")] = Encoding.utf8,
    value_encoding: Annotated[Encoding, typer.Option(
        "--value-encoding", help="utf8, base64 or hex (header values too, in --json).")
    ] = Encoding.utf8,
    decode: Annotated[bool, typer.Option(
        "--decode", help="Values in Confluent's wire format (Avro, Protobuf, JSON Schema with "
        "a schema id) decoded to JSON by the data dir's schema registry.")] = False,
    decode_keys: Annotated[bool, typer.Option(
        "--decode-keys", help="Keys too (or only keys, without --decode).")] = False,
    group: Annotated[str | None, typer.Option(
        "--group", "-g", help="Read as a member of this consumer group: resume from its "
        "committed offsets and commit what was printed.")] = None,
    member_id: Annotated[str | None, typer.Option(
        "--member-id", help="With --group: a fixed member id (default: random).")] = None,
    isolation: IsolationOpt = Isolation.read_uncommitted,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No notes or warnings on stderr (errors still).")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "-X", metavar="KEY=VALUE", help="kcat's settings that mean something here: "
        "auto.offset.reset, group.id, isolation.level, client.id.", show_default=False)
    ] = None,
) -> None:
    """Read records from the beginning (or --offset) to the end offsets taken at start.

    With --group: the group's partitions are split between its live consumers; each resumes
    from the committed offsets (--offset beginning|end says where to start without one) and
    commits after every chunk it prints.

    With --isolation read_committed it reads only committed records, and stops (or, with
    --follow, waits) at the last stable offset while a transaction is open.
    """
    from .positions import BEGINNING, END, check_past_end, parse_duration, parse_range

    names = [*(topics or []), *(topic or [])]
    if not names:
        raise typer.BadParameter("give the topic(s) to read: rivven consume TOPIC (or --topic "
                                 "TOPIC)", param_hint="TOPICS")
    num = same_or_refuse("--num", num, "-c/--max-messages", count)
    x = x_settings(settings, X_TAKES, "consume")
    group = same_or_refuse("--group", group, "-X group.id=", x.get("group.id"))
    level = same_or_refuse("--isolation", None if isolation is Isolation.read_uncommitted
                           else isolation.value, "-X isolation.level=",
                           x_choice(x, "isolation.level", {i.value: i.value for i in Isolation})
                           ) or isolation.value
    start_text, until = _offsets(offset, from_beginning, x_choice(x, "auto.offset.reset", RESETS),
                                 group is not None)
    if json and fmt is not None:
        raise typer.BadParameter("use either --json or --format, not both")
    idle_ms = None if idle_timeout is None else parse_duration(idle_timeout, "--idle-timeout")
    if exit_at_end and (follow or idle_ms is not None):
        raise typer.BadParameter("--exit stops at the end, --follow/--idle-timeout read on: "
                                 "use one", param_hint="--exit")
    follow = follow or idle_ms is not None
    from engine.format.jsonlines import json_records
    from engine.format.text import encoder
    from engine.format.textformat import record_formatter

    warn = None if quiet else _not_utf8
    kenc = encoder(key_encoding.value, json, on_replace=warn)
    venc = henc = encoder(value_encoding.value, json, on_replace=warn)
    decoding = None
    if decode or decode_keys:
        from .schema_io import Decoding

        decoding = Decoding(decode_keys, decode, json)
        kenc, venc = decoding.encoders(kenc, venc)
    with as_usage_error("--format"):
        emit = json_records(kenc, venc, henc) if json else record_formatter(
            fmt if fmt is not None else "%v\n", kenc, venc)
    if decoding is not None:
        emit = decoding.located(emit)
    if group is not None:
        if partition:
            raise typer.BadParameter("--partition cannot be used with --group (the group "
                                     "assigns partitions)")
        if start_text.lower() not in BEGINNING + END or until is not None:
            raise typer.BadParameter("with --group, --offset is beginning or end: where to "
                                     "start a partition the group has no offset for",
                                     param_hint="--offset")
        _consume_group(names, regex, group, member_id,
                       "earliest" if start_text.lower() in BEGINNING else "latest",
                       num, follow, emit, idle_ms, level, x.get("client.id"), quiet)
        return

    start, stop = parse_range(start_text, "--offset")
    if until is not None:
        if stop is not None:
            raise typer.BadParameter("give the end once: a range START:END or -o e@TS",
                                     param_hint="--offset")
        start, stop = parse_range(f"{start_text}:@{until}", "--offset")
    if stop is not None and follow:
        raise typer.BadParameter("a range START:END stops at END; --follow reads on: use one",
                                 param_hint="--offset")
    from engine.errors import RivvenError

    from . import interrupts
    from .record_writer import RecordWriter

    with open_engine(read_only=True) as eng:
        names = _names(eng, names, regex)
        for name in [] if quiet else names:
            check_past_end(eng, name, start, "--offset", "reading from the end offset",
                           partition, level, below_start="reading from the log start")
            check_past_end(eng, name, stop, "--offset END", "reading to the end", partition,
                           level)
        try:
            with interrupts.guarded() as guard:
                out = RecordWriter(guard)
                try:
                    for b in eng.stream(names, partition, start, num, follow,
                                        on_idle=out.flush, idle_timeout_ms=idle_ms, end=stop,
                                        isolation_level=level):
                        out.add(b, emit(b))
                except RivvenError as e:
                    _ahead(out, e)
                    out.flush()  # (what was read before a damaged batch, then its error)
                    raise
                out.flush()
        except interrupts.Stopped as e:
            _stopped(e)


def _offsets(values: list[str] | None, from_beginning: bool, reset: str | None,
             grouped: bool) -> tuple[str, str | None]:
    """-o as a start position's text and kcat's e@TS (None: no e@); --from-beginning and
    -X auto.offset.reset are a start too (without -o; with it, they must agree where they
    mean the same: a group's start)."""
    from .positions import BEGINNING, END

    ends = [v[2:] for v in values or [] if v[:2].lower() == "e@"]
    starts = [v for v in values or [] if v[:2].lower() != "e@"]
    if len(starts) > 1 or len(ends) > 1:
        raise typer.BadParameter("give one position (or a range START:END); -o twice only as "
                                 "kcat's -o s@TS -o e@TS", param_hint="--offset")
    start = starts[0] if starts else None
    if start is not None and start[:2].lower() == "s@":
        start = start[1:]  # (kcat's s@TS: @TS)
    if from_beginning:
        if start is not None and start.lower() not in BEGINNING:
            raise typer.BadParameter(f"--from-beginning and -o {start} say different things: "
                                     "give one", param_hint="--from-beginning")
        start = "beginning"
    if reset is not None and (start is None or grouped):
        start = same_or_refuse("--offset", start if start is None or start.lower() not in
                               BEGINNING + END else RESETS[start.lower()],
                               "-X auto.offset.reset=", reset)
    return start or "beginning", ends[0] if ends else None


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
                   reset: str, num: int | None, follow: bool, emit: Callable,
                   idle_ms: int | None = None, level: str = "read_uncommitted",
                   client_id: str | None = None, quiet: bool = False) -> None:
    """Read as a member of ``group``, committing after each chunk once it is written whole,
    and on a stop (a signal, a closed pipe) the records written whole before it."""
    from . import interrupts
    from .record_writer import RecordWriter

    def said(e: dict) -> None:
        if e["reason"] == "out-of-range" and not quiet:
            info(f"group {group}: {e['topic']}-{e['partition']} committed offset {e['prior']} "
                 f"is out of range; reset to {e['policy']} ({e['new']})")

    with open_engine() as eng, eng.consumer(group, _names(eng, topics, regex),
                                            auto_offset_reset=reset,
                                            enable_auto_commit=False, member_id=member_id,
                                            client_id=client_id or "rivven-consume",
                                            on_reset=said,
                                            isolation_level=level) as c:
        out: RecordWriter | None = None
        try:
            with interrupts.guarded() as guard:
                out = RecordWriter(guard)
                _read_chunks(c, out, num, follow, emit, idle_ms)
        except interrupts.Stopped as e:
            from engine.errors import plural

            # commit what was written whole: into a pipe, what it took (its reader may not
            # have read it all: -c N reads and commits exactly N)
            owned, reached = set(c.assignment()), out.reached if out else {}
            c.commit({tp: o for tp, o in reached.items() if tp in owned})
            pipe = e.signum == signal.SIGPIPE
            _stopped(e, None if quiet else
                     f"group {group} committed the {plural(out.count if out else 0, 'record')} "
                     "written to stdout" + (" (a pipe holds what its reader never took: -c N "
                                            "reads and commits exactly N)" if pipe else ""))


def _read_chunks(c: Any, out: Any, num: int | None, follow: bool, emit: Callable,
                 idle_ms: int | None) -> None:
    """Poll, write and commit chunk after chunk; signals are held while polling and
    committing, and looked at between records (``out.flush`` raises ``Stopped``)."""
    out.guard.busy = True
    left = num
    last_record = time.monotonic()
    while left is None or left > 0:
        batches = c.poll_batches(timeout_ms=int(POLL_S * 1000) if follow else 0,
                                 max_records=CHUNK if left is None else min(CHUNK, left))
        if not batches:
            c.commit()  # (a no-op unless the positions stepped over transaction markers)
            out.flush()  # (nothing to write: a signal stops it here)
            if follow and (idle_ms is None or (time.monotonic() - last_record) * 1000 < idle_ms):
                continue
            break
        last_record = time.monotonic()
        from engine.errors import RivvenError

        try:
            for b in batches:
                out.add(b, emit(b))
                if left is not None:
                    left -= len(b.keys)
        except RivvenError as e:  # (a record --decode cannot decode)
            _ahead(out, e)
            out.flush()
            owned = set(c.assignment())  # commit what was printed: a rerun starts at it
            c.commit({tp: o for tp, o in out.reached.items() if tp in owned})
            raise
        out.flush()
        c.commit()  # the whole chunk reached stdout
        out.reached.clear()  # (what a stop commits: of the chunk it cut short)


def _ahead(out: Any, e: Exception) -> None:
    """The records of a batch ahead of one --decode could not decode (schema_io.Undecodable),
    to be written before its error."""
    before = getattr(e, "before", None)
    if before is not None:
        out.add(before, e.pieces)  # type: ignore[attr-defined]


def _stopped(e: Any, said: str | None = None) -> NoReturn:
    """Exit as a stopped consume does: 128 + the signal (141 a closed pipe), saying ``said``."""
    from . import interrupts

    interrupts.quiet_closed_pipe(e)
    if said:
        info(f"stopped by {e}: {said}")
    raise typer.Exit(e.exit_code)
