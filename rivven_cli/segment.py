"""``rivven segment ...``: list, inspect, verify, recover and reindex segment files."""

from __future__ import annotations

import os
import sys
import typing
from typing import Annotated

import typer

from .common import (
    DryRunOpt,
    Encoding,
    JsonOpt,
    PartitionOpt,
    YesOpt,
    confirm,
    fail,
    file_openers,
    open_engine,
    state,
)
from .render import human_bytes, info, json_line, print_json, print_table, printable, utc, warn

app = typer.Typer(no_args_is_help=True)
TargetsArg = Annotated[list[str] | None, typer.Argument(
    help="Topics, partition directories, .log files or a data dir (default: the whole data dir).")]


@app.command("list")
def list_(topic: Annotated[str, typer.Argument(help="Topic.")], partition: PartitionOpt = None,
          json: JsonOpt = False) -> None:
    """Segments of a topic: files, base/last offsets, records, bytes, time range."""
    with open_engine(read_only=True) as eng:
        rows = eng.segments.list_segments(topic, partition)
    if json:
        print_json(rows)
        return
    tiered = any(r["tier"] == "cold" for r in rows)
    print_table(["PARTITION", *(["TIER"] if tiered else []), "FILE", "BASE", "LAST", "RECORDS",
                 "SIZE", "FIRST-TIME", "LAST-TIME"],
                [(r["partition"], *([r["tier"]] if tiered else []), os.path.basename(r["file"]),
                  r["base_offset"], r["last_offset"],
                  "-" if r["records"] is None else r["records"], human_bytes(r["bytes"]),
                  utc(r["min_timestamp"]), utc(r["max_timestamp"])) for r in rows],
                right=("PARTITION", "BASE", "LAST", "RECORDS", "SIZE"),
                drop=("FIRST-TIME", "LAST-TIME", "FILE", "SIZE"))
    for r in rows:
        if r.get("damage"):
            warn(f"{r['file']} is damaged ({r['damage']}); the row counts the batches before "
                 "it: run 'rivven segment verify' for details")


@app.command()
def inspect(
    file: Annotated[str, typer.Argument(
        help="A .log segment file, or its .index or .timeindex.")],
    records: Annotated[bool, typer.Option("--records", help="Print the records too.")] = False,
    max_: Annotated[int | None, typer.Option(
        "--max", min=1, help="At most N records (of an index: N entries).")] = None,
    key_encoding: Annotated[Encoding, typer.Option(
        "--key-encoding", help="Keys with --records: utf8 (bytes that are not UTF-8 as "
        "\\xNN), base64 or hex.")] = Encoding.utf8,
    value_encoding: Annotated[Encoding, typer.Option(
        "--value-encoding", help="Values and header values with --records: utf8, base64 or "
        "hex.")] = Encoding.utf8,
    json: JsonOpt = False,
) -> None:
    """One row per batch: position, offsets, count, codec, sizes, timestamps, CRC. Of a .index
    or .timeindex: one row per entry, and whether it points at a batch with that offset."""
    from engine.tools.inspect import inspect_segment

    if file.endswith((".index", ".timeindex")):
        if records:
            raise typer.BadParameter("an index has no records: inspect its .log",
                                     param_hint="--records")
        _inspect_index(file, max_, json)
        return
    kenc, venc = _text(key_encoding), _text(value_encoding)
    left = max_
    rows = []
    opener = file_openers().of_partition_dir(os.path.dirname(file)) if records else None
    for batch in inspect_segment(file, records=records, opener=opener):
        recs = batch.pop("records", None)
        if json:
            sys.stdout.write(json_line(batch) + "\n")
        else:
            rows.append(batch)
        if recs is not None:
            for r in recs[: left if left is not None else None]:
                r = {**r, "key": kenc(r["key"]), "value": venc(r["value"]),
                     "headers": [[k, venc(v)] for k, v in r["headers"]]}
                if json:
                    sys.stdout.write(json_line(r) + "\n")
                else:
                    rows.append({"record": r})
            if left is not None:
                left -= min(left, len(recs))
                if left == 0:
                    break
    if json:
        return
    batch_cols = ["POSITION", "BASE", "LAST", "COUNT", "CODEC", "SIZE", "BODY", "FIRST-TIME",
                  "MAX-TIME", "CRC"]
    keys = ("position", "base_offset", "last_offset", "count", "codec", "bytes", "body_bytes",
            "first_timestamp", "max_timestamp", "crc_ok")
    if records:  # kafka-dump-log style: a batch line, then its records indented
        for r in rows:
            if "record" in r:
                rec = r["record"]
                hs = " headers=" + ",".join(f"{k}={'null' if v is None else v}"
                                            for k, v in rec["headers"]) if rec["headers"] else ""
                # a null key or value (a tombstone) as kafka-dump-log and consume --json show
                # it: null, as the null header values beside it (never Python's None)
                key, value = ("null" if v is None else v for v in (rec["key"], rec["value"]))
                typer.echo(printable(f"| offset: {rec['offset']} timestamp: {rec['timestamp']} "
                                     f"key: {key} value: {value}{hs}"))
            elif "error" in r:
                typer.echo(printable(f"position: {r['position']} error: {r['error']}"))
            else:
                typer.echo(" ".join(f"{c.lower()}: {r[k]}" for c, k in zip(batch_cols, keys)))
        return
    table = [[r["position"], "error: " + r["error"]] + [""] * 8 if "error" in r
             else [r[k] for k in keys] for r in rows]
    print_table(batch_cols, table, title=file,
                right=("POSITION", "BASE", "LAST", "COUNT", "SIZE", "BODY"),
                drop=("BODY", "FIRST-TIME", "MAX-TIME", "CODEC"))


