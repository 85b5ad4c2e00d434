"""``rivven schema serve`` in a real process (the registry's crash and CLI tests): started
on a port, its log in a file, killed with -9 or stopped with SIGTERM; ``post``/``get``: one
JSON request over http.client."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from helpers import RIVVEN, ROOT

READY = re.compile(r"on (https?)://(\S+):(\d+) \(Ctrl-C stops\)")
CT = "application/vnd.schemaregistry.v1+json"


class Registry:
    def __init__(self, proc: subprocess.Popen, log_path: Path, host: str, port: int) -> None:
        self.proc, self.log_path, self.host, self.port = proc, log_path, host, port

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)


def start_registry(data_dir: str, port: int = 0, *args: str, timeout: float = 60,
                   env: dict[str, str] | None = None) -> Registry:
    log_path = Path(data_dir).parent / f"registry-{os.getpid()}-{time.monotonic_ns()}.log"
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*RIVVEN, "--data-dir", data_dir, "schema", "serve", "--listen",
                                 f"127.0.0.1:{port}", *args], stdout=log, stderr=log, env=e,
                                cwd=ROOT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = READY.search(log_path.read_text(errors="replace"))
        if m:
            return Registry(proc, log_path, m.group(2), int(m.group(3)))
        if proc.poll() is not None:
            raise AssertionError(f"rivven schema serve exited {proc.returncode}: "
                                 f"{log_path.read_text(errors='replace')}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"rivven schema serve did not start: {log_path.read_text()}")


def request(port: int, method: str, path: str, body: Any = None,
            timeout: float = 30) -> tuple[int, Any]:
    """``(status, JSON answer)``; OSError when the server is not there."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": CT} if data else {})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()
