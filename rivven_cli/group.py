"""``rivven group ...``: list, describe, reset-offsets, delete, delete-offsets."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from engine import clock
from engine.errors import DamagedMetadata

from .common import JsonOpt, YesOpt, confirm, open_engine
from .positions import UNITS, parse_time
from .render import info, print_json, print_table, utc

app = typer.Typer(no_args_is_help=True)
GroupArg = Annotated[str, typer.Argument(help="Consumer group name.")]
_DUR = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
_SIMPLE = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_duration(text: str) -> int:
    """ISO 8601 like PT2H / P1DT30M (Kafka's format) or 90s, 30m, 2h, 1d: milliseconds."""
    t = text.strip().upper()
    m = _SIMPLE.match(text.strip().lower())
    if m:
        return int(m.group(1)) * UNITS[m.group(2)]
    m = _DUR.match(t)
    if m and t not in ("P", "PT") and any(m.groups()):
        d, h, mi, s = m.groups()
        return int((int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60
                    + float(s or 0)) * 1000)
    raise typer.BadParameter(f"cannot read duration {text!r}: use ISO 8601 like PT2H or P1DT30M, "
                             "or 90s, 30m, 2h, 1d", param_hint="--by-duration")


@app.command("list")
def list_(json: JsonOpt = False) -> None:
    """Groups with their state (Active: live consumers; Empty), topics and total lag."""
    with open_engine(read_only=True) as eng:
        rows = eng.list_groups()
    if json:
        print_json(rows)
        return
    print_table(["GROUP", "STATE", "MEMBERS", "TOPICS", "TOTAL-LAG"],
                [(r["group"], r["state"], r["members"], ",".join(r["topics"]), r["total_lag"])
                 for r in rows], right=("MEMBERS", "TOTAL-LAG"), wrap=("TOPICS",))


@app.command()
def describe(group: GroupArg, json: JsonOpt = False) -> None:
    """Per partition: committed offset, log start/end, lag, last commit and consumer."""
    with open_engine(read_only=True) as eng:
        d = eng.describe_group(group)
    if json:
        print_json(d)
        return
    typer.echo(f"group: {group}  state: {d['state']}  members: {len(d['members'])}")
    rows: list[tuple[Any, ...]] = [
        (r["topic"], r["partition"], r["current_offset"], r["log_start_offset"],
         r["log_end_offset"], r["lag"], utc(r["last_commit"]), r["consumer"])
        for r in d["partitions"]]
    rows.append(("TOTAL", "", "", "", "", d["total_lag"], "", ""))
    cols = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAG",
            "LAST-COMMIT", "CONSUMER-ID"]
    print_table(cols, rows, right=cols[1:6], wrap=("CONSUMER-ID",),
                drop=("LAST-COMMIT", "LOG-START-OFFSET", "CONSUMER-ID"))


def _targets(topics: list[str]) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for spec in topics:
        name, colon, parts = spec.partition(":")
        if not colon:
            out[name] = None
            continue
        try:
            ps = [int(p) for p in parts.split(",") if p.strip()]
        except ValueError:
            raise typer.BadParameter(f"{spec!r} is not TOPIC or TOPIC:P,P...",
                                     param_hint="--topic") from None
        if not ps or min(ps) < 0:
            raise typer.BadParameter(f"{spec!r} names no partitions", param_hint="--topic")
        prev = out.get(name, [])
        out[name] = None if prev is None and name in out else sorted(set((prev or []) + ps))
    return out


