"""``rivven group ...``: list, describe, reset-offsets (and rpk's seek), delete, delete-offsets."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import DryRunOpt, JsonOpt, YesOpt, confirm, open_engine
from .render import done, info, print_json, print_table, utc, warn

if TYPE_CHECKING:
    from engine import Position

app = typer.Typer(no_args_is_help=True)
GroupArg = Annotated[str, typer.Argument(help="Consumer group name.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Apply even while the group has active consumers.")]
@app.command("list")
def list_(json: JsonOpt = False) -> None:
    """Groups with their state (Active: live consumers; Empty), topics and total lag."""
    with open_engine(read_only=True) as eng:
        rows = eng.groups.list_groups()
    if json:
        print_json(rows)
        return
    print_table(["GROUP", "STATE", "MEMBERS", "TOPICS", "TOTAL-LAG"],
                [(r["group"], r["state"], r["members"], ",".join(r["topics"]), r["total_lag"])
                 for r in rows], right=("MEMBERS", "TOTAL-LAG"), wrap=("TOPICS",))


@app.command()
def describe(
    group: GroupArg,
    members: Annotated[bool, typer.Option(
        "--members", help="The live members: id, host, pid, client id, partitions held.")
    ] = False,
    state: Annotated[bool, typer.Option(
        "--state", help="One line: state, assignment strategy, members, topics, lag.")] = False,
    json: JsonOpt = False,
) -> None:
    """Per partition: committed offset, log start/end, lag, last commit and consumer."""
    if members and state:
        raise typer.BadParameter("give --members or --state, not both")
    with open_engine(read_only=True) as eng:
        d = eng.groups.state(group) if state else eng.groups.describe(group)
    if state:
        if json:
            print_json(d)
        else:
            print_table(["GROUP", "STATE", "ASSIGNMENT-STRATEGY", "MEMBERS", "TOPICS", "TOTAL-LAG"],
                        [(d["group"], d["state"], d["assignment_strategy"], d["members"],
                          ",".join(d["topics"]), d["total_lag"])], right=("MEMBERS", "TOTAL-LAG"))
    elif json:
        print_json({k: d[k] for k in ("group", "state", "members")} if members else d)
    else:
        typer.echo(f"group: {group}  state: {d['state']}  members: {len(d['members'])}")
        (_show_members if members else _show_partitions)(d)


def _show_partitions(d: dict[str, Any]) -> None:
    rows: list[tuple[Any, ...]] = [
        (r["topic"], r["partition"], r["current_offset"], r["log_start_offset"],
         r["log_end_offset"], r["lag"], utc(r["last_commit"]), r["consumer"])
        for r in d["partitions"]]
    rows.append(("TOTAL", "", "", "", "", d["total_lag"], "", ""))
    cols = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAG",
            "LAST-COMMIT", "CONSUMER-ID"]
    print_table(cols, rows, right=cols[1:6], wrap=("CONSUMER-ID",),
                drop=("LAST-COMMIT", "LOG-START-OFFSET", "CONSUMER-ID"))


def _show_members(d: dict[str, Any]) -> None:
    if not d["members"]:
        info(f"group {d['group']} has no active members")
        return
    rows = []
    for m in d["members"]:
        held: dict[str, list[str]] = {}
        for a in m["assignment"]:
            held.setdefault(a["topic"], []).append(str(a["partition"]))
        rows.append((m["member_id"], m["host"], m["pid"], m["client_id"], len(m["assignment"]),
                     " ".join(f"{t}({','.join(ps)})" for t, ps in held.items())))
    print_table(["CONSUMER-ID", "HOST", "PID", "CLIENT-ID", "PARTITIONS", "ASSIGNMENT"], rows,
                right=("PID", "PARTITIONS"))


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
    to_current: Annotated[bool, typer.Option(
        "--to-current", help="The committed offset (log end without one); with --export.")
    ] = False,
    to_offset: Annotated[int | None, typer.Option(
        "--to-offset", help="This offset (clamped to the valid range).")] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", help="First offset at or after TS: RFC 3339, epoch ms, or -2h.")] = None,
    by_duration: Annotated[str | None, typer.Option(
        "--by-duration", help="First offset at or after now minus DUR (PT2H, P1D, 30m...).")
    ] = None,
    shift_by: Annotated[int | None, typer.Option(
        "--shift-by", help="Committed offset plus N (may be negative).")] = None,
    to: Annotated[str | None, typer.Option(
        "--to", help="A position: beginning/earliest, end/latest, N, -N (N before the end), "
        "+N (N after the start) or @TIME (epoch ms, RFC 3339, -2h).")] = None,
    from_file: Annotated[str | None, typer.Option(
        "--from-file", help="The offsets of a plan file (topic,partition,offset lines).")
    ] = None,
    execute: Annotated[bool, typer.Option(
        "--execute", help="Apply the plan (without it: a dry run).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only show the plan (the default; Kafka's flag).")] = False,
    export: Annotated[bool, typer.Option(
        "--export", help="Print the plan as CSV (topic,partition,offset) for --from-file.")
    ] = False,
    force: ForceOpt = False,
    json: JsonOpt = False,
) -> None:
    """Plan a move of the group's committed offsets; apply it with --execute."""
    from engine import Position, clock

    from .positions import parse_duration, parse_position, parse_time

    modes = {"to-earliest": to_earliest or None, "to-latest": to_latest or None,
             "to-current": to_current or None, "to-offset": to_offset,
             "to-datetime": to_datetime, "by-duration": by_duration, "shift-by": shift_by,
             "from-file": from_file, "to": to}
    if dry_run and execute:
        raise typer.BadParameter("use either --dry-run or --execute, not both",
                                 param_hint="--dry-run")
    chosen = [k for k, v in modes.items() if v is not None]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --to POSITION --to-earliest --to-latest "
                                 "--to-current --to-offset --to-datetime --by-duration "
                                 "--shift-by --from-file")
    if topic and all_topics or not (topic or all_topics or from_file):
        raise typer.BadParameter("give --topic T[:P,P...] (repeatable) or --all-topics")
    mode: str | Position = chosen[0]
    value, resolved, pos = modes[chosen[0]], None, None
    if mode == "to":
        mode = pos = parse_position(to or "", "--to", reading=True)
        value = pos.value
        if pos.kind == "timestamp":
            resolved = f"--to {to} resolved to {utc(value)} ({value})"
    elif mode in ("to-datetime", "by-duration"):
        now = clock.now_ms()
        value = parse_time(to_datetime or "", "--to-datetime", now) if to_datetime else \
            now - parse_duration(by_duration or "", "--by-duration")
        resolved = f"--{mode} {modes[mode]} resolved to {utc(value)} ({value})"
        pos = Position("timestamp", value)
    elif mode == "to-offset":
        pos = Position("offset", to_offset or 0)
    _reset(group, _targets(topic) if topic else None, mode, value, execute, force, json, export,
           resolved, past_end=(pos, f"--{chosen[0]}"), position=to)


