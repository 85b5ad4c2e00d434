"""promtool, an HTTP GET and a producer process: shared by tests/unit/metrics and
tests/crash/test_metrics_crash.py."""

import os
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
import urllib.request

import pytest

from helpers import ROOT

needs_prometheus = pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("prometheus") is None,
    reason="Prometheus's promtool and server are installed by `make test` "
           "(scripts/ensure-prometheus.sh)")


def promtool(text: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          timeout=60)


def http_get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200
        return r.read()


PRODUCER = textwrap.dedent("""
    import sys, time
    from engine import Engine, Record
    d, topic, rounds, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    eng = Engine.open(d)
    acked = 0
    for i in range(rounds):
        acked += len(eng.produce(topic, [Record(key=None, value=b"v" * 100)] * 10))
        time.sleep(0.04)
    print("acked", acked, flush=True)
    if mode == "kill":
        time.sleep(600)
    eng.close()
""")


def start_producer(d: str, topic: str, rounds: int, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PRODUCER, d, topic, str(rounds), mode],
                            cwd=ROOT, stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
