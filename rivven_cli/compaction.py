"""``rivven compaction explain``: why a compacted topic looks the way it does."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, open_engine
from .render import human_bytes, print_json, utc

app = typer.Typer(no_args_is_help=True)


def _t(ms: int | None) -> str:
    return utc(ms, "seconds") or "-"


@app.command()
def explain(
    topic: Annotated[str, typer.Argument(help="Topic to explain.")],
    json: JsonOpt = False,
) -> None:
    """Per partition: dirty ratio, cleanable range, what holds the rest back, tombstones and
    their delete horizons."""
    with open_engine(read_only=True) as eng:
        parts = eng.maintenance.explain_compaction(topic)
    if json:
        print_json(parts)
        return
    for p in parts:
        name = f"{topic}-{p['partition']}"
        verdict = f"skipped by the next pass: {p['skip']}" if p["skip"] else \
            "cleaned by the next pass"
        typer.echo(f"{name}: dirty ratio {p['dirty_ratio']:.2f} (min.cleanable.dirty.ratio "
                   f"{p['min_cleanable_dirty_ratio']}): {verdict}")
        if p["segments"]:
            typer.echo(f"  cleanable: offsets {p['log_start_offset']}..{p['cleanable_end'] - 1} "
                       f"in {len(p['segments'])} sealed segment(s), "
                       f"{human_bytes(p['clean_bytes'] + p['dirty_bytes'])}: clean below "
                       f"{p['first_dirty']}, dirty {human_bytes(p['dirty_bytes'])} from there")
        else:
            typer.echo("  cleanable: nothing")
        held = p["held_by_lag"]
        if held:
            typer.echo(f"  not cleanable: offsets {held['base_offset']}..: segment "
                       f"{held['base_offset']} holds records newer than min.compaction.lag.ms="
                       f"{p['min_compaction_lag_ms']} (newest {_t(held['max_timestamp'])}, "
                       f"cleanable after {_t(held['max_timestamp'] + p['min_compaction_lag_ms'])})")
        txn = p.get("held_by_transaction")
        if txn and not held:
            typer.echo(f"  not cleanable: offsets {txn['base_offset']}..: an open transaction "
                       f"(the last stable offset is {txn['last_stable_offset']}): cleanable "
                       "once it commits or aborts")
        typer.echo(f"  not cleanable: the active segment, offsets {p['active_base']}.."
                   f"{p['end_offset'] - 1 if p['end_offset'] > p['active_base'] else '(empty)'}")
        tb = p["tombstones"]
        line = f"  tombstones: {tb['count']}"
        if tb["count"]:
            line += (f"; {tb['removable_now']} past their delete horizon (removed by the next "
                     f"pass), {tb['not_yet_kept']} not yet kept by any pass")
            if tb["next_horizon"] is not None:
                line += f"; next horizon {_t(tb['next_horizon'])}"
            line += f" (delete.retention.ms={p['delete_retention_ms']})"
        typer.echo(line)
        mk = p.get("markers") or {}
        if mk.get("count"):
            typer.echo(f"  transaction markers: {mk['count']}; {mk['removable_now']} past their "
                       f"delete horizon (removed by the next pass), {mk['kept_as_last']} kept "
                       "as their producer's last batch")
        typer.echo(f"  passes so far: {p['passes']}, last {_t(p['last_pass'])}")
