"""``rivven offsets``: start/end offsets per partition, or the offset for a time."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from .common import JsonOpt, open_engine
from .positions import parse_time
from .render import print_json, print_table


def offsets(
    topic: Annotated[str, typer.Argument(help="Topic.")],
    at: Annotated[str | None, typer.Option(
        "--time", help="earliest, latest, or a time (epoch ms, RFC 3339, -2h): adds OFFSET, the "
        "first offset at or after it (the end offset when none is).")] = None,
    json: JsonOpt = False,
) -> None:
    """Show log start and end offsets of every partition."""
    rows = []
    with open_engine(read_only=True) as eng:
        meta = eng.topic(topic)
        ts = None
        if at not in (None, "earliest", "latest"):
            ts = parse_time(at, int(time.time() * 1000))
        for p in range(meta.partitions):
            start, end = eng.partition_log(topic, p).offsets()
            row = {"partition": p, "start_offset": start, "end_offset": end}
            if at == "earliest":
                row["offset"] = start
            elif at == "latest":
                row["offset"] = end
            elif ts is not None:
                off = eng.offset_for_time(topic, p, ts)
                row["offset"] = end if off is None else off
                row["timestamp"] = ts
            rows.append(row)
    if json:
        print_json(rows)
        return
    cols = ["PARTITION", "START-OFFSET", "END-OFFSET"] + (["OFFSET"] if at else [])
    print_table(cols, [[r["partition"], r["start_offset"], r["end_offset"]]
                       + ([r["offset"]] if at else []) for r in rows], right=cols)
