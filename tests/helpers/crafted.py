"""Running the real CLI over crafted files: a clean error (never an internal one), a child
under a real ``RLIMIT_AS`` memory limit, a catalog entry; shared by the tests of crafted
metadata and input (storage, groups, segments, cli)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT

LIMITED = """
import resource, runpy, sys
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["rivven"] + sys.argv[2:]
runpy.run_module("rivven_cli.main", run_name="__main__")
"""
LIMIT_MB = 350  # the CLI itself runs in well under 200 MB of address space


def run_limited(data_dir: str, *args: str, limit_mb: int = LIMIT_MB, input: bytes = b""
                ) -> subprocess.CompletedProcess:
    """The real CLI in a child whose address space is limited to ``limit_mb``."""
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", LIMITED, str(limit_mb), *args], input=input,
                          capture_output=True, env=env, timeout=300, cwd=ROOT)


def clean(r: subprocess.CompletedProcess, code: int) -> str:
    """Assert exit ``code`` with one clean error line (no internal error, no traceback)."""
    err = r.stderr.decode(errors="replace")
    assert r.returncode == code, (r.returncode, err)
    assert "internal error" not in err and "Traceback" not in err and "MemoryError" not in err
    return err


# ================================================================ topics.json
ID = "0123456789abcdef0123456789abcdef"


def entry(**over):
    t = {"id": ID, "partitions": 1, "config": {}, "created_ms": 1}
    t.update(over)
    return t
