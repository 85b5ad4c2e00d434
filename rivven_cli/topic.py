"""``rivven topic ...``: create, list, describe, alter-config, add-partitions, delete."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, YesOpt, confirm, no_data_yet, open_engine, state
from .render import done, human_bytes, info, print_json, print_table, printable

app = typer.Typer(no_args_is_help=True)
NameArg = Annotated[str, typer.Argument(help="Topic name.")]
# a bad partition count is a usage error (exit 2), 0 and 20000 as "abc" (the engine's own
# bound: engine.storage.topics.MAX_PARTITIONS, which tests/cli checks this equals)
MAX_PARTITIONS = 10_000


@app.command()
def create(
    name: NameArg,
    partitions: Annotated[int, typer.Option(
        "--partitions", "-p", min=1, max=MAX_PARTITIONS, help="Partition count.")] = 1,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Topic config key=value (repeatable).")] = None,
    if_not_exists: Annotated[bool, typer.Option(
        "--if-not-exists", help="Succeed when the topic exists (it is left as it is: a note "
        "says what was not applied).")] = False,
    replication_factor: Annotated[int | None, typer.Option(
        "--replication-factor", "-r", min=1, help="1 only (Kafka's and rpk's flag): one "
        "copy, made durable by fsync.", show_default=False)] = None,
    json: JsonOpt = False,
) -> None:
    """Create a topic."""
    from engine.storage.config import parse_pairs

    if replication_factor is not None and replication_factor > 1:
        raise typer.BadParameter(f"{replication_factor}: no replication: one copy, made "
                                 "durable by fsync (give 1, or leave it out)",
                                 param_hint="--replication-factor")

    with open_engine() as eng:
        did = eng.topic_admin.create(name, partitions, parse_pairs(config or []),
                                     if_not_exists=if_not_exists)
    meta = did["topic"]
    if "partitions" in did["not_applied"]:
        info(f"note: topic {name} exists with {meta.partitions} partition(s), not {partitions}: "
             f"the partitions were not changed (grow them with 'rivven topic add-partitions "
             f"{name} --total {partitions}')")
    if "config" in did["not_applied"]:
        info(f"note: topic {name} exists: its config was not changed (change it with 'rivven "
             f"topic alter-config {name} --set KEY=VALUE')")
    if json:
        print_json({"topic": name, "id": meta.id, "partitions": meta.partitions,
                    "config": meta.config, "created": did["created"],
                    "not_applied": did["not_applied"]})
        return
    done(f"topic {name} {'ready' if did['created'] else 'exists'} "
         f"({meta.partitions} partition{'s' * (meta.partitions != 1)})")


@app.command("list")
def list_(
    topics: Annotated[list[str] | None, typer.Argument(
        help="Only these topics (exact names), or with --regex those an expression matches "
        "whole.")] = None,
    regex: Annotated[bool, typer.Option(
        "--regex", "-r", help="Read TOPICS as regular expressions (anchored at both ends, "
        "as rpk's).")] = False,
    json: JsonOpt = False,
) -> None:
    """List topics with their partitions and sizes."""
    rows: list[dict] = []
    if no_data_yet(state().data_dir):  # (as rpk: an empty list, not an error)
        info(f"note: no data in {state().data_dir} yet: no topics (create one with 'rivven "
             "topic create NAME')")
        _print_topics(rows, json)
        return
    with open_engine(read_only=True) as eng:
        for t in eng.topics(topics, regex):
            offsets = eng.offsets.unopened(t.name).values()
            rows.append({"topic": t.name, "partitions": t.partitions,
                         "records": sum(end - start for start, end in offsets),
                         "end_offsets": sum(end for _, end in offsets), "config": t.config})
    missing = [n for n in topics or () if not regex and n not in {r["topic"] for r in rows}]
    for n in missing:
        pattern = any(c in n for c in "*+?[]()|^$\\")
        info(printable(f"note: no topic is named {n!r}"
                       + (" (add --regex to read it as a regular expression)" if pattern else "")))
    _print_topics(rows, json)


def _print_topics(rows: list[dict], json: bool) -> None:
    if json:
        print_json(rows)
    else:
        print_table(["TOPIC", "PARTITIONS", "RECORDS", "CONFIG"],
                    [(r["topic"], r["partitions"], r["records"],
                      ",".join(f"{k}={v}" for k, v in sorted(r["config"].items())))
                     for r in rows], right=("PARTITIONS", "RECORDS"), wrap=("CONFIG",),
                    drop=("CONFIG",))


@app.command()
def describe(
    name: NameArg,
    print_partitions: Annotated[bool, typer.Option(
        "--print-partitions", "-p", help="Only the partitions (rpk's -p): a table, or with "
        "--json their list.")] = False,
    json: JsonOpt = False,
) -> None:
    """Configs (with their source) and per-partition offsets, segments and bytes. With --json,
    "config" is the topic's own settings as in 'topic list --json' (an object), and
    "config_entries" every setting with its value and source."""
    with open_engine(read_only=True) as eng:
        d = eng.topic_admin.describe(name)
    if json:
        print_json(d["partition_info"] if print_partitions else
                   {"topic": d["topic"], "id": d["id"], "partitions": d["partitions"],
                    "config": {c["key"]: c["value"] for c in d["config"]
                               if c["source"] == "topic"},
                    "config_entries": d["config"], "partition_info": d["partition_info"]})
        return
    if not print_partitions:
        typer.echo(f"topic: {name}  partitions: {d['partitions']}  id: {d['id']}")
        print_table(["CONFIG", "VALUE", "SOURCE"],
                    [(c["key"], c["value"], c["source"]) for c in d["config"]], wrap=("VALUE",))
    print_table(["PARTITION", "START-OFFSET", "END-OFFSET", "SEGMENTS", "SIZE"],
                [(p["partition"], p["start_offset"], p["end_offset"], p["segments"],
                  human_bytes(p["bytes"])) for p in d["partition_info"]],
                right=("PARTITION", "START-OFFSET", "END-OFFSET", "SEGMENTS", "SIZE"),
                drop=("SIZE", "SEGMENTS"))


@app.command("alter-config")
def alter_config(
    name: NameArg,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="key=value to set (repeatable).")] = None,
    delete: Annotated[list[str] | None, typer.Option(
        "--delete", help="Key to reset to its default (repeatable).")] = None,
    json: JsonOpt = False,
) -> None:
    """Change topic configs while producers keep running."""
    from engine.storage.config import parse_pairs

    if not set_ and not delete:
        raise typer.BadParameter("give at least one --set key=value or --delete key")
    with open_engine() as eng:
        meta = eng.topic_admin.alter_config(name, parse_pairs(set_ or []), delete or [])
    if json:
        print_json({"topic": name, "config": meta.config})
        return
    done(f"topic {name} config: " + (", ".join(f"{k}={v}" for k, v in sorted(meta.config.items()))
                                     or "all defaults"))


@app.command("add-partitions")
def add_partitions(
    name: NameArg,
    total: Annotated[int | None, typer.Option(
        "--total", min=1, max=MAX_PARTITIONS, help="New total partition count.",
        show_default=False)] = None,
    num: Annotated[int | None, typer.Option(
        "--num", "-n", min=1, help="Partitions to add (rpk's -n).", show_default=False)] = None,
    json: JsonOpt = False,
) -> None:
    """Grow a topic to --total partitions, or by --num (keyed records may then map
    elsewhere)."""
    from engine.errors import plural

    if (total is None) == (num is None):
        raise typer.BadParameter("give --num N (partitions to add) or --total N (the new "
                                 "count)", param_hint="--num")
    with open_engine() as eng:
        if num is not None:
            total = eng.topic(name).partitions + num
        assert total is not None
        meta = eng.topic_admin.add_partitions(name, total)
    if json:
        print_json({"topic": name, "partitions": meta.partitions})
        return
    done(f"topic {name} now has {plural(meta.partitions, 'partition')}")


@app.command()
def delete(
    name: NameArg,
    yes: YesOpt = False,
    if_exists: Annotated[bool, typer.Option(
        "--if-exists", help="Succeed when there is no such topic (nothing is deleted).")
    ] = False,
    json: JsonOpt = False,
) -> None:
    """Delete a topic and all its data."""
    with open_engine() as eng:
        if if_exists and not eng.topics([name]):
            out = eng.topic_admin.delete(name, if_exists=True)  # (says there was nothing)
        else:
            eng.topic(name)
            confirm(f"delete topic {name} and all its data?", yes)
            out = eng.topic_admin.delete(name, if_exists=if_exists)
    if json:
        print_json(out)
    if out["problems"]:  # damaged tier manifests: what they name outside the prefix stays
        from engine.errors import DamagedMetadata

        raise DamagedMetadata(f"topic {name} was deleted with its cold prefix, but: "
                              + "; ".join(out["problems"]))
    if not out["deleted"]:
        info(printable(f"topic {name} does not exist: nothing was deleted"))
    elif not json:
        done(f"topic {name} deleted")