def _reset(group: str, targets: dict[str, list[int] | None] | None, mode: str | Position,
           value: Any,
           execute: bool, force: bool, json: bool, export: bool, resolved: str | None = None,
           new_topics: bool = True, apply: str = "add --execute",
           past_end: tuple[Position | None, str] = (None, ""), position: str | None = None
           ) -> None:
    """Plan (and apply) a reset, and show it: a table, JSON or a plan file. ``mode``: a reset
    mode, or a ``Position`` (the engine knows the mode it means). ``past_end``: the position
    asked for and its option, noted on stderr where it lies past a log end."""
    from .positions import check_past_end

    if json and export:
        raise typer.BadParameter("use either --json or --export, not both")
    if resolved and not json:
        info(resolved)
    with open_engine(read_only=not execute) as eng:
        plan = eng.groups.reset_offsets(group, targets, mode, value, execute=execute, force=force,
                                       new_topics=new_topics)
        rows = plan["partitions"]
        for t in sorted({r["topic"] for r in rows}):
            check_past_end(eng, t, past_end[0], past_end[1], "the new offset is the end offset",
                           [r["partition"] for r in rows if r["topic"] == t])
    for t in plan["skipped_topics"]:
        warn(f"group {group} has no committed offsets for topic {t}: left out (pass "
             "--allow-new-topics to set them up)")
    if json:
        print_json({"group": group, "mode": plan["mode"], "executed": execute,
                    "resolved_time": utc(value) if resolved else None, "position": position,
                    **{k: plan[k] for k in ("new_group", "active_members", "skipped_topics",
                                            "partitions")}})
    elif export:
        from engine.groups.admin import write_plan

        sys.stdout.write(write_plan(rows))
    else:
        print_table(["TOPIC", "PARTITION", "PRIOR", "NEW", "NOTE"],
                    [(r["topic"], r["partition"], r["prior"], r["new"],
                      f"clamped from {r['requested']} to {r['log_start_offset']}.."
                      f"{r['log_end_offset']}" if r["clamped"] else "") for r in rows],
                    right=("PARTITION", "PRIOR", "NEW"), wrap=("NOTE",))
    if execute:
        info(f"group {group}: offsets of {len(rows)} partition(s) "
             + ("set up (a new group)" if plan["new_group"] else "reset"))
    else:
        info(f"dry run: nothing changed; {apply} to apply"
             + (f" (group {group} does not exist yet: that creates it)" if plan["new_group"]
                else "")
             + (" (the group has active consumers: that needs --force)"
                if plan["active_members"] and rows else ""))


