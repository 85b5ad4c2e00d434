"""A real Prometheus server scraping ``rivven metrics serve`` while producers in other
processes run and one is killed -9: the counts grow to exactly what was acknowledged, the
killed producer's are counted once, and the endpoint stays up."""

import json
import os
import signal
import socket
import subprocess
import textwrap
import time
import urllib.parse
import urllib.request

from helpers import RIVVEN, ROOT
from helpers.metrics import http_get, needs_prometheus, promtool, start_producer

from engine import Engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, timeout: float = 30, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
            if got:
                return got
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {fn}")
        time.sleep(every)


def acked(p: subprocess.Popen) -> int:
    line = p.stdout.readline().split()
    assert line[0] == b"acked", line
    return int(line[1])


class Prometheus:
    """A real Prometheus server (Debian's) scraping ``target`` every second."""

    def __init__(self, tmp_path, target: str) -> None:
        self.port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(textwrap.dedent(f"""
            global: {{scrape_interval: 1s, evaluation_interval: 1s}}
            scrape_configs:
              - job_name: rivven
                static_configs: [{{targets: ["{target}"]}}]
        """))
        self.log = open(tmp_path / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=self.log)
        wait_for(lambda: http_get(f"http://127.0.0.1:{self.port}/-/ready"), timeout=60)

    def query(self, q: str) -> float | None:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        doc = json.loads(http_get(url))
        assert doc["status"] == "success", doc
        result = doc["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


@needs_prometheus
def test_prometheus_scrapes_serve_while_producers_run_and_one_is_killed(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("a", 2)
        eng.create_topic("b", 1)
        eng.create_topic("k", 1)
    port = free_port()
    serve = subprocess.Popen([*RIVVEN, "metrics", "serve", "--port", str(port)], cwd=ROOT,
                             stderr=subprocess.PIPE,
                             env=dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT)))
    prom = None
    try:
        assert b"serving" in serve.stderr.readline()
        prom = Prometheus(tmp_path, f"127.0.0.1:{port}")
        wait_for(lambda: prom.query('up{job="rivven"}') == 1)
        total = 'sum(rivven_records_appended_total{topic=~"a|b"}) or vector(0)'
        pa = start_producer(data_dir, "a", 120, "exit")
        pb = start_producer(data_dir, "b", 120, "exit")
        seen = []
        while pa.poll() is None or pb.poll() is None:
            seen.append(prom.query(total))
            time.sleep(0.5)
        n = acked(pa) + acked(pb)
        assert n == 2400
        # what the producers acknowledged, exactly, once the next scrape has it
        wait_for(lambda: prom.query(total) == n)
        values = [v for v in seen if v is not None]
        assert values == sorted(values) and len(set(v for v in values if 0 < v < n)) >= 1
        assert prom.query("sum(rivven_wal_fsync_duration_seconds_count)") > 0
        assert prom.query("sum(rivven_wal_fsync_duration_seconds_bucket{le=\"+Inf\"})") > 0

        pk = start_producer(data_dir, "k", 30, "kill")  # acknowledged, then killed -9
        k = acked(pk)
        pk.send_signal(signal.SIGKILL)
        pk.wait(30)
        killed = 'sum(rivven_records_appended_total{topic="k"})'
        wait_for(lambda: prom.query(killed) == k)
        time.sleep(2.5)  # more scrapes after the death: the endpoint stays healthy
        assert prom.query('up{job="rivven"}') == 1
        assert prom.query(killed) == k and prom.query(total) == n  # merged, never twice
        assert prom.query('rivven_metrics_processes{state="live"}') == 0
        body = http_get(f"http://127.0.0.1:{port}/metrics")
        assert promtool(body).returncode == 0
    finally:
        if prom is not None:
            prom.close()
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0 and b"stopped" in err and b"Traceback" not in err
