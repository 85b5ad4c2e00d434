"""Stopping a long-running write cleanly: SIGINT, SIGTERM and SIGHUP (and a broken output
pipe, which Python reports as BrokenPipeError since it ignores SIGPIPE) become ``Stopped``,
raised where nothing is half done, so the command can say how many records were stored.

While a batch is being stored (``Guard.storing``) a signal is held until the batch is
acknowledged; while the command waits for input or writes output it is raised at once. A second
signal during a store raises at once too (a stuck store can still be left with Ctrl-C twice).
Exit statuses are the shells' ``128 + signal``: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP, 141 a
broken pipe.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WHAT: dict[int, str] = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP",
        signal.SIGPIPE: "a broken pipe (the reader of stdout went away)"}


class Stopped(Exception):
    def __init__(self, signum: int, in_flight: bool = False) -> None:
        super().__init__(WHAT.get(signum, f"signal {signum}"))
        self.signum = signum
        self.in_flight = in_flight  # raised inside a store: its batch may be stored or not

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Guard:
    def __init__(self) -> None:
        self.busy = False
        self.pending: int | None = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.busy and self.pending is None:
            self.pending = signum
            return
        raise Stopped(signum, in_flight=self.busy)

    @contextmanager
    def storing(self) -> Iterator[None]:
        """A store that a signal does not cut short (a second one does)."""
        self.busy = True
        try:
            yield
        finally:
            self.busy = False
        if self.pending is not None:
            raise Stopped(self.pending)


@contextmanager
def guarded() -> Iterator[Guard]:
    """Signals become ``Stopped`` (a broken pipe too) while the block runs; the handlers
    before it are put back after. A signal ignored before (``nohup``) stays ignored."""
    guard = Guard()
    before = {}
    for s in SIGNALS:
        old = signal.getsignal(s)
        if old is not signal.SIG_IGN:
            before[s] = old
            signal.signal(s, guard._handler)
    try:
        yield guard
    except BrokenPipeError:
        raise Stopped(signal.SIGPIPE) from None
    finally:
        for s, old in before.items():
            signal.signal(s, old)


def stop_event() -> threading.Event:
    """An event the first SIGINT or SIGTERM sets (a long-running command then stops where
    it stands); a second one interrupts at once."""
    event = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return event


def quiet_closed_pipe(stopped: Stopped) -> None:
    """After a stop by a closed pipe, point stdout at /dev/null: nothing more can reach the
    reader, and the interpreter's flush at exit would fail again."""
    if stopped.signum != signal.SIGPIPE:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
