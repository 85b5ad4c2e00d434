"""``rivven offsets``: start/end offsets per partition, or the offset for a time."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.client.read import Position

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
    named = {"earliest": Position("beginning"), "latest": Position("end"), None: None}
    pos = named[at] if at in named else Position("timestamp", parse_time(at or "", "--time"))
    with open_engine(read_only=True) as eng:
        rows = eng.list_offsets(topic, pos)
    if json:
        print_json(rows)
        return
    cols = ["PARTITION", "START-OFFSET", "END-OFFSET"] + (["OFFSET"] if at else [])
    print_table(cols, [[r["partition"], r["start_offset"], r["end_offset"]]
                       + ([r["offset"]] if at else []) for r in rows], right=cols)
