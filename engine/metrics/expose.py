"""The metrics document in Prometheus's formats, through ``prometheus_client``: the text
exposition, a node_exporter textfile (written to a temporary file, then renamed), and an
HTTP ``/metrics`` endpoint that gathers afresh at each scrape."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client import write_to_textfile as _write_textfile
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from .collect import failed
from .results import Metrics

Source = Callable[[], Metrics]


def families(doc: Metrics) -> list[Metric]:
    out: list[Metric] = []
    for name, m in doc.items():
        labels = m["labels"]
        kind = m["type"]
        if kind == "counter":
            fam: Any = CounterMetricFamily(name, m["help"], labels=labels)
        elif kind == "histogram":
            fam = HistogramMetricFamily(name, m["help"], labels=labels)
        else:
            fam = GaugeMetricFamily(name, m["help"], labels=labels)
        for s in m["samples"]:
            values = [s["labels"][k] for k in labels]
            if kind == "histogram":
                fam.add_metric(values, buckets=list(s["buckets"].items()), sum_value=s["sum"])
            else:
                fam.add_metric(values, s["value"])
        out.append(fam)
    return out


class _Collector:
    def __init__(self, source: Source) -> None:
        self.source = source

    def collect(self) -> list[Metric]:
        try:
            return families(self.source())
        except Exception as e:  # noqa: BLE001 - a scrape reports, never kills the endpoint
            sys.stderr.write(f"error: scrape failed: {e}\n")
            return families(failed())


def registry(source: Source) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(source))
    return reg


def text(doc: Metrics) -> bytes:
    """The Prometheus text exposition format (0.0.4) of a metrics document."""
    return generate_latest(registry(lambda: doc))


def write_textfile(path: str, doc: Metrics) -> None:
    """node_exporter's textfile collector: ``path`` replaced whole (temporary file, rename),
    so the collector never reads half a file."""
    _write_textfile(path, registry(lambda: doc))


class Server:
    """A running ``/metrics`` endpoint (a daemon thread); ``close()`` stops it."""

    def __init__(self, source: Source, port: int, bind: str) -> None:
        self.httpd, self.thread = start_http_server(port, bind, registry(source))
        self.bind = bind
        self.port: int = self.httpd.server_port

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(engine: Any, port: int = 9464, bind: str = "127.0.0.1") -> Server:
    """Serve ``engine``'s metrics (``Engine.metrics()``, gathered at each scrape) on
    ``http://bind:port/metrics`` from a background thread, for an application that embeds
    the engine; ``port=0`` picks a free port (``Server.port``). Returns the running server:
    ``close()`` it, or use it as a context manager."""
    def source() -> Metrics:
        problems: list[str] = []
        doc: Metrics = engine.metrics(problems)
        for line in problems:  # (the scrape goes on: the file is set aside)
            sys.stderr.write(f"warning: {line}\n")
        return doc

    return Server(source, port, bind)
