"""What tests of every folder share: the repository root, running the real ``rivven`` command
(in a pipe or on a pseudo-terminal), a flipped bit, master keys and keyring files. ``tests/`` is
on ``sys.path`` (pyproject.toml: ``pythonpath``): ``from helpers import ROOT, run_rivven``;
what one subject's tests and its crash tests share is in ``helpers.<subject>``."""

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # (tests/helpers/ -> the repository)
RIVVEN = [sys.executable, "-m", "rivven_cli.main"]


def run_rivven(data_dir: str, *args: str, input: bytes | None = None, check: bool = False,
               timeout: float = 120, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
    """Run the real ``rivven`` command in a subprocess (``env``: more environment)."""
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT), **(env or {}))
    proc = subprocess.run([*RIVVEN, *args], input=input, capture_output=True, env=env,
                          timeout=timeout, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"rivven {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc


def produce_into_head(data_dir: str, *args: str, lines: int = 300000
                      ) -> tuple[bytes, int, str]:
    """``seq 1 LINES | rivven produce ARGS | head -2``, real processes and a real broken pipe:
    what head printed, rivven's exit code and its stderr."""
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    seq = subprocess.Popen(["seq", "1", str(lines)], stdout=subprocess.PIPE)
    prod = subprocess.Popen([*RIVVEN, "produce", *args], stdin=seq.stdout,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    head = subprocess.Popen(["head", "-2"], stdin=prod.stdout, stdout=subprocess.PIPE)
    seq.stdout.close()
    prod.stdout.close()
    shown = head.communicate(timeout=120)[0]
    err = prod.communicate(timeout=120)[1].decode()
    seq.kill()
    seq.wait()
    return shown, prod.returncode, err


def flip(path: str, pos: int, bit: int = 0) -> None:
    """Flip one bit of a file in place (a disk that went bad)."""
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ (1 << bit)]))


def run_rivven_on_a_terminal(data_dir: str, *args: str, env: dict[str, str] | None = None,
                             timeout: float = 600) -> tuple[int, bytes, list[str]]:
    """Run the real ``rivven`` with its stderr on a pseudo-terminal (stdout a pipe), as a
    person at a terminal sees it: ``(exit code, stdout, frames)``, the frames being what the
    terminal showed, escape codes removed, one entry per redrawn line (repeats dropped)."""
    import re
    import threading

    master, slave = os.openpty()
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT), COLUMNS="160",
               TERM="xterm", **(env or {}))
    proc = subprocess.Popen([*RIVVEN, *args], stdout=subprocess.PIPE, stderr=slave, env=env,
                            cwd=ROOT)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # (EIO: every writer is gone)
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out = proc.communicate(timeout=timeout)[0]
    finally:
        proc.kill()
        reader.join(10)
        os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))
    frames: list[str] = []
    for line in re.split(r"[\r\n]+", text):
        line = line.strip()
        if line and line not in frames[-1:]:
            frames.append(line)
    return proc.returncode, out, frames


def new_key() -> str:
    """A master key as a keyring file holds it: base64 of 32 random bytes."""
    return base64.b64encode(os.urandom(32)).decode()


def write_keyring(path: str, keys: dict[str, str], mode: int = 0o600) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(keys, f)
    os.chmod(path, mode)
    return path