def _text(enc: Encoding) -> typing.Callable[[bytes | None], str | None]:
    """Bytes of a record as text: utf8 with bytes that are not UTF-8 as ``\\xNN``, base64,
    hex; None stays None."""
    from engine.format.text import encoder

    if enc is Encoding.utf8:
        return lambda b: None if b is None else b.decode("utf-8", "backslashreplace")
    return encoder(enc.value, for_json=True)


def _inspect_index(file: str, most: int | None, json: bool) -> None:
    """kafka-dump-log of an index: one row per entry."""
    from itertools import islice

    from engine.tools.inspect import inspect_index

    found = islice(inspect_index(file), most)
    if json:
        for r in found:
            sys.stdout.write(json_line(r) + "\n")
        return
    rows = list(found)
    yes = {True: "yes", False: "NO", None: "-"}
    if file.endswith(".timeindex"):
        cols = ["ENTRY", "TIMESTAMP", "TIME", "RELATIVE", "OFFSET", "BATCH", "TIME-OK"]
        table = [[r["entry"], r["timestamp"], utc(r["timestamp"]), r["relative_offset"],
                  r["offset"], yes[r["points_at_batch"]], yes[r["timestamp_matches"]]]
                 if "error" not in r else [r["entry"], "error: " + r["error"]] + [""] * 5
                 for r in rows]
    else:
        cols = ["ENTRY", "RELATIVE", "OFFSET", "POSITION", "BATCH"]
        table = [[r["entry"], r["relative_offset"], r["offset"], r["position"],
                  yes[r["points_at_batch"]]]
                 if "error" not in r else [r["entry"], "error: " + r["error"]] + [""] * 3
                 for r in rows]
    print_table(cols, table, title=file, right=("ENTRY", "TIMESTAMP", "RELATIVE", "OFFSET",
                                                "POSITION"))
    bad = sum(1 for r in rows if r.get("points_at_batch") is False
              or r.get("timestamp_matches") is False)
    if bad:
        warn(f"{bad} entr{'y does' if bad == 1 else 'ies do'} not match the batches of the "
             "segment's .log: readers check entries and fall back to a scan; 'rivven segment "
             "reindex' rebuilds the index")
    elif rows and rows[0].get("points_at_batch") is None:
        warn(f"{file}: its .log cannot be read, so entries were not checked against it")