@app.command("reset-offsets")
def reset_offsets(
    group: GroupArg,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="TOPIC or TOPIC:P,P... (repeatable).")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="Every topic the group has committed offsets for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Log end offset.")] = False,
    to_offset: Annotated[int | None, typer.Option(
        "--to-offset", help="This offset (clamped to the valid range).")] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", help="First offset at or after TS: RFC 3339, epoch ms, or -2h.")] = None,
    by_duration: Annotated[str | None, typer.Option(
        "--by-duration", help="First offset at or after now minus DUR (PT2H, P1D, 30m...).")
    ] = None,
    shift_by: Annotated[int | None, typer.Option(
        "--shift-by", help="Committed offset plus N (may be negative).")] = None,
    execute: Annotated[bool, typer.Option(
        "--execute", help="Apply the plan (without it: a dry run).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Apply even while the group has active consumers.")] = False,
    json: JsonOpt = False,
) -> None:
    """Plan a move of the group's committed offsets; apply it with --execute."""
    modes = {"to-earliest": to_earliest or None, "to-latest": to_latest or None,
             "to-offset": to_offset, "to-datetime": to_datetime, "by-duration": by_duration,
             "shift-by": shift_by}
    chosen = [k for k, v in modes.items() if v is not None]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --to-earliest --to-latest --to-offset "
                                 "--to-datetime --by-duration --shift-by")
    if bool(topic) == all_topics:
        raise typer.BadParameter("give --topic T[:P,P...] (repeatable) or --all-topics")
    mode = chosen[0]
    now = clock.now_ms()
    value: int | None = None
    resolved = None
    if mode == "to-offset":
        value = to_offset
    elif mode == "shift-by":
        value = shift_by
    elif mode == "to-datetime":
        value = parse_time(to_datetime or "", "--to-datetime", now)
        resolved = f"--to-datetime {to_datetime} resolved to {utc(value)} ({value})"
    elif mode == "by-duration":
        value = now - parse_duration(by_duration or "")
        resolved = f"--by-duration {by_duration} resolved to {utc(value)} ({value})"
    if resolved and not json:
        info(resolved)
    with open_engine(read_only=not execute) as eng:
        rows = eng.reset_offsets(group, None if all_topics else _targets(topic or []), mode,
                                 value, execute=execute, force=force)
        active = eng.describe_group(group)["state"] == "Active" if not execute and rows else False
    if json:
        print_json({"group": group, "mode": mode, "executed": execute,
                    "resolved_time": utc(value) if resolved else None, "partitions": rows})
    else:
        print_table(["TOPIC", "PARTITION", "PRIOR", "NEW", "NOTE"],
                    [(r["topic"], r["partition"], r["prior"], r["new"],
                      f"clamped from {r['requested']} to {r['log_start_offset']}.."
                      f"{r['log_end_offset']}" if r["clamped"] else "") for r in rows],
                    right=("PARTITION", "PRIOR", "NEW"), wrap=("NOTE",))
    if execute:
        info(f"group {group}: offsets of {len(rows)} partition(s) reset")
    else:
        info("dry run: nothing changed; add --execute to apply"
             + (" (the group has active consumers: that needs --force)" if active else ""))


@app.command()
def delete(group: GroupArg, yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Delete a group and its committed offsets (refused while it has active consumers)."""
    with open_engine() as eng:
        try:
            eng.describe_group(group)  # does it exist? is it active?
        except DamagedMetadata:
            pass  # deleting the group is the way out of a damaged offsets log
        confirm(f"delete group {group} and its committed offsets?", yes)
        out = eng.delete_group(group)
    if json:
        print_json(out)
    elif out["deleted_offsets"] is None:
        info(f"group {group} deleted (with its damaged offsets log)")
    else:
        info(f"group {group} deleted ({out['deleted_offsets']} committed offset(s))")


@app.command("delete-offsets")
def delete_offsets(
    group: GroupArg,
    topic: Annotated[str, typer.Option("--topic", help="Forget the group's offsets of this topic.")],
    json: JsonOpt = False,
) -> None:
    """Forget a group's committed offsets for one topic."""
    with open_engine() as eng:
        out = eng.delete_group_offsets(group, topic)
    if json:
        print_json(out)
    else:
        info(f"group {group}: offsets of {topic} partition(s) "
             f"{','.join(map(str, out['partitions']))} deleted")
