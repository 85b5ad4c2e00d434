"""Crash points for tests: ``RIVVEN_FAILPOINT=<name>`` kills the process (SIGKILL) when it
reaches ``failpoint("<name>")``, so a test can crash a real command at an exact step."""

from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    if os.environ.get("RIVVEN_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
