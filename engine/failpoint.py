"""Crash points for tests: ``RIVVEN_FAILPOINT=<name>`` kills the process (SIGKILL) when it
reaches ``failpoint("<name>")``, so a test can crash a real command at an exact step;
``<name>@<n>`` kills it the n-th time it gets there (a crash in the middle of a stream)."""

from __future__ import annotations

import os
import signal

_reached: dict[str, int] = {}
# (the environment's own dict: a lookup there costs a tenth of os.environ.get, which the
# produce path pays several times per call; a test may arm a failpoint at any time)
_data = getattr(os.environ, "_data", None)
_KEY = b"RIVVEN_FAILPOINT"


def failpoint(name: str) -> None:
    if _data is not None:
        if _KEY not in _data:
            return
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
