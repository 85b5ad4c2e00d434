"""``rivven tier status`` and ``rivven tier restore``: where offsets live, and bringing cold
segments back to local disk."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import DryRunOpt, JsonOpt, PartitionOpt, open_engine
from .render import human_bytes, info, print_json, print_table, utc

app = typer.Typer(no_args_is_help=True)


def _range(start: int | None, end: int | None) -> str:
    if start is None or end is None or end <= start:
        return "-"
    return f"{start}..{end - 1}"


@app.command()
def status(
    topic: Annotated[str | None, typer.Argument(help="Only this topic (default: all).")] = None,
    json: JsonOpt = False,
) -> None:
    """Per partition: cold and local offset ranges, bytes and segments, the hot cache's bytes
    and hit rate (this machine's live producers), and the last upload."""
    with open_engine(read_only=True) as eng:
        rows = eng.maintenance.tier_status(topic)
        enabled = {m.name: m.typed.remote_storage_enable for m in eng.topics()}
    if json:
        print_json(rows)
        return
    print_table(
        ["TOPIC", "PARTITION", "REMOTE", "COLD", "COLD-SEGS", "COLD-BYTES", "LOCAL", "LOCAL-SEGS",
         "LOCAL-BYTES", "HOT-BYTES", "HOT-HIT", "LAST-UPLOAD"],
        [(r["topic"], r["partition"], "on" if enabled.get(r["topic"]) else "off",
          _range(r["cold_start_offset"], r["cold_end_offset"]), r["cold_segments"],
          human_bytes(r["cold_bytes"]), _range(r["local_start_offset"], r["local_end_offset"]),
          r["local_segments"], human_bytes(r["local_bytes"]), human_bytes(r["hot_bytes"]),
          "-" if r["hot_hit_rate"] is None else f"{100 * r['hot_hit_rate']:.0f}%",
          "-" if r["last_upload_ms"] is None else utc(r["last_upload_ms"]))
         for r in rows],
        right=("PARTITION", "COLD-SEGS", "COLD-BYTES", "LOCAL-SEGS", "LOCAL-BYTES", "HOT-BYTES",
               "HOT-HIT"),
        drop=("HOT-HIT", "HOT-BYTES", "LAST-UPLOAD", "COLD-SEGS", "LOCAL-SEGS", "REMOTE",
              "COLD-BYTES", "LOCAL-BYTES"))


@app.command()
def restore(
    topic: Annotated[str, typer.Argument(help="Topic to restore cold segments of.")],
    from_: Annotated[str, typer.Option(
        "--from", help="N, beginning, -N (N before the end), +N (N after the start) or @TIME "
        "(epoch ms, RFC 3339, -2h): restore the cold segments from the one holding it up to "
        "the local ones.")],
    partition: PartitionOpt = None,
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Bring cold segments back to local disk (each checked against the tier manifest), then
    drop them from the cold store."""
    from .positions import check_past_end, parse_position

    pos = parse_position(from_, "--from", reading=True, refuse=("end",))
    parts = [partition] if partition is not None else None
    with open_engine(read_only=dry_run) as eng:
        check_past_end(eng, topic, pos, "--from", "nothing to restore there", parts)
        rows = eng.maintenance.tier_restore(topic, partitions=parts, dry_run=dry_run, from_position=pos)
        meta = eng.topic(topic)
    if json:
        print_json({"dry_run": dry_run, "partitions": rows})
        return
    print_table(["TOPIC", "PARTITION", "SEGMENTS", "OFFSETS", "BYTES"],
                [(r["topic"], r["partition"], len(r["segments"]),
                  _range(r["segments"][0]["base_offset"], r["segments"][-1]["next_offset"])
                  if r["segments"] else "-", human_bytes(r["bytes"])) for r in rows],
                right=("PARTITION", "SEGMENTS", "BYTES"))
    n = sum(len(r["segments"]) for r in rows)
    info(f"{'would restore' if dry_run else 'restored'} {n} segment(s), "
         f"{human_bytes(sum(r['bytes'] for r in rows))}")
    if n and not dry_run and meta.typed.remote_storage_enable:
        info(f"note: {topic} still has remote.storage.enable=true: the next 'rivven spark tier' "
             "moves segments past local.retention.ms/bytes back to the cold store; raise those "
             "or turn remote storage off to keep them local")
