"""``rivven serve`` in a real process for the Kafka-protocol tests: started on a free port,
its log kept in a file, stopped with SIGTERM (or killed with -9 by crash tests)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from helpers import RIVVEN, ROOT

READY = re.compile(r"on (\S+):(\d+) \(Kafka protocol")
# one line per listener when there are several, or one not PLAINTEXT, before READY's
LISTENER = re.compile(r"^listener (\S+) \((\w+)\) on \w+://(\S+):(\d+)", re.M)
# what every test server sets: no wait for more members of a new group (Kafka's test brokers
# set group.initial.rebalance.delay.ms=0 too)
FAST = ("group.initial.rebalance.delay.ms=0",)


class Served:
    """A running ``rivven serve``: ``bootstrap`` is HOST:PORT (the first listener's),
    ``listeners`` each listener's by name (``served.listeners["SSL"]``), ``log()`` its
    stderr."""

    def __init__(self, data_dir: str, proc: subprocess.Popen, log_path: Path,
                 bootstrap: str, listeners: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.proc = proc
        self.log_path = log_path
        self.bootstrap = bootstrap
        self.listeners = listeners or {"PLAINTEXT": bootstrap}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait: the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def start_server(data_dir: str, *args: str, settings: tuple[str, ...] = FAST,
                 env: dict[str, str] | None = None, log_dir: str | None = None,
                 timeout: float = 60, listeners: tuple[str, ...] = ()) -> Served:
    """``rivven --data-dir DATA serve --listen 127.0.0.1:0 ARGS``, once it listens; with
    ``listeners`` (``"SSL://127.0.0.1:0"``, ...) ``--listener`` each instead of ``--listen``."""
    log_path = Path(log_dir or data_dir).parent / f"serve-{os.getpid()}-{time.monotonic_ns()}.log"
    sets = [a for s in settings for a in ("--set", s)]
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    with open(log_path, "wb") as log:
        where = ([a for x in listeners for a in ("--listener", x)] if listeners
                 else ["--listen", "127.0.0.1:0"])
        proc = subprocess.Popen([*RIVVEN, "--data-dir", data_dir, "serve", *where,
                                 *sets, *args], stdout=log, stderr=log, env=e, cwd=ROOT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        m = READY.search(text)
        if m:
            named = {x.group(1): f"{x.group(3).strip('[]')}:{x.group(4)}"
                     for x in LISTENER.finditer(text)}
            return Served(data_dir, proc, log_path, f"{m.group(1)}:{m.group(2)}", named or None)
        if proc.poll() is not None:
            raise AssertionError(f"rivven serve exited {proc.returncode}: "
                                 f"{log_path.read_text(errors='replace')}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"rivven serve did not start in {timeout} s: "
                         f"{log_path.read_text(errors='replace')}")
