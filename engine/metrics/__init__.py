"""Layer 10 — metrics as Prometheus sees them (docs/METRICS.md): every process's counters
(engine.counters) and the data dir's state, gathered at each scrape; the text format, a
node_exporter textfile and an HTTP endpoint, all through ``prometheus_client``.

May import: ``engine.wal``, ``engine.storage``, ``engine.counters`` and the base modules.

It is handed the ``Engine`` whose data dir it describes; ``import engine`` never imports this
package (nor ``prometheus_client``): ``Engine.metrics()`` does on first use.

- ``state``: the data dir's gauges: partitions, groups, WAL streams, transactions
- ``collect``: both sources as one document (``Engine.metrics()``, ``rivven metrics --json``)
- ``expose``: the document as Prometheus text; ``write_textfile``; ``serve`` (also as
  ``engine.metrics.serve`` and so on, imported on first use)
- ``rates``: what happened between two documents (``rivven top``)
- ``results``: the document and the rates, typed
"""

from typing import Any

__all__ = ["Server", "serve", "text", "write_textfile"]


def __getattr__(name: str) -> Any:
    # prometheus_client (~0.1 s to import) comes with the first use of the exposition, not
    # with Engine.metrics(), which needs none of it
    if name in __all__:
        from . import expose

        return getattr(expose, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
