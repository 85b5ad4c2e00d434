"""``rivven retention apply`` and ``rivven delete-records``: move log start offsets forward."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import DryRunOpt, JsonOpt, PartitionOpt, YesOpt, confirm, open_engine
from .render import human_bytes, info, print_json, print_table

app = typer.Typer(no_args_is_help=True)


@app.command()
def apply(
    topic: Annotated[str | None, typer.Argument(help="Only this topic (default: all).")] = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Delete sealed segments past retention.ms / retention.bytes now, saying why."""
    with open_engine(read_only=dry_run) as eng:
        rows = eng.maintenance.apply_retention(topic, dry_run=dry_run)
    freed = sum(r["bytes"] for r in rows)
    if json:
        print_json({"dry_run": dry_run, "segments": rows, "bytes_freed": freed})
        return
    print_table(["TOPIC", "PARTITION", "SEGMENT", "OFFSETS", "BYTES", "REASON", "DETAIL"],
                [(r["topic"], r["partition"], r["base_offset"],
                  f"{r['base_offset']}..{r['next_offset'] - 1}", r["bytes"], r["reason"],
                  r["detail"]) for r in rows], right=("PARTITION", "SEGMENT", "BYTES"),
                wrap=("DETAIL",), drop=("SEGMENT", "DETAIL"))
    starts = {(r["topic"], r["partition"]): r["new_log_start_offset"] for r in rows}
    verb = "would delete" if dry_run else "deleted"
    info(f"{verb} {len(rows)} segment(s), {human_bytes(freed)}"
         + (f"; log start offsets {'would move' if dry_run else 'moved'} to "
            + ", ".join(f"{t}-{p}:{s}" for (t, p), s in sorted(starts.items())) if rows else ""))


def delete_records(
    topic: Annotated[str, typer.Argument(help="Topic to delete records from.")],
    before: Annotated[str, typer.Option(
        "--before", help="N, @TIME (epoch ms, RFC 3339, -2h), -N (keep the last N), +N (the "
        "first N), or end (every record, as Kafka's offset -1): delete records before it.")],
    partition: PartitionOpt = None,
    yes: YesOpt = False,
    json: JsonOpt = False,
) -> None:
    """Move log start offsets forward (never back); reads below them fail from then on."""
    from .positions import check_past_end, parse_position

    pos = parse_position(before, "--before", reading=True)
    with open_engine() as eng:
        parts = [partition] if partition is not None else None
        if parts is None or pos.kind != "offset":  # (else: refused past the end)
            check_past_end(eng, topic, pos, "--before", "deleting up to the end offset", parts)
        plan = eng.maintenance.delete_records_before(topic, pos, parts, dry_run=True)
        moving = [r for r in plan if r["new_log_start_offset"] > r["prior_log_start_offset"]]
        if moving:
            where = ", ".join(f"p{r['partition']}:{r['new_log_start_offset']}" for r in moving)
            confirm(f"delete records of {topic} before the new log start offsets ({where})?", yes)
            done = {r["partition"]: r for r in eng.maintenance.delete_records(
                topic, {r["partition"]: r["new_log_start_offset"] for r in moving})}
            plan = [done.get(r["partition"], r) for r in plan]
    if json:
        print_json(plan)
        return
    print_table(["PARTITION", "PRIOR-LOG-START", "NEW-LOG-START", "DELETED-SEGMENTS", "FREED"],
                [(r["partition"], r["prior_log_start_offset"], r["new_log_start_offset"],
                  len(r["deleted_segments"]),
                  human_bytes(sum(s["bytes"] for s in r["deleted_segments"]))) for r in plan],
                right=("PARTITION", "PRIOR-LOG-START", "NEW-LOG-START", "DELETED-SEGMENTS",
                       "FREED"))
    if not moving:
        info("nothing to delete: every log start offset is already at or past --before")
