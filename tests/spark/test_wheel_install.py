"""The wheel installed in a fresh venv (not editable), run from outside the source tree: both
Spark jobs work (``rivven spark compact`` and ``rivven spark tier`` on local[2])."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.mark.slow
def test_pip_install_then_spark_compact_and_tier(wheel: Path, tmp_path: Path):
    """A fresh venv with the wheel installed (not editable; its dependencies are this venv's,
    so no download), run from outside the source tree: both Spark jobs work."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies: a path entry (not a site dir: this venv's editable finder stays out)
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   timeout=300)
    where = subprocess.run([py, "-c", "import engine, engine.spark.job; print(engine.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(site), where  # the installed copy, not the source tree
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RIVVEN_DATA_DIR")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    data = str(tmp_path / "data")

    def rivven(*args: str, stdin: bytes | None = None) -> str:
        r = subprocess.run([str(venv / "bin" / "rivven"), "--data-dir", data, *args],
                           input=stdin, capture_output=True, env=env, cwd=tmp_path, timeout=600)
        assert r.returncode == 0, f"rivven {' '.join(args)}: {r.stderr.decode()[-3000:]}"
        return r.stdout.decode()

    rivven("topic", "create", "c", "-c", "cleanup.policy=compact", "-c", "segment.bytes=2000",
           "-c", "min.cleanable.dirty.ratio=0.01")
    lines = b"".join(b"k%d\tv%d\n" % (i % 10, i) for i in range(300))
    rivven("produce", "c", "-K", "\t", "--batch-records", "10", stdin=lines)  # many segments
    out = json.loads(rivven("spark", "compact", "c", "--master", "local[2]", "--json"))
    assert out["partitions"] and out["partitions"][0]["records_out"] < 100
    kept = [line.split("=") for line in rivven("consume", "c", "-f", "%k=%v\\n").split()]
    assert len(kept) < 100
    assert dict(kept) == {f"k{k}": f"v{290 + k}" for k in range(10)}  # each key's last value

    rivven("topic", "create", "t", "-c", "remote.storage.enable=true", "-c",
           "segment.bytes=1500", "-c", "local.retention.bytes=3000")
    rivven("produce", "t", "--batch-records", "20",
           stdin=b"".join(b"r%05d\n" % i for i in range(600)))
    out = json.loads(rivven("spark", "tier", "t", "--master", "local[2]", "--json"))
    assert out["tasks"] > 0 and out["partitions"][0]["uploaded"]
    assert rivven("consume", "t").split() == [f"r{i:05d}" for i in range(600)]
    rivven("segment", "verify", "--cold")
