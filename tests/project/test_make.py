"""The Makefile's two entry points install what they use and no more: `make demo` sets up
what the example job needs (Java for PySpark, the venv), `make test` adds what only the tests
need (Prometheus's promtool and server); the README says which does what."""

import re
import subprocess

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
    for target in ("test", "quick"):
        assert "scripts/ensure-prometheus.sh" in recipes(target), target


def test_the_readme_says_what_each_command_installs():
    text = (ROOT / "README.md").read_text()
    quick_start = text[text.index("## Quick start"):]
    block = quick_start[:quick_start.index("```\n", quick_start.index("```sh") + 5)]
    demo = re.search(r"^make demo .*$", block, re.M).group(0)
    test = re.search(r"^make test .*$", block, re.M).group(0)
    assert "Java" in demo and "Prometheus" not in demo
    assert "Prometheus" in test
    assert "The demo never needs Prometheus" in quick_start
