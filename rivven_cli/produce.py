"""``rivven produce``: records from stdin or a file, streamed in batches as lines arrive."""

from __future__ import annotations

import json as jsonlib
import os
import sys
import time
from enum import Enum
from typing import Annotated, Any

import typer

from .common import Encoding, as_usage_error, fail, open_engine
from .habits import same_or_refuse, x_choice, x_settings
from .render import human_bytes, info

READ_SIZE = 1 << 20
RETRIES = 3  # --idempotent: the producer's retries (a call that failed with a storage error)
# kcat's -X keys (librdkafka's settings) that mean something here
X_TAKES = {"compression.type": "--compression", "compression.codec": "--compression",
           "enable.idempotence": "--idempotent", "transactional.id": "--transactional-id",
           "transaction.timeout.ms": "--transaction-timeout-ms",
           "acks": "all, -1 or 1: a produce is acknowledged once durable", "client.id": "ignored"}


class InputFormat(str, Enum):
    lines = "lines"
    json = "json"
    parquet = "parquet"
    arrow = "arrow"


TABLES = (InputFormat.parquet, InputFormat.arrow)


def _headers(pairs: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k:
            raise typer.BadParameter(f"header {p!r} is not in key=value form", param_hint="-H")
        out.append((k, v.encode()))
    return out


def _refuse(option: str, why: str) -> None:
    raise typer.BadParameter(why, param_hint=option)


def _input(input_format: InputFormat, fmt: str | None, key: str | None, sep: str | None,
           keep_partition: bool, partition: int | None, kenc: Encoding, venc: Encoding) -> Any:
    """The parser the options describe; options that cannot apply to it are usage errors."""
    from engine.format.jsonlines import JsonInput
    from engine.format.text import LinesInput, decoder
    from engine.format.textformat import FormatInput

    kdec, vdec = decoder(kenc.value), decoder(venc.value)
    if input_format is InputFormat.json:
        if key is not None:
            _refuse("--key", "--input json takes each record's key from its \"key\" field")
        if sep is not None:
            _refuse("--key-separator", "--input json reads JSON objects, not KEY<SEP>VALUE lines")
        if fmt is not None:
            _refuse("--format", "--input json reads JSON objects; --format parses text lines")
    elif keep_partition:
        _refuse("--keep-partition", "it applies to --input json (a consumed record's "
                "\"partition\"); -F '%p ...' always uses the partition it reads")
    if keep_partition and partition is not None:
        _refuse("--keep-partition", "use either --partition or --keep-partition")
    if key is not None and sep is not None:
        raise typer.BadParameter("use either --key or --key-separator, not both")
    if sep == "":
        raise typer.BadParameter("--key-separator must not be empty")
    kbytes = None
    if key is not None:
        kbytes = key.encode("utf-8", "surrogateescape")
        if kdec is not None:
            try:
                kbytes = kdec(kbytes)
            except ValueError as e:
                _refuse("--key", f"{key!r} is not {kenc.value}: {e}")
    if input_format is InputFormat.json:
        return JsonInput(keep_partition, kdec, vdec)
    if fmt is not None:
        if sep is not None:
            _refuse("--key-separator", "--format says where the key is (e.g. -F '%k:%v\\n')")
        with as_usage_error("--format"):
            parser: Any = FormatInput(fmt, None, kdec, vdec)  # (the format's own errors first)
        if kbytes is not None:
            if "key" in parser.fields:
                _refuse("--key", "--key cannot be used with a --format that has %k")
            parser = FormatInput(fmt, kbytes, kdec, vdec)
        keyed = key is not None or "key" in parser.fields
    else:
        parser = LinesInput(kbytes, None if sep is None
                            else sep.encode("utf-8", "surrogateescape"), kdec, vdec)
        keyed = key is not None or sep is not None
    if kdec is not None and not keyed:
        _refuse("--key-encoding", "the input has no keys to decode (it applies to -k, -K, %k "
                "in --format and --input json)")
    return parser


def _table_options(kind: InputFormat, key: Any, sep: Any, header: Any, tomb: bool, fmt: Any,
                   keep: bool, offsets: bool, idempotent: bool, txn: Any) -> None:
    """Options of line input that a Parquet or Arrow file cannot take: usage errors."""
    why = f"--input {kind.value} takes its records from the file's columns"
    for given, option in ((key, "--key"), (sep, "--key-separator"), (header, "--header"),
                          (tomb, "--tombstone-empty"), (fmt, "--format"),
                          (keep, "--keep-partition"), (offsets, "--print-offsets"),
                          (idempotent, "--idempotent"), (txn, "--transactional-id")):
        if given:
            _refuse(option, f"{why} (key, value, timestamp, headers, partition)"
                    if option not in ("--idempotent", "--transactional-id", "--print-offsets")
                    else f"it does not apply to --input {kind.value}")


# the options of produce --help by subject (the common ones first, under "Options")
INPUT = "Input formats"
BATCHES = "Batches and compression"
TXN = "Idempotence and transactions"


def produce(
    topic: Annotated[str | None, typer.Argument(
        metavar="[TOPIC]", help="Topic to write to (or --topic).", show_default=False)] = None,
    source: Annotated[str | None, typer.Argument(
        metavar="[FILE]", help="Read records from this file (as --file).")] = None,
    topic_opt: Annotated[str | None, typer.Option(
        "--topic", "-t", help="The topic, as the argument (Kafka's and kcat's spelling; FILE "
        "is then the only argument).", show_default=False)] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Key for every record.")] = None,
    key_separator: Annotated[str | None, typer.Option(
        "--key-separator", "-K", help="Split each line into KEY<SEP>VALUE at the first SEP.")
    ] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", "-H", help="Header key=value on every record (repeatable).")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", "-p", min=0, help="Write every record to this partition.")] = None,
    compression: Annotated[str | None, typer.Option(
        "--compression", "-z", rich_help_panel=BATCHES,
        help="none, gzip, snappy, lz4 or zstd (default: topic config).")
    ] = None,
    tombstone_empty: Annotated[bool, typer.Option(
        "--tombstone-empty", rich_help_panel=INPUT,
        help="An empty value becomes a null value (a tombstone).")] = False,
    input_format: Annotated[InputFormat, typer.Option(
        "--input", rich_help_panel=INPUT,
        help="lines, json, parquet or arrow. lines: one value per line; json: one "
        "object per line with key, value, headers, partition, timestamp (what consume --json "
        "prints; topic and offset are ignored, blank lines skipped); parquet or arrow (an IPC "
        "file, or a stream on stdin): the columns value and optionally key, timestamp, "
        "headers, partition, produced batch by batch (Engine.produce_arrow).")
    ] = InputFormat.lines,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-F", rich_help_panel=INPUT,
        help="Parse each record with %-tokens, as rpk's produce -f: %k %v "
        "%T %p (%t %o read and ignored), e.g. '%k %v\\n'; the last literal ends a record "
        "('%v\\0': NUL-separated).")] = None,
    keep_partition: Annotated[bool, typer.Option(
        "--keep-partition", rich_help_panel=INPUT,
        help="With --input json: write each consumed record (a line with "
        "an offset) to its \"partition\" too (by default the partitioner places it).")
    ] = False,
    key_encoding: Annotated[Encoding, typer.Option(
        "--key-encoding", rich_help_panel=INPUT,
        help="How keys are written in the input: utf8 (as they are), "
        "base64 or hex.")] = Encoding.utf8,
    value_encoding: Annotated[Encoding, typer.Option(
        "--value-encoding", rich_help_panel=INPUT,
        help="How values (and JSON header values) are written in the "
        "input: utf8, base64 or hex.")] = Encoding.utf8,
    print_offsets: Annotated[bool, typer.Option(
        "--print-offsets", help="Print 'PARTITION OFFSET' per record once it is durable "
        "(with --transactional-id: once its transaction commits).")
    ] = False,
    file: Annotated[str | None, typer.Option(
        "--file", "-f", help="Read records from this file instead of stdin.")] = None,
    batch_records: Annotated[int, typer.Option(
        "--batch-records", min=1, rich_help_panel=BATCHES,
        help="Most records per produce call.")] = 10_000,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    json: Annotated[bool, typer.Option(
        "--json", help="--print-offsets as JSON lines, and the summary as JSON on stderr.")
    ] = False,
    idempotent: Annotated[bool, typer.Option(
        "--idempotent", rich_help_panel=TXN,
        help="Write as an idempotent producer (a producer id of its own, "
        "sequences per partition): a call that fails with a storage error is sent again, "
        f"up to {RETRIES} times, and stored once.")] = False,
    transactional_id: Annotated[str | None, typer.Option(
        "--transactional-id", rich_help_panel=TXN,
        help="Write in transactions of this transactional id (any "
        "older producer of it is fenced): one per input chunk, or per --txn-size records; "
        "read_committed readers see a transaction's records once it commits. Ctrl-C aborts "
        "the open one.")] = None,
    txn_size: Annotated[int | None, typer.Option(
        "--txn-size", min=1, rich_help_panel=TXN,
        help="With --transactional-id: N records per transaction (the "
        "last may hold fewer), whatever the input chunks.")] = None,
    transaction_timeout_ms: Annotated[int | None, typer.Option(
        "--transaction-timeout-ms", min=1, max=(1 << 31) - 1, rich_help_panel=TXN,
        help="With "
        "--transactional-id: transaction.timeout.ms, how long a transaction may stay open "
        "(default 60000); one open longer is aborted.")] = None,
    value_schema: Annotated[str | None, typer.Option(
        "--value-schema", metavar="SCHEMA", rich_help_panel=INPUT,
        help="Each value is JSON, written in Confluent's wire format under this schema: a "
        "SUBJECT (its latest version) or id:N; Avro, Protobuf or JSON Schema. A value that "
        "does not fit stops at its line, naming the field.", show_default=False)] = None,
    key_schema: Annotated[str | None, typer.Option(
        "--key-schema", metavar="SCHEMA", rich_help_panel=INPUT,
        help="The same for keys (each key is JSON).", show_default=False)] = None,
    settings: Annotated[list[str] | None, typer.Option(
        "-X", metavar="KEY=VALUE", help="kcat's settings that mean something here: "
        "compression.type (or .codec), enable.idempotence, transactional.id, "
        "transaction.timeout.ms, acks (all, -1 or 1), client.id.", show_default=False)
    ] = None,
) -> None:
    """Produce records: one per line from stdin (or --file), written as lines arrive.

    Ctrl-C, SIGTERM or a closed output pipe stop it after the batch being stored: it says how
    many records were stored and exits 130, 143 or 141 (128 + the signal, as shells do). With
    --transactional-id the open transaction is aborted and it says what was committed.
    """
    from engine.errors import plural

    from . import interrupts
    from .sender import Sender

    topic, source = _topic_and_file(topic, source, topic_opt)
    x = x_settings(settings, X_TAKES, "produce")
    compression = same_or_refuse("--compression", compression, "-X compression.type=",
                                 x.get("compression.type", x.get("compression.codec")))
    idempotent = x_choice(x, "enable.idempotence", {"true": True, "false": False}) or idempotent
    transactional_id = same_or_refuse("--transactional-id", transactional_id,
                                      "-X transactional.id=", x.get("transactional.id"))
    if "transaction.timeout.ms" in x:
        transaction_timeout_ms = same_or_refuse(
            "--transaction-timeout-ms", transaction_timeout_ms, "-X transaction.timeout.ms=",
            _int(x["transaction.timeout.ms"], "transaction.timeout.ms"))
    x_choice(x, "acks", {"all": "all", "-1": "all", "1": "all"})  # (one copy, made durable)
    if source is not None:
        if file is not None:
            _refuse("--file", "give the input once: as FILE or with --file")
        file = source
    schemas_given = [(o, v) for o, v in (("--value-schema", value_schema),
                                         ("--key-schema", key_schema)) if v is not None]
    for option, ref in schemas_given:
        _schema_ref(option, ref)
    if input_format in TABLES and schemas_given:
        _refuse("--value-schema" if value_schema else "--key-schema",
                f"--input {input_format.value} takes its records from the file's columns; "
                "schemas apply to JSON lines (rivven spark encodes a column)")
    if input_format in TABLES:
        _table_options(input_format, key, key_separator, header, tombstone_empty, fmt,
                       keep_partition, print_offsets, idempotent, transactional_id)
        from .produce_table import produce_file

        produce_file(topic, input_format.value, file, partition, compression, quiet, json)
        return
    parser = _input(input_format, fmt, key, key_separator, keep_partition, partition,
                    key_encoding, value_encoding)
    schemas = None
    if schemas_given:
        for enc, opt in ((value_encoding, "--value-encoding"), (key_encoding, "--key-encoding")):
            if enc is not Encoding.utf8:
                _refuse(opt, "with --value-schema/--key-schema the input is JSON text")
        if key_schema is not None and input_format is not InputFormat.json \
                and key is None and key_separator is None \
                and "key" not in getattr(parser, "fields", ()):
            _refuse("--key-schema", "the input has no keys to encode (give them with -K SEP, "
                    "-k KEY, %k in --format or --input json)")
        from .schema_io import SchemaInput

        schemas = SchemaInput(key_schema, value_schema)
        parser = schemas.wrap(parser, tombstone_empty)
    if compression is not None:
        from engine.format.codecs import codec_id

        codec_id(compression)
    if transactional_id is None:
        if txn_size is not None:
            _refuse("--txn-size", "it applies to --transactional-id (records per transaction)")
        if transaction_timeout_ms is not None:
            _refuse("--transaction-timeout-ms", "it applies to --transactional-id")
    args = (topic, parser, _headers(header or []), partition, compression, tombstone_empty,
            print_offsets, json)
    if transactional_id is not None:
        from .txn_produce import TransactionalSender

        sender: Sender = TransactionalSender(*args, transactional_id=transactional_id,
                                              txn_size=txn_size,
                                              timeout_ms=transaction_timeout_ms)
    elif idempotent:
        from .txn_produce import IdempotentSender

        sender = IdempotentSender(*args, retries=RETRIES)
    else:
        sender = Sender(*args)
    if file is not None:
        try:
            fd = os.open(file, os.O_RDONLY)
        except OSError as e:
            fail(f"cannot read --file {file}: {e.strerror}")
    else:
        fd = sys.stdin.fileno()
    started = time.perf_counter()
    with open_engine() as eng:
        eng.topic(topic, create_hint=True)
        if schemas is not None:
            schemas.bind(eng)
        sender.start(eng)
        try:
            with interrupts.guarded() as guard:
                for lines in _chunks(fd, parser.terminator, batch_records):
                    sender.send(eng, lines, guard)
                sender.finish(guard)
        except interrupts.Stopped as e:
            sender.stopped = e
            sender.stop()
    el = time.perf_counter() - started
    count, nbytes = sender.count, sender.nbytes
    if sender.stopped is not None:
        _report_stop(sender, topic, el, json)
    if json and not quiet:
        info(jsonlib.dumps({"topic": topic, "records": count, "bytes": nbytes,
                            "seconds": round(el, 3), **sender.summary()}))
    elif not quiet:
        info(f"produced {plural(count, 'record')} ({human_bytes(nbytes)}) to {topic} in {el:.2f} s "
             f"({count / el if el else 0:,.0f} records/s){sender.summary_text()}")


