"""The Makefile's two entry points install what they use and no more: `make demo` sets up
what the example job needs (Java for PySpark, the venv), `make test` adds what only the tests
need (Prometheus's promtool and server, kcat and Kafka's Java client); the README says which
does what; and `make test` passes from a private checkout."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT


def recipes(target: str) -> str:
    """Every command ``make TARGET`` would run, prerequisites included (-B: as on a fresh
    checkout, whatever is set up here already)."""
    r = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_demo_does_not_install_prometheus_and_the_tests_do():
    demo = recipes("demo")
    assert "scripts/ensure-java.sh" in demo and "examples/quickstart.py" in demo
    assert "ensure-prometheus" not in demo
    assert "ensure-kafka-clients" not in demo
    for target in ("test", "quick"):
        assert "scripts/ensure-prometheus.sh" in recipes(target), target
        assert "scripts/ensure-kafka-clients.sh" in recipes(target), target


def test_the_readme_says_what_each_command_installs():
    text = (ROOT / "README.md").read_text()
    quick_start = text[text.index("## Quick start"):]
    block = quick_start[:quick_start.index("```\n", quick_start.index("```sh") + 5)]
    demo = re.search(r"^make demo .*$", block, re.M).group(0)
    test = re.search(r"^make test .*$", block, re.M).group(0)
    assert "Java" in demo and "Prometheus" not in demo
    assert "Prometheus" in test and "kcat" in test and "Java client" in test
    assert "The demo never needs Prometheus" in quick_start


OTHER_USER = """
import subprocess, sys
from helpers.fs import other_user_python
python, lib = other_user_python()
r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                    "import rivven_cli.main, engine; print(engine.__file__)"],
                   capture_output=True, text=True, env={"PYTHONPATH": lib}, cwd="/")
print(lib, r.returncode, r.stdout.strip(), r.stderr.strip()[-300:])
"""


def test_tests_that_run_rivven_as_another_user_work_from_a_private_checkout(tmp_path):
    """`make test` passes wherever a user clones (issue 29, item 15): from a checkout in a 0700
    dir, the tests that run ``rivven`` as uid 65534 (tests/unit/tiering/test_cache_trust.py)
    give that user this checkout's code in a copy it can read."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as another user")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    checkout = private / "rivven"
    for name in ("engine", "rivven_cli", "tests"):
        shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", checkout)
    r = subprocess.run([sys.executable, "-c", OTHER_USER], capture_output=True, text=True,
                       cwd=checkout, timeout=600,
                       env=dict(os.environ, PYTHONPATH=f"{checkout}:{checkout / 'tests'}"))
    assert r.returncode == 0, r.stderr
    lib, code, engine_file, err = (r.stdout.split(" ", 3) + [""])[:4]
    assert code == "0", err
    assert engine_file == f"{lib}/engine/__init__.py"  # this checkout's code, not another's
    assert not lib.startswith(str(private))