@app.command()
def verify(
    targets: TargetsArg = None,
    cold: Annotated[bool, typer.Option(
        "--cold", help="Also read back every cold copy (tiered storage) and check its size and "
        "CRC32C against the tier manifest.")] = False,
    decrypt: Annotated[bool, typer.Option(
        "--decrypt", help="Also open every encrypted batch and check its authentication tag "
        "(needs the keyring; without it, encrypted batches are checked as far as their CRC "
        "and layout go).")] = False,
    json: JsonOpt = False,
) -> None:
    """Check every batch (header, CRC, body), offsets and gaps, indexes, torn tails and
    .checkpoint (exit 3 on damage). Needs no key unless --decrypt."""
    from engine.errors import plural
    from engine.tools.verify import verify as run

    from .progress import progress_bar

    openers = file_openers().of_partition_dir if decrypt else None
    with progress_bar() as progress:
        doc = run(state().data_dir, targets or [], cold, progress, openers)
    colds = doc.get("cold")
    if json:
        print_json(doc)
    else:
        for f in doc["findings"]:
            where = "" if f["path"] in f["message"] else f"{f['path']} at position {f['position']}: "
            typer.echo(f"{f['kind']}: {where}{f['message']}{_past(f)}")
        for g in doc.get("known_gaps", []):
            typer.echo(f"known gap: {g['path']}: offsets {g['first']}..{g['last']} were cut out "
                       f"by a repair at {utc(g['time_ms'])} ({g['reason']}); readers skip them")
        bad = len(doc["findings"])
        info(f"verified {doc['segments']} segment(s), {plural(doc['batches'], 'batch', 'batches')}, "
             f"{plural(doc['records'], 'record')}, {human_bytes(doc['bytes'])}: "
             f"{f'{bad} problem(s) found' if bad else 'OK'}")
        if any(f["kind"] in ("crc", "header", "body", "offsets", "range") for f in doc["findings"]):
            info("'rivven segment recover --truncate-corrupt --dry-run' shows what the repair "
                 "would cut: each damaged batch an intact one follows alone (its offsets then a "
                 "recorded gap), damage nothing intact follows to the end of its segment")
        if colds is not None:
            for f in colds["findings"]:
                typer.echo(f"cold: {f['problem']}")
            bad = len(colds["findings"])
            info(f"verified {colds['segments']} cold segment(s), {plural(colds['objects'], 'object')}, "
                 f"{human_bytes(colds['bytes'])}: {f'{bad} problem(s) found' if bad else 'OK'}")
    if not doc["ok"]:
        raise typer.Exit(3)


@app.command()
def recover(
    targets: TargetsArg = None,
    dry_run: DryRunOpt = False,
    truncate_corrupt: Annotated[bool, typer.Option(
        "--truncate-corrupt", help="Also remove corrupt batches (drops their records): each one "
        "an intact batch follows is cut out alone, its offsets then a recorded gap that "
        "verify and readers step over; damage nothing intact follows is truncated.")
    ] = False,
    yes: YesOpt = False,
    json: JsonOpt = False,
) -> None:
    """Truncate torn tails and rebuild indexes (under each partition's lock), then replay the
    WAL of crashed writers into the mended segments. Says what each cut drops (batches,
    records, offsets) and which holes are left, and asks first when a cut loses more than
    crash recovery would (--yes: do not ask; --dry-run: only report)."""
    with open_engine(recover=False) as eng:
        results = eng.segments.recover(targets or [], truncate_corrupt=truncate_corrupt,
                                      dry_run=True)
        if not dry_run:
            risky = [r for r in results if r["needs_confirmation"]
                     and (r["truncate_at"] is not None or r["cut_out"])]
            if risky:
                if not yes:
                    _print_recovery(risky, "would", sys.stderr)
                batches = sum(r["batches_removed"] + len(r["cut_out"]) for r in risky)
                records = sum(r["records_removed"] + sum(c["records"] for c in r["cut_out"])
                              for r in risky)
                confirm(f"cut {len(risky)} segment(s), dropping {batches} batch(es), "
                        f"{records} record(s){_holes_text(risky)}?", yes)
            approved = {r["path"]: r for r in results}
            results = eng.segments.recover(targets or [], truncate_corrupt=truncate_corrupt,
                                          dry_run=False, approved=approved)
            if not any(r["unrepaired"] for r in results):
                eng.recovery.replay()
    if json:
        print_json(results)
    else:
        _print_recovery(results, "would" if dry_run else "did", sys.stdout)
        info(f"{len(results)} segment(s) checked{' (dry run: nothing changed)' if dry_run else ''}")
    if any(r["unrepaired"] for r in results):
        raise typer.Exit(3)


