"""The plain sender of ``rivven produce``: parses chunks of input and stores them through the
engine, counting what was acknowledged. The senders of ``--idempotent`` and
``--transactional-id`` (txn_produce) are kinds of it. Imported when ``produce`` runs (it
loads the engine)."""

from __future__ import annotations

import re
import sys
from typing import Any

from engine.errors import plural
from engine.format.text import LinesInput

from .common import fail
from .render import human_bytes


def record_error(e: Exception, idx: int) -> str:
    """An engine error about record ``idx`` of a call, without the index (the CLI names the
    input line instead)."""
    return re.sub(rf"^record {idx} ", "the record ", str(e))


class Sender:
    """Parses chunks of input and stores them, counting what was acknowledged."""

    def __init__(self, topic: str, parser: Any, hdrs: list, partition: int | None,
                 compression: str | None, tombstone_empty: bool, print_offsets: bool,
                 json: bool) -> None:
        self.topic, self.parser, self.hdrs = topic, parser, hdrs
        self.partition, self.compression = partition, compression
        self.tombstone_empty, self.print_offsets, self.json = tombstone_empty, print_offsets, json
        self.lines_mode = isinstance(parser, LinesInput)  # (needs no partition count)
        self.what = "line" if parser.terminator == b"\n" else "input record"
        self.count = self.nbytes = 0
        self.line_no = 0  # input lines (records) before the current chunk
        self.stopped: Any = None
        self.out = sys.stdout.buffer
        self.target: Any = None  # what stores: the engine, or a producer of it

    # ---------------------------------------------------------------- hooks of the kinds
    def start(self, eng: Any) -> None:
        """Before the first chunk (the engine is open)."""
        self.target = eng

    def finish(self, guard: Any) -> None:
        """After the last chunk."""

    def stop(self) -> None:
        """After a signal or a broken pipe stopped the command."""

    def summary(self) -> dict[str, Any]:
        """More keys of the JSON summary."""
        return {}

    def summary_text(self) -> str:
        return ""

    def stop_report(self) -> tuple[str, dict[str, Any]]:
        """What the stop report says was kept: its text (after "stopped by X: "), and more
        keys for the JSON one."""
        e = self.stopped
        return (f"{plural(self.count, 'record', thousands=True)} ({human_bytes(self.nbytes)}) "
                f"stored in {self.topic} (durably acknowledged) before it stopped"
                + ("; the batch being stored then may be stored too" if e.in_flight else ""),
                {})

    def failed_line(self, message: str, before: bool) -> None:
        """Fail on an input line: ``message`` names it and what is wrong; ``before``: the
        records before it in its chunk were sent."""
        if before:
            fail(f"{message}; records before this {self.what}'s batch are stored, none after")
        fail(f"{message}; the {plural(self.count, 'record')} before it "
             f"{'is' if self.count == 1 else 'are'} stored, none after")

    def store(self, cols: dict[str, Any], complete: bool, guard: Any) -> None:
        """Store a chunk's records (``cols``: produce_batch's arguments), count and print
        what is acknowledged. ``complete``: the whole chunk (no line of it was refused)."""
        with guard.storing():  # (printed inside: a signal then waits for the offsets too)
            acks = self.target.produce_batch(self.topic, **cols, partition=self.partition,
                                             compression=self.compression)
            self.stored(cols["values"])
            self.printed(acks)

    # ---------------------------------------------------------------- the common path
    def send(self, eng: Any, lines: list[bytes], guard: Any) -> None:
        nparts = 0 if self.lines_mode else eng.topic(self.topic).partitions
        parsed = self.parser.parse(lines, nparts)  # (partitions may have been added)
        values = parsed.values
        if values:
            if self.tombstone_empty:
                values = [v if v else None for v in values]
            hs = parsed.headers
            if self.hdrs:
                hs = [self.hdrs + list(h) for h in hs] if hs else [self.hdrs] * len(values)
            cols = {"values": values, "keys": parsed.keys, "headers": hs,
                    "timestamps": parsed.timestamps, "partitions": parsed.partitions}
            try:
                self.store(cols, parsed.error is None, guard)
            except Exception as e:
                idx = getattr(e, "index", None)
                if idx is not None:
                    line = parsed.lines[idx] if parsed.lines is not None else idx
                    self.failed_line(f"{self.what} {self.line_no + line + 1}: "
                                     f"{record_error(e, getattr(e, 'call_index', idx))}",
                                     True)
                raise
        if parsed.error is not None:
            self.failed_line(f"{self.what} {self.line_no + parsed.error.index + 1}: "
                             f"{parsed.error}", False)
        self.line_no += len(lines)

    def stored(self, values: list) -> None:
        self.count += len(values)
        self.nbytes += sum(len(v) for v in values if v is not None)

    def printed(self, acks: list) -> None:
        """With --print-offsets: the offsets of acknowledged records."""
        if self.print_offsets and acks:
            fmt = '{{"partition":{},"offset":{}}}\n' if self.json else "{} {}\n"
            self.out.write("".join([fmt.format(p, o) for p, o in acks]).encode())
            self.out.flush()