@app.command()
def seek(
    group: GroupArg,
    to: Annotated[str | None, typer.Option(
        "--to", help="start | end | OFFSET | -N | +N | @TIME (epoch ms, RFC 3339 or -2h).")
    ] = None,
    to_file: Annotated[str | None, typer.Option(
        "--to-file", help="The offsets of a plan file (topic partition offset lines).")] = None,
    topics: Annotated[list[str] | None, typer.Option(
        "--topics", help="Only these topics (comma-separated, repeatable; default: every "
        "topic the group has committed).")] = None,
    allow_new_topics: Annotated[bool, typer.Option(
        "--allow-new-topics", help="Also set offsets of --topics the group has none for.")
    ] = False,
    dry_run: DryRunOpt = False,
    force: ForceOpt = False,
    json: JsonOpt = False,
) -> None:
    """rpk's spelling of reset-offsets --execute: move the group's committed offsets."""
    from .positions import parse_position

    if (to is None) == (to_file is None):
        raise typer.BadParameter("give --to start|end|OFFSET|@TIME or --to-file FILE")
    names = [t.strip() for spec in topics or [] for t in spec.split(",") if t.strip()]
    for name in names:
        if ":" in name:  # (no topic name has one: Kafka's TOPIC:P habit)
            raise typer.BadParameter(
                f"{name!r}: --topics takes topic names (as rpk's group seek, whole topics); "
                f"for some partitions: rivven group reset-offsets {group} --topic "
                f"{name} --to-offset N --execute", param_hint="--topics")
    targets: dict[str, list[int] | None] | None = dict.fromkeys(names) if names else None
    if to_file is not None:
        _reset(group, targets, "from-file", to_file, not dry_run, force, json, False,
               apply="drop --dry-run")
        return
    pos = parse_position(to or "", "--to", reading=True)
    resolved = f"--to {to} resolved to {utc(pos.value)} ({pos.value})" \
        if pos.kind == "timestamp" else None
    _reset(group, targets, pos, pos.value, not dry_run, force, json, False,
           resolved, new_topics=allow_new_topics or targets is None, apply="drop --dry-run",
           past_end=(pos, "--to"), position=to)


@app.command()
def delete(group: GroupArg, yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Delete a group and its committed offsets (refused while it has active consumers)."""
    from engine.errors import DamagedMetadata

    with open_engine() as eng:
        try:
            eng.groups.describe(group)  # does it exist? is it active?
        except DamagedMetadata:
            pass  # deleting the group is the way out of a damaged offsets log
        confirm(f"delete group {group} and its committed offsets?", yes)
        out = eng.groups.delete(group)
    if json:
        print_json(out)
    elif out["deleted_offsets"] is None:
        done(f"group {group} deleted (with its damaged offsets log)")
    else:
        done(f"group {group} deleted ({out['deleted_offsets']} committed offset(s))")


@app.command("delete-offsets")
def delete_offsets(
    group: GroupArg,
    topic: Annotated[str, typer.Option("--topic", help="Forget the group's offsets of this topic.")],
    json: JsonOpt = False,
) -> None:
    """Forget a group's committed offsets for one topic."""
    with open_engine() as eng:
        out = eng.groups.delete_offsets(group, topic)
    if json:
        print_json(out)
    else:
        info(f"group {group}: offsets of {topic} partition(s) "
             f"{','.join(map(str, out['partitions']))} deleted")
