"""The one progress bar of long work (verify, recovery, Spark jobs): on stderr, and only when
stderr is a terminal — nothing decorative in pipes or logs.

The engine reports progress as ``update(what, total, done)``; ``progress_bar`` turns those
calls into Rich rows: one row per ``what`` (bytes, rate and ETA), or with ``tasks`` a single
row counting Spark tasks whose label follows ``what`` (``spark: stage 2/3``), with the time
elapsed since the start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engine.progress import Progress

Update = Progress


@contextmanager
def progress_bar(tasks: bool = False, label: str | None = None) -> Iterator[Update | None]:
    """Yields ``update(what, total, done)``, or None when stderr is not a terminal. A
    ``label`` shows at once, before the first update (a job that takes a while to start)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    counts: tuple[Any, ...] = (MofNCompleteColumn(), TextColumn("tasks"), TimeElapsedColumn()) \
        if tasks else (DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    bar = Progress(TextColumn("{task.description}"), BarColumn(), *counts,
                   console=Console(stderr=True), transient=True)
    rows: dict[str, Any] = {}
    started = False

    def update(what: str, total: int, done: int) -> None:
        nonlocal started
        if not started:
            bar.start()
            started = True
        key = "" if tasks else what
        if key not in rows:
            rows[key] = bar.add_task(what, total=total)
        # (a count of tasks not known yet, e.g. while Spark plans: a pulsing bar)
        bar.update(rows[key], description=what, total=total if total or not tasks else None,
                   completed=done)

    if label is not None:
        bar.start()
        started = True
        rows["" if tasks else label] = bar.add_task(label, total=None)
    try:
        yield update
    finally:
        if started:
            bar.stop()
