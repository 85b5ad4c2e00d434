"""Producing and consuming with the real ``rivven``, its errors, a real process holding a
flock, and ``rivven`` run as another local user: shared by tests/unit/fs,
tests/unit/storage/test_topic_names.py, tests/unit/tiering/test_cache_trust.py and
tests/crash/test_locks_crash.py."""

import atexit
import contextlib
import functools
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib

from helpers import ROOT, run_rivven

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


# ------------------------------------------------------------------ another local user
# The checkout may be private (cloned into a 0700 home or a `mktemp -d` dir), and so may its
# venv: another user can read neither. What that user needs to run this checkout's `rivven` is
# set up once per session in a temp dir every user can reach: the code (engine/, rivven_cli/)
# and the packages it depends on, hard-linked where the files are readable to all, else copied.
SKIPPED_DISTS = {"pyspark", "py4j"}  # (the Spark jobs are never run as another user)


def _requirements(name: str) -> list[str]:
    """The names ``name``'s installed distribution requires (extras left out)."""
    try:
        reqs = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in reqs if "extra ==" not in r]


def _link_or_copy(src: str, dst: str) -> None:
    if os.stat(src).st_mode & 0o004:
        try:
            os.link(src, dst)
            return
        except OSError:  # (another file system)
            pass
    shutil.copy2(src, dst)
    os.chmod(dst, 0o755 if os.access(src, os.X_OK) else 0o644)


def _copy_tree(src: str, dst: str) -> None:
    shutil.copytree(src, dst, copy_function=_link_or_copy, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


def _other_user_can_run(python: str, lib: str, uid: int) -> bool:
    want = "{}.{}".format(*sys.version_info[:2])
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python,
                        "-c", "import sys, rivven_cli.main; print('{}.{}'.format(*sys.version_info))"],
                       capture_output=True, text=True, cwd="/", timeout=60,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": lib})
    return r.returncode == 0 and r.stdout.strip() == want


@functools.cache
def _readable_copy() -> str:
    """A world-readable temp dir outside the checkout holding this checkout's code and the
    packages it needs (once per session, removed at exit): the PYTHONPATH of another user."""
    base = tempfile.mkdtemp(prefix="rivven-other-user-")
    atexit.register(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    lib = os.path.join(base, "lib")
    for package in ("engine", "rivven_cli"):
        _copy_tree(str(ROOT / package), os.path.join(lib, package))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    todo = [re.match(r"[A-Za-z0-9._-]+", d).group(0) for d in deps]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen or key in SKIPPED_DISTS:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # (required on another platform only, e.g. colorama; the check below
            #           names what is missing if it was needed)
        for f in dist.files or []:
            src = str(dist.locate_file(f))
            if f.parts[0] == ".." or not os.path.isfile(src):
                continue  # (scripts in bin/, files the RECORD names but pip left out)
            dst = os.path.join(lib, *f.parts)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.exists(dst):
                _link_or_copy(src, dst)
        todo += _requirements(name)
    subprocess.run([sys.executable, "-m", "compileall", "-q", lib], check=True, timeout=600,
                   capture_output=True)
    for root, dirs, _ in os.walk(base):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    return lib


@functools.cache
def other_user_python(uid: int = 65534) -> tuple[str, str]:
    """``(interpreter, PYTHONPATH)`` with which user ``uid`` runs this checkout's code
    (``interpreter -m rivven_cli.main``) wherever the checkout is. Raises AssertionError
    naming what is missing."""
    lib = _readable_copy()
    # an interpreter of this Python version the other user can run: this one may be in a
    # private venv or a private home (pyenv)
    candidates = [sys.executable, os.path.realpath(sys.executable),
                  getattr(sys, "_base_executable", sys.executable),
                  shutil.which("python{}.{}".format(*sys.version_info[:2])) or "", "/usr/bin/python3"]
    for python in dict.fromkeys(c for c in candidates if c):
        if _other_user_can_run(python, lib, uid):
            return python, lib
    raise AssertionError(
        f"uid {uid} can run none of {candidates} with the code copied to {lib}: is "
        f"{tempfile.gettempdir()} reachable by other users (else set TMPDIR to a dir that is)?")
