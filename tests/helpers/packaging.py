"""Building the wheel as a clone would (the ``wheel`` fixture of tests/conftest.py, used by
tests/project/test_packaging.py and tests/spark/test_wheel_install.py)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

PACKAGES = ("engine", "rivven_cli")


def build_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel .`` builds from a copy of the source tree (as a clone has it)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for top in PACKAGES:
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=600)
    (whl,) = dist.glob("rivven-*.whl")
    return whl