def _schema_ref(option: str, ref: str) -> None:
    """``--value-schema``/``--key-schema``: a SUBJECT or id:N (a usage error otherwise,
    before anything is opened; whether it exists is known once the data dir is)."""
    from engine.errors import InvalidArgument
    from engine.schemas.serde import schema_ref

    try:
        schema_ref(ref)
    except InvalidArgument as e:
        _refuse(option, str(e))


def _topic_and_file(topic: str | None, source: str | None, topic_opt: str | None
                    ) -> tuple[str, str | None]:
    """The topic (the argument, or --topic: then the one argument is FILE) and FILE."""
    if topic_opt is not None:
        if source is not None or (topic is not None and topic == topic_opt):
            _refuse("--topic", "give the topic once: as TOPIC or with --topic")
        topic, source = topic_opt, topic
    if topic is None:
        raise typer.BadParameter("give the topic to write to: rivven produce TOPIC (or "
                                 "--topic TOPIC)", param_hint="TOPIC")
    return topic, source


def _int(text: str, key: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n < 1 << 31:
        raise typer.BadParameter(f"{key}={text}: a whole number of ms from 1", param_hint="-X")
    return n


def _chunks(fd: int, terminator: bytes, most: int) -> Any:
    """The input's records (split at ``terminator``) as lists of at most ``most``, as they
    arrive; a last record without a terminator too."""
    pending = b""
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except OSError as e:
            fail(f"cannot read input: {e.strerror}")
        if not data:
            break
        pending += data
        lines = pending.split(terminator)
        pending = lines.pop()
        for i in range(0, len(lines), most):
            yield lines[i: i + most]
    if pending:
        yield [pending]


def _report_stop(sender: Any, topic: str, el: float, json: bool) -> None:
    """How many records were stored before a signal or a broken pipe stopped the command
    (always, even with -q: the command did not finish), then its exit status."""
    from . import interrupts

    e, count, nbytes = sender.stopped, sender.count, sender.nbytes
    kept, more = sender.stop_report()
    interrupts.quiet_closed_pipe(e)
    if json:
        info(jsonlib.dumps({"topic": topic, "records": count, "bytes": nbytes,
                            "seconds": round(el, 3), "stopped": e.name,
                            "in_flight": e.in_flight, **more}))
        raise typer.Exit(e.exit_code)
    fail(f"stopped by {e}: {kept}; the input after them was not produced", e.exit_code)
