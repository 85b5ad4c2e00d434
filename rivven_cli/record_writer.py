"""Records' text to stdout whole, and which records got there: what ``rivven consume`` prints
and what its ``--group`` may commit.

Three promises, for a pipe above all (``rivven consume -g G | head -1``):

- **Whole records only.** Output goes to the file descriptor with ``os.write`` (no buffer of
  Python's that a signal or a closed pipe leaves half written). Into a pipe, records are
  written in runs of whole records of at most ``PIPE_BUF`` bytes, each write only once
  ``poll`` says the pipe has room: the kernel then takes the run whole or not at all, and the
  writer never blocks in a write, so Ctrl-C stops it between two records even while the
  reader takes nothing. A record longer than ``PIPE_BUF`` cannot be written whole at once: a
  signal during it is held until its last byte is written (a second one stops at once).
- **Known progress.** ``reached`` is, per partition, the offset after the last record written
  whole: what a group may commit. Bytes a pipe took are counted even though the reader may
  never read them (a pipe buffers up to 64 KiB the reader never took); ``-c N`` commits
  exactly N.
- **Stops as produce does.** A signal (SIGINT, SIGTERM, SIGHUP) or a closed pipe raises
  ``interrupts.Stopped`` at a record boundary (exit 130, 143, 129, 141).

Signals are held (``Guard.busy``) while it writes; the caller holds them elsewhere as it likes.
"""

from __future__ import annotations

import os
import select
import signal
import stat
import sys
from itertools import accumulate
from typing import Any

from .interrupts import Guard, Stopped

PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a pipe takes a write of at most this whole
BUFFER = 1 << 16  # bytes gathered before they are written (and the largest write to a file)
WAIT_S = 0.1  # how long a wait for room in the pipe lasts before a signal is looked at


class RecordWriter:
    def __init__(self, guard: Guard, stream: Any = None) -> None:
        self.guard = guard
        stream = sys.stdout if stream is None else stream
        self.fd: int | None = None
        self.buffer = getattr(stream, "buffer", stream)
        self.pipe = False
        try:
            self.fd = stream.fileno()
            self.pipe = stat.S_ISFIFO(os.fstat(self.fd).st_mode)
        except (AttributeError, OSError, ValueError):  # (no file descriptor: a test's capture)
            pass
        self.run = PIPE_BUF if self.pipe else BUFFER
        self.reached: dict[tuple[str, int], int] = {}
        self.count = 0  # records written whole
        self._pieces: list[bytes] = []
        self._marks: list[tuple[tuple[str, int], int]] = []  # (partition, offset after)
        self._size = 0

    def add(self, batch: Any, pieces: list[bytes]) -> None:
        """The records of ``batch`` (a ``ColumnBatch``) as ``pieces``, one bytes each; written
        when enough are gathered (``flush`` writes the rest)."""
        tp = (batch.topic, batch.partition)
        self._pieces += pieces
        self._marks += [(tp, o + 1) for o in batch.offsets]
        self._size += sum(map(len, pieces))
        if self._size >= BUFFER:
            self.flush()

    def flush(self) -> None:
        """Write every record added, whole; raises ``Stopped`` at a record boundary when a
        signal came meanwhile or the pipe is closed."""
        pieces, marks = self._pieces, self._marks
        self._pieces, self._marks, self._size = [], [], 0
        held, self.guard.busy = self.guard.busy, True
        try:
            i = 0
            while i < len(pieces):
                j, size = i + 1, len(pieces[i])
                while j < len(pieces) and size + len(pieces[j]) <= self.run:
                    size += len(pieces[j])
                    j += 1
                self._stop_if_signalled()
                self._write(pieces[i:j], marks[i:j])
                i = j
            self._stop_if_signalled()
        finally:
            self.guard.busy = held

    def _stop_if_signalled(self) -> None:
        if self.guard.pending is not None:
            signum, self.guard.pending = self.guard.pending, None
            raise Stopped(signum)

    def _write(self, pieces: list[bytes], marks: list[tuple[tuple[str, int], int]]) -> None:
        data = memoryview(b"".join(pieces))
        ends = list(accumulate(map(len, pieces)))
        done = k = 0
        while done < len(data):
            if self.pipe and done == 0:
                self._wait_for_room()
            try:
                if self.fd is None:
                    self.buffer.write(data)
                    self.buffer.flush()
                    done = len(data)
                else:
                    done += os.write(self.fd, data[done:])
            except BrokenPipeError:
                raise Stopped(signal.SIGPIPE) from None
            while k < len(ends) and ends[k] <= done:
                tp, after = marks[k]
                self.reached[tp] = after
                self.count += 1
                k += 1

    def _wait_for_room(self) -> None:
        """Until the pipe can take a write (or the reader is gone: the write then says so);
        a signal meanwhile stops here, before anything of the run is written."""
        assert self.fd is not None  # (a pipe has one)
        p = select.poll()
        p.register(self.fd, select.POLLOUT)
        while not p.poll(int(WAIT_S * 1000)):
            self._stop_if_signalled()
