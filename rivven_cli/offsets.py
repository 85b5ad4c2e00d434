"""``rivven offsets``: start/end offsets per partition, or the offset for a time."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import Isolation, IsolationOpt, JsonOpt, open_engine
from .render import print_json, print_table


def offsets(
    topic: Annotated[str, typer.Argument(help="Topic.")],
    at: Annotated[str | None, typer.Option(
        "--time", help="A time (epoch ms, RFC 3339, -2h; @ optional) or a position "
        "(beginning/earliest, end/latest, -N, +N): adds OFFSET, the offset it names (for a "
        "time the first offset at or after it, the end offset when none is).")] = None,
    isolation: IsolationOpt = Isolation.read_uncommitted,
    json: JsonOpt = False,
) -> None:
    """Show log start and end offsets of every partition (--isolation read_committed: the
    end is the last stable offset)."""
    from .positions import note_past_end, parse_time_position

    pos = None if at is None else parse_time_position(at, "--time")
    with open_engine(read_only=True) as eng:
        rows = eng.offsets.list_offsets(topic, pos, isolation_level=isolation.value)
    if pos is not None:
        note_past_end("--time", pos, rows, "OFFSET is the end offset", topic)
    if json:
        print_json(rows)
        return
    cols = ["PARTITION", "START-OFFSET", "END-OFFSET"] + (["OFFSET"] if at else [])
    print_table(cols, [[r["partition"], r["start_offset"], r["end_offset"]]
                       + ([r["offset"]] if at else []) for r in rows], right=cols)
