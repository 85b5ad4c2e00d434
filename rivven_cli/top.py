"""``rivven top``: a live view of produce and read rates, lag and fsync latency per topic."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from .common import JsonOpt, open_engine
from .interrupts import stop_event
from .render import human_bytes, json_line


def _secs(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.2f} ms" if v < 1 else f"{v:.2f} s"


def _table(r: Mapping[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from engine.errors import plural

    group = plural(round(r["group_commit_records"] or 0), "record")
    head = (f"every {r['seconds']:.1f} s · WAL {r['fsyncs_per_s']:.0f} fsync/s, p50 "
            f"{_secs(r['fsync_p50_s'])}, p99 {_secs(r['fsync_p99_s'])}, {group} per group commit")
    t = Table(box=None, header_style="bold")
    for col in ("TOPIC", "PRODUCE/s", "READ/s", "IN/s", "LAG", "LOCAL", "COLD"):
        t.add_column(col, justify="left" if col == "TOPIC" else "right")
    for row in r["topics"]:
        t.add_row(row["topic"], f"{row['produce_per_s']:,.0f}", f"{row['read_per_s']:,.0f}",
                  f"{human_bytes(int(row['bytes_in_per_s']))}", f"{row['lag']:,}",
                  human_bytes(row["local_bytes"]), human_bytes(row["cold_bytes"]))
    return Group(Text(head), t)


def top(
    interval: Annotated[float, typer.Option("--interval", "-i", min=0.1,
                                            help="Seconds between refreshes.")] = 2.0,
    count: Annotated[int | None, typer.Option("--count", "-n", min=1,
                                              help="Stop after this many refreshes.")] = None,
    json: JsonOpt = False,
) -> None:
    """A live view per topic: produce and read rates, bytes in, group lag, local and cold
    bytes; WAL fsync p50/p99 and group commit size (Ctrl-C stops).

    With --json, one JSON line per refresh."""
    from engine.metrics.rates import rates

    with open_engine(read_only=True) as eng:
        stop = stop_event()
        before, t0 = eng.metrics(), time.monotonic()
        live: Any = None
        if not json:
            from rich.console import Console
            from rich.live import Live

            live = Live(console=Console(), auto_refresh=False, transient=False)
            live.start()
        try:
            done = 0
            while not stop.wait(interval):
                after, t1 = eng.metrics(), time.monotonic()
                r = rates(before, after, t1 - t0)
                before, t0 = after, t1
                if json:
                    sys.stdout.write(json_line(r) + "\n")
                    sys.stdout.flush()
                else:
                    live.update(_table(r), refresh=True)
                done += 1
                if count is not None and done >= count:
                    break
        finally:
            if live is not None:
                live.stop()