def _past(f: dict) -> str:
    """What a damaged batch an intact one follows means for readers (verify's text)."""
    if f.get("resume_at") is None:
        return ""
    offs = f["offsets"]
    held = f"offsets {offs[0]}..{offs[1]}" if offs else "its offsets"
    return (f" ({held} cannot be read; the intact batch at position {f['resume_at']} and "
            "everything after it can)")


def _holes_text(rows: list[dict]) -> str:
    n = sum(h["offsets"] for r in rows for h in r["holes"])
    n += sum(c["offsets"] for r in rows for c in r["cut_out"])
    return f", leaving {n} offset(s) in holes" if n else ""


def _print_recovery(rows: list[dict], verb: str, out: typing.TextIO) -> None:
    from engine.errors import plural

    for r in rows:
        if r["truncate_at"] is not None:
            parts = ([f"{r['batches_removed']} whole batch(es)"] if r["batches_removed"] else []
                     ) + (["an incomplete batch"] if r["incomplete_batch"] else [])
            what = (" and ".join(parts) or "no readable batch") + (
                f", offsets {r['offset_range'][0]}..{r['offset_range'][1]}"
                if r["offset_range"] else "")
            out.write(f"{r['path']}: {verb} truncate at {r['truncate_at']} "
                      f"({plural(r['bytes_removed'], 'byte')}: {what}; "
                      f"{plural(r['records_removed'], 'record')} dropped)\n")
        for c in r["cut_out"]:
            offs = (f"offsets {c['first']}..{c['last']}" if c["first"] is not None
                    else "offsets unknown")
            out.write(f"{r['path']}: {verb} cut out the damaged batch at {c['position']} "
                      f"({plural(c['bytes'], 'byte')}: {offs}; "
                      f"{plural(c['records'], 'record') if c['records'] else 'its records'} "
                      "dropped); the intact batches around it stay\n")
        for h in r["holes"]:
            out.write(f"{r['path']}: hole: offsets {h['first']}..{h['last']} ({h['offsets']}) "
                      "are in no segment; readers skip them\n")
        for g in r["recorded_gaps"]:
            out.write(f"{r['path']}: offsets {g['first']}..{g['last']} "
                      f"{'will be' if verb == 'would' else 'are'} a recorded gap (.gaps): "
                      "verify reports them as known, readers skip them\n")
        for u in r["unrepaired"]:
            out.write(f"{r['path']}: corrupt, left alone (--truncate-corrupt cuts out the "
                      f"damaged batch): {u['message']}\n")


@app.command()
def reindex(path: Annotated[str, typer.Argument(help="A .log segment file.")],
            json: JsonOpt = False) -> None:
    """Rebuild a segment's .index and .timeindex from its log."""
    if not path.endswith(".log") or not os.path.isfile(path):
        fail(f"{path} is not a .log segment file")
    with open_engine(recover=False) as eng:
        r = eng.segments.reindex(path)
    if json:
        print_json(r)
        return
    info(f"rebuilt indexes of {path}: {r['index_entries']} offset and {r['timeindex_entries']} "
         "time entries")
