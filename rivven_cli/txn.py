"""``rivven txn ...``: transactions, as Kafka's ``kafka-transactions.sh`` (KIP-664): list,
describe, producers, find-hanging, abort."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import JsonOpt, PartitionsOpt, YesOpt, confirm, open_engine
from .render import done, human_ms, info, print_json, print_table, printable, utc, warn

app = typer.Typer(no_args_is_help=True)
TidArg = Annotated[str, typer.Argument(help="Transactional id.", show_default=False)]


@app.command("list")
def list_(
    all_: Annotated[bool, typer.Option(
        "--all", help="Every transactional id, not only those with an open or prepared "
        "transaction.")] = False,
    json: JsonOpt = False,
) -> None:
    """Transactional ids with an open transaction (--all: every id), their state and age.

    Producer id, epoch, state, partitions, age, timeout and start of each; read-only (a
    writable open finishes prepared and timed-out transactions)."""
    with open_engine(read_only=True) as eng:
        rows = eng.txn.list_transactions(all=all_)
    if json:
        print_json(rows)
    elif not rows:
        info("no open transactions" + ("" if all_ else " (--all lists every transactional id)"))
    else:
        cols = ["TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "PARTITIONS", "AGE",
                "TIMEOUT", "STARTED"]
        print_table(cols, [(r["transactional_id"], r.get("producer_id"), r.get("epoch"),
                            _state(r), len(r["partitions"]) if "partitions" in r else None,
                            human_ms(r.get("age_ms")), human_ms(r.get("timeout_ms")),
                            utc(r.get("started_ms") or None)) for r in rows],
                    right=("PRODUCER-ID", "EPOCH", "PARTITIONS", "AGE", "TIMEOUT"),
                    drop=("STARTED", "TIMEOUT"))
        _timed_out(rows)
    _damaged(rows)


def _state(r: dict[str, Any]) -> str:
    """A held transaction (prepared for a two-phase commit) shows as such."""
    return r["state"] + " (prepared)" if r.get("prepared") else r["state"]


def _timed_out(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if r.get("prepared"):
            info(printable(f"note: the transaction of {r['transactional_id']} is prepared (a "
                           "two-phase commit): it never times out; its coordinator completes "
                           f"it, or: rivven txn abort {r['transactional_id']}"))
        elif r["state"] == "Ongoing" and (r.get("age_ms") or 0) > r["timeout_ms"]:
            info(printable(f"note: the transaction of {r['transactional_id']} is open past its "
                           f"timeout ({human_ms(r['timeout_ms'])}): the next writable open "
                           f"aborts it, or now: rivven txn abort {r['transactional_id']}"))


def _damaged(rows: list[dict[str, Any]]) -> None:
    """Warn of damaged state files (rows of state Damaged), then exit 3."""
    bad = [r for r in rows if r["state"] == "Damaged"]
    for r in bad:
        warn(f"transactional id {r['transactional_id']}: {r['error']}")
    if bad:
        raise typer.Exit(3)


@app.command()
def describe(transactional_id: TidArg, json: JsonOpt = False) -> None:
    """One transactional id: its state, its transaction's partitions and group offsets.

    Producer id, epoch, state, timeout, when its transaction began and its age, then its
    partitions and the group offsets it commits (with the member fencing them)."""
    from engine.txn.txn_store import OPEN

    with open_engine(read_only=True) as eng:
        d = eng.txn.describe(transactional_id)
    if json:
        print_json(d)
        return
    typer.echo(printable(f"transactional id: {d['transactional_id']}  producer id: "
                         f"{d['producer_id']}  epoch: {d['epoch']}  state: {_state(d)}"))
    typer.echo(f"timeout: {human_ms(d['timeout_ms'])}  started: {utc(d['started_ms'] or None) or '-'}"
               f"  age: {human_ms(d['age_ms']) or '-'}  updated: {utc(d['updated_ms']) or '-'}")
    if d["partitions"]:
        print_table(["TOPIC", "PARTITION"], d["partitions"], right=("PARTITION",))
    if d["offsets"]:
        print_table(["GROUP", "TOPIC", "PARTITION", "OFFSET", "MEMBER"],
                    [(g, t, p, o, d["fences"].get(g)) for g, offs in d["offsets"].items()
                     for t, p, o in offs],
                    right=("PARTITION", "OFFSET"), wrap=("MEMBER",), drop=("MEMBER",))
    if d["state"] not in OPEN:
        info("no open transaction")
    else:
        _timed_out([d])


@app.command()
def producers(
    topic: Annotated[str, typer.Argument(help="Topic.", show_default=False)],
    partition: PartitionsOpt = None,
    json: JsonOpt = False,
) -> None:
    """The producers each partition of a topic knows (Kafka's describe-producers).

    Producer id, epoch, last sequence, last offset, last record time, last seen, and the
    first offset of its open transaction."""
    with open_engine(read_only=True) as eng:
        rows = eng.txn.producers(topic, partition or None)
    if json:
        print_json(rows)
        return
    cols = ["PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-OFFSET",
            "LAST-TIMESTAMP", "LAST-SEEN", "TXN-START-OFFSET"]
    print_table(cols, [(r["partition"], r["producer_id"], r["epoch"], r["last_sequence"],
                        r["last_offset"], utc(r["last_timestamp"]), utc(r["last_seen_ms"]),
                        r["txn_start_offset"]) for r in rows],
                right=("PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-OFFSET",
                       "TXN-START-OFFSET"), drop=("LAST-SEEN", "LAST-TIMESTAMP"))


@app.command("find-hanging")
def find_hanging(
    topic: Annotated[str | None, typer.Option(
        "--topic", help="Only this topic (default: every topic).")] = None,
    partition: PartitionsOpt = None,
    json: JsonOpt = False,
) -> None:
    """Open transactions nothing will end, or open past their timeout (KIP-664).

    A transaction open in a partition hangs when no transactional id's state has it open
    there (unknown-producer, not-in-transaction) or when it is open longer than its id's
    timeout (timed-out): read_committed readers stop at its first offset meanwhile."""
    if partition and topic is None:
        raise typer.BadParameter("it needs --topic (the partitions of which topic?)",
                                 param_hint="--partition")
    with open_engine(read_only=True) as eng:
        rows = eng.txn.find_hanging(topic, partition or None)
    if json:
        print_json(rows)
        return
    if not rows:
        info("no hanging transactions")
        return
    cols = ["TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET", "TRANSACTIONAL-ID",
            "STATE", "AGE", "REASON"]
    print_table(cols, [(r["topic"], r["partition"], r["producer_id"], r["epoch"],
                        r["start_offset"], r["transactional_id"], r["state"],
                        human_ms(r["age_ms"]), r["reason"]) for r in rows],
                right=("PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET", "AGE"),
                drop=("STATE", "EPOCH", "AGE"))
    timed = sorted({r["transactional_id"] for r in rows if r["reason"] == "timed-out"})
    if timed:
        info(printable(f"timed out: the next writable open aborts them, or now: rivven txn "
                       f"abort {' / '.join(timed)}"))
    if len(timed) < len(rows):
        info("no transactional id will end the others: read_committed readers stop at their "
             "START-OFFSET until 'rivven txn abort --topic T --partition P --start-offset O' "
             "aborts them")


@app.command()
def abort(
    transactional_id: Annotated[str | None, typer.Argument(
        help="Transactional id (or --topic, --partition and --start-offset).",
        show_default=False)] = None,
    topic: Annotated[str | None, typer.Option(
        "--topic", help="With --partition and --start-offset: a hanging transaction no "
        "transactional id will end.")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", "-p", min=0, help="Its partition.")] = None,
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", min=0, help="Its first offset (START-OFFSET of find-hanging).")
    ] = None,
    yes: YesOpt = False,
    json: JsonOpt = False,
) -> None:
    """Abort a transactional id's open transaction, or a hanging one by its partition.

    ID: its open transaction is aborted now, timed out or not, and its producer fenced (a
    decided commit is completed instead). --topic, --partition and --start-offset: a hanging
    transaction no transactional id will end gets an ABORT marker in that partition."""
    where = {"--topic": topic, "--partition": partition, "--start-offset": start_offset}
    if transactional_id is not None:
        given = [k for k, v in where.items() if v is not None]
        if given:
            raise typer.BadParameter("give a transactional id, or --topic, --partition and "
                                     "--start-offset (a hanging transaction), not both",
                                     param_hint=given[0])
        _abort_id(transactional_id, yes, json)
        return
    missing = [k for k, v in where.items() if v is None]
    if len(missing) == 3:
        raise typer.BadParameter("give a transactional id (rivven txn list), or --topic, "
                                 "--partition and --start-offset of a hanging transaction "
                                 "(rivven txn find-hanging)", param_hint="TRANSACTIONAL_ID")
    if missing:
        raise typer.BadParameter("a hanging transaction is named by --topic, --partition and "
                                 "--start-offset together", param_hint=missing[0])
    assert topic is not None and partition is not None and start_offset is not None
    with open_engine() as eng:
        eng.topic(topic)
        confirm(printable(f"write an ABORT marker for the transaction at offset {start_offset} "
                          f"of {topic}-{partition}? Its records are never shown to "
                          "read_committed readers"), yes)
        row = eng.txn.abort_hanging(topic, partition, start_offset)
    if json:
        print_json(row)
        return
    done(printable(f"aborted the transaction of producer {row['producer_id']} at offset "
                   f"{start_offset} of {topic}-{partition} ({row['reason']}): ABORT marker at "
                   f"offset {row['marker_offset']}"))


def _abort_id(tid: str, yes: bool, json: bool) -> None:
    from engine.txn.txn_store import OPEN

    with open_engine() as eng:
        d = eng.txn.describe(tid)
        # (the open itself finishes prepared and timed-out transactions: say so)
        ended = next((dict(r) for r in eng.last_recovery.get("transactions", [])
                     if r["transactional_id"] == tid and r["action"] in ("aborted", "committed")),
                    None)
        if ended is None and d["state"] in OPEN:
            confirm(printable(_question(d)), yes)
            ended = eng.txn.abort(tid)
        elif ended is None:
            ended = {"transactional_id": tid, "state": d["state"], "action": None}
    if json:
        print_json({k: ended[k] for k in ("transactional_id", "state", "action")})
        return
    action, was = ended["action"], ended["state"]
    if action is None:
        info(printable(f"{tid} has no open transaction (state {was}): nothing was aborted"))
    elif action == "committed":
        done(printable(f"completed the decided commit of {tid} (it was {was})"))
    else:
        done(printable(f"aborted the transaction of {tid} (it was {was}); its producer is "
                       "fenced"))


def _question(d: dict[str, Any]) -> str:
    from engine.errors import plural

    tid, n = d["transactional_id"], len(d["partitions"])
    if d["state"] == "PrepareCommit":
        return (f"the commit of {tid} is decided (PrepareCommit): it can only be completed; "
                "complete it?")
    if d["state"] == "PrepareAbort":
        return f"finish the decided abort of {tid} (PrepareAbort)?"
    age = human_ms(d["age_ms"]) or "-"
    return (f"abort the transaction of {tid} ({plural(n, 'partition')}, open {age})? Its "
            "records are never shown to read_committed readers and its producer is fenced")
