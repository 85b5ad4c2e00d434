"""``rivven`` at a terminal: a pseudo-terminal as stdin and controlling terminal (stdout and
stderr pipes), the answers typed after each prompt (password prompts, confirmations)."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import termios
import time

from helpers import RIVVEN, ROOT


def on_a_terminal(data_dir, *args, answers):
    """``rivven ARGS`` with a pseudo-terminal as stdin and controlling terminal (stdout and
    stderr pipes); ``answers`` typed one line at a time after each prompt. (exit code,
    stdout, stderr, what the terminal echoed)."""
    master, slave = os.openpty()

    def controlling_tty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([*RIVVEN, *args], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            preexec_fn=controlling_tty)
    os.close(slave)
    echoed = b""
    prompts = b""
    for answer in answers:
        deadline = time.monotonic() + 60
        while prompts.count(b":") < len(echoed.split(b"\r\n")) and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.2)
            if ready:
                prompts += os.read(proc.stderr.fileno(), 4096)
        os.write(master, answer + b"\n")
        echoed += b"\r\n"
    out, err = proc.communicate(timeout=120)
    try:
        while select.select([master], [], [], 0.1)[0]:
            echoed_now = os.read(master, 4096)
            if not echoed_now:
                break
            echoed += echoed_now
    except OSError:
        pass
    os.close(master)
    return proc.returncode, out, prompts + err, echoed
