"""Crash points for tests: ``RIVVEN_FAILPOINT=<name>`` kills the process (SIGKILL) when it
reaches ``failpoint("<name>")``, so a test can crash a real command at an exact step;
``<name>@<n>`` kills it the n-th time it gets there (a crash in the middle of a stream)."""

from __future__ import annotations

import os
import signal

_reached: dict[str, int] = {}


def failpoint(name: str) -> None:
    want = os.environ.get("RIVVEN_FAILPOINT")
    if want is None:
        return
    if want == name:
        os.kill(os.getpid(), signal.SIGKILL)
    point, _, nth = want.partition("@")
    if point == name and nth.isdigit():
        _reached[name] = n = _reached.get(name, 0) + 1
        if n >= int(nth):
            os.kill(os.getpid(), signal.SIGKILL)
