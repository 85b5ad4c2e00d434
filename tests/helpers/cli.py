"""Running the ``rivven`` command in this process (Typer's ``CliRunner``), as ``run_rivven`` runs
it in a subprocess: the same arguments, data dir (``RIVVEN_DATA_DIR``), working directory and
program name, and a result with the same ``returncode``, ``stdout`` and ``stderr`` (bytes), so a
test of an input error costs no interpreter start.

What a real process does that this must do too: stdin is a real file (``produce`` reads its
file descriptor), an exception that escapes is a traceback on stderr and exit 1, and nothing the
command changes in the interpreter outlives it (the ``rivven`` logger's handlers, signal
handlers, the environment, the working directory). What only a real process shows stays with
``run_rivven``: a terminal, real signals, a broken pipe, start-up time, ``PYTHONPATH``, memory
limits.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from helpers import ROOT

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


@dataclass
class Ran:
    """What ``run_in_process`` saw: as a ``subprocess.CompletedProcess`` of ``run_rivven``."""

    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


def run_in_process(data_dir: str, *args: str, input: bytes | None = None, check: bool = False,
                   env: dict[str, str] | None = None) -> Ran:
    """Run ``rivven ARGS`` in this process over ``data_dir`` (``env``: more environment)."""
    from typer.testing import CliRunner

    from rivven_cli.main import app

    class Runner(CliRunner):
        @contextlib.contextmanager
        def isolation(self, input: Any = None, env: Any = None, color: bool = False
                      ) -> Iterator[Any]:
            with super().isolation(None, env, color) as streams, \
                    tempfile.TemporaryFile() as stdin:
                stdin.write(input or b"")  # (a real file: os.read(sys.stdin.fileno()) works)
                stdin.seek(0)
                sys.stdin = io.TextIOWrapper(stdin, encoding=self.charset)
                yield streams

    with _interpreter_kept():
        r = Runner().invoke(app, list(args), input=input, prog_name="rivven",
                            env={"RIVVEN_DATA_DIR": data_dir, **(env or {})})
    stderr = r.stderr_bytes
    code = r.exit_code
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        # what the interpreter does with an exception nothing caught
        stderr += "".join(traceback.format_exception(r.exception)).encode()
        code = 1
    if check and code != 0:
        raise AssertionError(f"rivven {' '.join(args)} failed: {stderr.decode()}")
    return Ran(args, code, r.stdout_bytes, stderr)


@contextlib.contextmanager
def _interpreter_kept() -> Iterator[None]:
    """A command as in a fresh interpreter, started in the repository (as ``run_rivven``):
    the ``rivven`` logger without handlers; afterwards the logger, signal handlers,
    environment and working directory are what they were."""
    logger = logging.getLogger("rivven")
    kept = (logger.handlers[:], logger.propagate, logger.level)
    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    environ = dict(os.environ)
    cwd = os.getcwd()
    logger.handlers, logger.propagate, logger.level = [], True, logging.NOTSET
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(cwd)
        logger.handlers, logger.propagate, logger.level = kept
        for s, h in handlers.items():
            if h is not None:  # (None: set outside Python, cannot be put back)
                signal.signal(s, h)
        os.environ.clear()
        os.environ.update(environ)
