"""The progress of running copies (``rivven kafka export|import|mirror``): a Rich live table on
a terminal, a plain line per copy every few seconds otherwise (a log file, systemd's journal);
both on stderr, stdout being the summary's."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from .render import human_bytes

PER_PARTITION = 24  # partitions shown one per row at most; more: one row per topic


class View:
    """Refreshes every ``interval`` s from a thread until ``stop()``."""

    def __init__(self, copies: Sequence[Any], live: bool, interval: float) -> None:
        self.copies = copies
        self.interval = interval
        self.live: Any = None
        self.last: dict[int, tuple[float, int]] = {id(c): (time.monotonic(), 0) for c in copies}
        self.rates: dict[int, float] = {}
        self.done = threading.Event()
        if live:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), auto_refresh=False, transient=False)
        self.thread = threading.Thread(target=self._loop, name="rivven-kafka-view", daemon=True)

    def start(self) -> View:
        if self.live is not None:
            self.live.start()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)
        if self.live is not None:
            self.live.update(self._table(), refresh=True)
            self.live.stop()

    def _loop(self) -> None:
        while not self.done.wait(self.interval):
            self._measure()
            if self.live is not None:
                self.live.update(self._table(), refresh=True)
            else:
                for c in self.copies:
                    sys.stderr.write(self.line(c) + "\n")
                sys.stderr.flush()

    def _measure(self) -> None:
        now = time.monotonic()
        for c in self.copies:
            t0, n0 = self.last[id(c)]
            n = c.records
            self.rates[id(c)] = (n - n0) / max(now - t0, 1e-9)
            self.last[id(c)] = (now, n)

    def line(self, c: Any) -> str:
        lag = c.lag()
        worst = sorted(lag.items(), key=lambda kv: -kv[1])[:3]
        most = ", ".join(f"{t}[{p}] {n:,}" for (t, p), n in worst if n)
        from engine.errors import plural

        return (f"{c.direction} {c.name}: {plural(c.records, 'record', thousands=True)} "
                f"({human_bytes(c.bytes)}) in "
                f"{plural(c.transactions, 'transaction', thousands=True)}, "
                f"{self.rates.get(id(c), 0.0):,.0f} records/s, "
                f"lag {sum(lag.values()):,}" + (f" ({most})" if most else ""))

    def _table(self) -> Any:
        from rich.table import Table

        from engine.errors import plural

        t = Table(title="rivven kafka (Ctrl-C stops after the transaction in flight)",
                  title_justify="left")
        for col in ("copy", "source", "destination", "copied", "records/s", "lag", "position"):
            t.add_column(col, justify="right" if col in ("copied", "records/s", "lag",
                                                         "position") else "left")
        for c in self.copies:
            rate = f"{self.rates.get(id(c), 0.0):,.0f}"
            lanes = sorted(c.lanes.values(), key=lambda ln: (ln.topic, ln.partition))
            lag = c.lag()
            if len(lanes) <= PER_PARTITION:
                for i, ln in enumerate(lanes):
                    t.add_row(f"{c.direction} {c.name}" if i == 0 else "",
                              f"{ln.topic}[{ln.partition}]", ln.dest, f"{ln.records:,}",
                              rate if i == 0 else "", f"{lag.get((ln.topic, ln.partition), 0):,}",
                              f"{ln.pos:,}")
            else:
                topics = sorted({ln.topic for ln in lanes})
                for i, topic in enumerate(topics):
                    mine = [ln for ln in lanes if ln.topic == topic]
                    t.add_row(f"{c.direction} {c.name}" if i == 0 else "",
                              f"{topic} ({plural(len(mine), 'partition')})", mine[0].dest,
                              f"{sum(ln.records for ln in mine):,}", rate if i == 0 else "",
                              f"{sum(lag.get((topic, ln.partition), 0) for ln in mine):,}", "")
        return t
