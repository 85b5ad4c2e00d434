"""Packaging: the wheel ``pip wheel .`` builds from a clone holds every subpackage, the
compiled C loops and the ``rivven`` command; ``lmdb`` is a benchmark extra only. (The
installed wheel running both Spark jobs: tests/spark/test_wheel_install.py.)"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from helpers import ROOT
from helpers.packaging import PACKAGES


def _sources() -> list[str]:
    """Every module of the project, as a path inside a wheel."""
    return sorted(str(p.relative_to(ROOT)) for top in PACKAGES for p in (ROOT / top).rglob("*.py")
                  if "__pycache__" not in p.parts)


def test_the_wheel_holds_every_subpackage_and_the_command(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [m for m in _sources() if m not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert "engine/spark/job.py" in names and "engine/spark/tier_job.py" in names
    # the produce path's C loops, compiled by the normal build (engine.format.native)
    assert [n for n in names if n.startswith("engine/format/fastcodec") and n.endswith(".so")]
    (ep,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "rivven = rivven_cli.main:main" in zipfile.ZipFile(wheel).read(ep).decode()


def test_lmdb_is_a_benchmark_extra_not_a_dependency():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("lmdb") for d in meta["dependencies"])
    assert any(d.startswith("lmdb") for d in meta["optional-dependencies"]["bench"])
    r = subprocess.run([sys.executable, "-c", "import sys, engine, rivven_cli.main; "
                        "print('lmdb' in sys.modules)"], capture_output=True, text=True,
                       cwd=ROOT, check=True)
    assert r.stdout.strip() == "False"
