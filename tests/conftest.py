import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RIVVEN = [sys.executable, "-m", "rivven_cli.main"]


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data")


def run_rivven(data_dir: str, *args: str, input: bytes | None = None, check: bool = False,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real ``rivven`` command in a subprocess."""
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*RIVVEN, *args], input=input, capture_output=True, env=env,
                          timeout=timeout, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"rivven {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc


@pytest.fixture
def rivven(data_dir: str):
    def call(*args: str, **kw):
        return run_rivven(data_dir, *args, **kw)
    return call


def flip(path: str, pos: int, bit: int = 0) -> None:
    """Flip one bit of a file in place (a disk that went bad)."""
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ (1 << bit)]))
