"""Producing and consuming with the real ``rivven``, its errors, and a real process holding a
flock: shared by tests/unit/fs, tests/unit/storage/test_topic_names.py and
tests/crash/test_locks_crash.py."""

import contextlib
import json
import os
import signal
import subprocess
import sys

from helpers import run_rivven

IS_ROOT = os.geteuid() == 0
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def produce(data_dir: str, topic: str, values: list[str], *extra: str
            ) -> subprocess.CompletedProcess:
    return run_rivven(data_dir, *extra, "produce", topic, input="\n".join(values).encode() + b"\n")


def consume_all(data_dir: str, topic: str) -> list[str]:
    r = run_rivven(data_dir, "consume", topic, "-o", "beginning", "--json", check=True)
    return [json.loads(line)["value"] for line in r.stdout.decode().splitlines()]


def no_internal_error(r: subprocess.CompletedProcess) -> None:
    err = r.stderr.decode()
    assert "internal error" not in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------ lock waits
HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)  # read-only is enough to flock
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def holder(path: str, prefix: list[str] = (), python: str = sys.executable):
    """A real process holding an exclusive flock on ``path`` until the block ends."""
    p = subprocess.Popen([*prefix, python, "-c", HOLD, path], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline()
        assert line == b"held\n", p.stderr.read()
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()
