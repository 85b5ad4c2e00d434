"""``rivven wal ...``: list, inspect, verify, recover, replay and checkpoint the WAL."""

from __future__ import annotations

import json as jsonlib
import os
import sys
import typing
from typing import Annotated

import typer

from .common import DryRunOpt, JsonOpt, YesOpt, confirm, fail, file_openers, open_engine
from .render import human_bytes, info, print_json, print_table

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(json: JsonOpt = False) -> None:
    """WAL streams: live or dead (left by a process that died), files, bytes, records."""
    with open_engine(read_only=True) as eng:
        rows = eng.recovery.streams()
    if json:
        print_json(rows)
        return
    print_table(["STREAM", "STATE", "FILES", "SIZE", "RECORDS", "PARTITIONS", "TORN-TAIL"],
                [(r["stream"], "live" if r["live"] else "dead (replay pending)", r["files"],
                  human_bytes(r["bytes"]), r["records"], ",".join(r["partitions"]),
                  "yes" if r["torn_tail"] else "no") for r in rows],
                right=("FILES", "SIZE", "RECORDS"), wrap=("STATE", "PARTITIONS"),
                drop=("TORN-TAIL", "FILES"))


def _files(file: str | None) -> list[str]:
    from engine.wal import all_streams, stream_files

    if file is not None:
        if not os.path.isfile(file):
            fail(f"{file} is not a WAL file")
        return [file]
    with open_engine(read_only=True) as eng:
        return [f for d in all_streams(eng.path) for f in stream_files(d)]


@app.command()
def inspect(
    file: Annotated[str | None, typer.Argument(help="A .wal file (default: every WAL file).")
                    ] = None,
    records: Annotated[bool, typer.Option("--records", help="Print the records too.")] = False,
    json: JsonOpt = False,
) -> None:
    """One row per WAL record: position, topic, partition, offsets, count, bytes, CRC ok."""
    from engine.wal import inspect_file

    rows = []
    openers = file_openers() if records else None
    for f in _files(file):
        # (a WAL file is DATA/wal/<stream>/<name>.wal: its records name topics of DATA)
        find = (openers.of_topic_id(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(f))))) if openers is not None else None)
        for row in inspect_file(f, records=records, opener_of=find):
            recs = row.pop("records", [])
            row = {"file": f, **row}
            if json:
                sys.stdout.write(jsonlib.dumps(row) + "\n")
                for r in recs:
                    sys.stdout.write(jsonlib.dumps(r) + "\n")
            else:
                rows.append(row)
                rows.extend({"record": r} for r in recs)
    if json:
        return
    for r in rows:
        if "record" in r:
            x = r["record"]
            typer.echo(f"| offset: {x['offset']} timestamp: {x['timestamp']} key: {x['key']} "
                       f"value: {x['value']}")
        elif "base_offset" in r:
            typer.echo(f"{os.path.basename(r['file'])} position: {r['position']} topic: "
                       f"{r['topic']} partition: {r['partition']} offsets: {r['base_offset']}.."
                       f"{r['last_offset']} count: {r['count']} bytes: {r['bytes']} "
                       f"crc: {r['crc_ok']}")
        else:
            typer.echo(f"{os.path.basename(r['file'])} position: {r['position']} error: "
                       f"{r['error']}")


@app.command()
def verify(json: JsonOpt = False) -> None:
    """Check every WAL record's framing, CRC and payload (exit 3 on damage; a dead stream's
    torn tail counts; at the end of a live stream's current file only what stays put while it
    is read again, not a write in flight)."""
    from engine.errors import plural
    from engine.wal import verify_stream

    with open_engine(read_only=True) as eng:
        streams = eng.recovery.streams()
    findings = [{**x, "stream": s["stream"]} for s in streams
                for x in verify_stream(s["path"], s["live"])]
    if json:
        print_json({"streams": len(streams), "records": sum(s["records"] for s in streams),
                    "ok": not findings, "findings": findings})
    else:
        for x in findings:
            typer.echo(f"{x['file']} at position {x['position']}: {x['message']}")
        info(f"verified {len(streams)} WAL stream(s), "
             f"{plural(sum(s['records'] for s in streams), 'record')}: "
             f"{'OK' if not findings else f'{len(findings)} problem(s) found'}")
    if findings:
        raise typer.Exit(3)


@app.command()
def recover(dry_run: DryRunOpt = False, yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Truncate dead WAL streams' files where their valid records end: a torn tail, or a
    damaged record and the records after it (asks first when intact records would go; no
    replay)."""
    with open_engine(recover=False) as eng:
        rows = eng.recovery.cut_tails(dry_run=True)
        if not dry_run:
            drop = sum(r["records_after"] for r in rows)
            if drop:
                if not yes:
                    _print_cuts(rows, True, sys.stderr)
                confirm(f"cut {len(rows)} WAL file(s), dropping {drop} intact record(s) after "
                        "damaged ones?", yes)
            rows = eng.recovery.cut_tails(dry_run=False)
    if json:
        print_json(rows)
        return
    _print_cuts(rows, dry_run, sys.stdout)
    info(f"{len(rows)} torn tail(s){' (dry run: nothing changed)' if dry_run else ''}")


def _print_cuts(rows: list[dict], dry_run: bool, out: typing.TextIO) -> None:
    from engine.errors import plural

    for r in rows:
        what = ("a damaged record" if r["damaged_record"] else
                "an incomplete record" if r["incomplete"] else "damaged bytes")
        after = (f", and {r['records_after']} intact record(s) after it" if r["records_after"]
                 else "")
        out.write(f"{r['file']}: {'would truncate' if dry_run else 'truncated'} at "
                  f"{r['truncate_at']} ({plural(r['bytes_removed'], 'byte')}: {what}{after}; "
                  f"{r['reason']})\n")


@app.command()
def replay(dry_run: DryRunOpt = False, json: JsonOpt = False) -> None:
    """Apply outstanding records of dead WAL streams to the segments (what a writable open
    does); --dry-run reports what it would do."""
    with open_engine(read_only=dry_run) as eng:
        rep = eng.recovery.replay(dry_run=True) if dry_run else eng.last_recovery
    if json:
        print_json(rep)
        return
    for p in rep["partitions"]:
        typer.echo(f"{p['topic']}-{p['partition']}: {'would apply' if dry_run else 'applied'} "
                   f"{p['applied']} batch(es), {p['skipped']} already in the log")
    info(f"{len(rep['streams'])} dead stream(s), {rep['applied']} batch(es) "
         f"{'to apply' if dry_run else 'applied'}, {rep['skipped']} already present")


@app.command()
def checkpoint(json: JsonOpt = False) -> None:
    """Replay dead streams, fsync every partition and record its recovery point."""
    with open_engine(recover=False) as eng:
        rep = eng.recovery.checkpoint_all()
    if json:
        print_json(rep)
        return
    info(f"checkpointed {len(rep['checkpoints'])} partition(s); replayed "
         f"{rep['replayed']['applied']} batch(es) from {len(rep['replayed']['streams'])} dead "
         "stream(s)")
