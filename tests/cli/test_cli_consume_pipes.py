"""``rivven consume`` into a pipe, through real processes and real pipes: a reader that goes
away (``| head -1``) and Ctrl-C while the pipe is full. The group commits no further than the
records written whole into the pipe, the exit status is 141 as produce's, and no line is ever
cut (the output is whole records, or nothing)."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time

import pytest
from helpers import ROOT

from engine import Engine

RIVVEN = [sys.executable, "-m", "rivven_cli"]
F_GETPIPE_SZ = 1032  # (fcntl.F_GETPIPE_SZ from Python 3.10, on Linux)
RECORDS = 20000
VALUE = b"v" * 100


@pytest.fixture
def filled(data_dir):
    """A topic of 20,000 records of 100 bytes: ~2.5 MB of JSON lines, far more than a pipe
    holds."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        for start in range(0, RECORDS, 5000):
            eng.produce_batch("t", [VALUE] * 5000, timestamps=list(range(start, start + 5000)))
    return data_dir


def start(data_dir, *args):
    return subprocess.Popen([*RIVVEN, "consume", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, RIVVEN_DATA_DIR=data_dir,
                                                             PYTHONPATH=str(ROOT)), cwd=ROOT)


def committed(data_dir, group):
    with Engine.open(data_dir, read_only=True) as eng:
        return eng.groups.committed(group).get(("t", 0), 0)


def whole_lines(data: bytes) -> list[dict]:
    """The JSON records of ``data``; it must end with a whole line (or be empty)."""
    assert data == b"" or data.endswith(b"\n"), f"a cut line at the end: ...{data[-60:]!r}"
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def line_size(offset: int) -> int:
    return len(json.dumps({"topic": "t", "partition": 0, "offset": offset, "timestamp": offset,
                           "key": None, "value": VALUE.decode(), "headers": []},
                          separators=(",", ":"))) + 1


def read_once_and_close(proc) -> tuple[bytes, int]:
    """What ``head -1`` does: one read, then the pipe closed; returns what was read and how
    many bytes the pipe holds at most."""
    fd = proc.stdout.fileno()
    capacity = fcntl.fcntl(fd, F_GETPIPE_SZ)
    first = os.read(fd, 65536)
    proc.stdout.close()
    return first, capacity


@pytest.mark.parametrize("group", [True, False])
def test_a_closed_pipe_exits_141_and_the_group_commits_only_what_reached_it(filled, group):
    """consume --json -g G | head -1 committed a whole poll (5000 records) and exited 0."""
    proc = start(filled, "t", "--json", *(["-g", "G"] if group else []))
    first, capacity = read_once_and_close(proc)
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert first.count(b"\n") >= 1
    if group:
        done = committed(filled, "G")
        # at most what the reader took and what the pipe held when it closed, in whole lines
        most = (len(first) + capacity) // line_size(0)
        assert first.count(b"\n") <= done <= most, (done, most)
        assert "group G committed" in err and "-c N" in err, err


def test_a_count_commits_exactly_that_many(filled):
    """kcat's -c N: N records printed and N committed, whatever the reader then does."""
    proc = start(filled, "t", "--json", "-g", "G", "-c", "7")
    first, _ = read_once_and_close(proc)
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 0, err
    assert [r["offset"] for r in whole_lines(first)] == list(range(7))
    assert committed(filled, "G") == 7


def wait_until_full(proc, timeout=60):
    """Until the pipe holds (nearly) all it can and stays so: the writer is blocked."""
    fd = proc.stdout.fileno()
    capacity = fcntl.fcntl(fd, F_GETPIPE_SZ)
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        held = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
        if held != last:
            last, since = held, time.monotonic()
        elif held > capacity // 2 and time.monotonic() - since > 0.5:
            return
        assert time.monotonic() < deadline, "the pipe never filled"
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)


@pytest.mark.parametrize("group", [True, False])
def test_ctrl_c_with_the_pipe_full_leaves_whole_lines_and_commits_them(filled, group):
    """Ctrl-C while the pipe is full (the reader not reading) cut a line short: '...\\n20'."""
    proc = start(filled, "t", "--json", *(["-g", "G"] if group else []))
    wait_until_full(proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 130, err
    records = whole_lines(out)
    assert [r["offset"] for r in records] == list(range(len(records)))
    assert 0 < len(records) < RECORDS
    if group:
        assert committed(filled, "G") == len(records), err
