"""``rivven maintain``: the background maintenance of ``rivven serve`` (retention, compaction,
tiering from the topics' configs) without a listener (docs/KAFKA.md, maintenance)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from .common import JsonOpt, fail, open_engine


def maintain(
    once: Annotated[bool, typer.Option(
        "--once", help="One round of each kind now, print what it did, exit (1 when a pass "
                       "failed).")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", "-c", metavar="KEY=VALUE",
        help="A maintenance setting (log.retention.check.interval.ms, log.cleaner.enable, "
             "log.cleaner.backoff.ms, log.cleaner.spark.threshold.bytes, remote.log.manager."
             "task.interval.ms, maintenance.retry.backoff.ms, ...: docs/KAFKA.md); "
             "repeatable.")] = None,
    json: JsonOpt = False,
) -> None:
    """Apply retention, compact compacted topics and tier topics with remote storage in the
    background, as rivven serve does, until Ctrl-C or SIGTERM; each pass is a line on stderr
    (--json: a JSON line on stdout). Other processes keep using the data dir; two maintainers
    (or servers) on one data dir share the work, never one partition at once."""
    from engine.errors import RivvenError
    from engine.kafka import maintenance
    from engine.maintenance.scheduler import MaintenanceConfig

    values: dict[str, str] = {}
    for item in settings or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            fail(f"--set {item!r}: use KEY=VALUE, e.g. --set log.cleaner.backoff.ms=60000",
                 code=2)
        values[k.strip()] = v.strip()
    try:
        cfg = MaintenanceConfig.parse(values)
    except RivvenError as e:
        fail(str(e), code=2)
    if once:
        _once(cfg, json)
        return
    from .interrupts import stop_event
    from .render import info, json_line

    log = log_passes()

    def show(row: Any) -> None:
        if json:
            sys.stdout.write(json_line(row) + "\n")
            sys.stdout.flush()

    stop = stop_event()
    with open_engine() as eng:
        s = maintenance.scheduler(eng, cfg, log, on_pass=show)
        s.start(initial_delay_s=0)
        info(f"rivven maintaining {eng.path} (Ctrl-C stops)")
        sys.stderr.flush()
        stop.wait()
        info("stopping: the passes in progress finish")
        s.stop()
    info("stopped")


def _once(cfg: Any, json: bool) -> None:
    import logging

    from engine.errors import plural
    from engine.kafka import maintenance

    from .render import human_bytes, info, print_json, print_table

    quiet = logging.getLogger("rivven.maintenance.once")  # (the table says it all)
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    with open_engine() as eng:
        rows = maintenance.scheduler(eng, cfg, quiet).run_once()
    failed = [r for r in rows if r["outcome"] == "failed"]
    if json:
        print_json({"passes": rows, "failed": len(failed),
                    "reclaimed_bytes": sum(r["reclaimed_bytes"] for r in rows)})
    elif rows:
        print_table(["KIND", "TOPIC", "PARTITION", "OUTCOME", "RECLAIMED", "DETAIL"],
                    [(r["kind"], r["topic"], r["partition"], r["outcome"],
                      human_bytes(r["reclaimed_bytes"]), r.get("detail", "")) for r in rows],
                    right=("PARTITION", "RECLAIMED"), wrap=("DETAIL",), drop=("DETAIL",))
        info(f"{plural(len(rows), 'pass', 'passes')}, {len(failed)} failed, "
             f"{human_bytes(sum(r['reclaimed_bytes'] for r in rows))} reclaimed")
    else:
        info("nothing to do: no partition is past its retention, its dirty ratio or its local "
             "retention")
    if failed:
        fail(f"{len(failed)} of {plural(len(rows), 'pass', 'passes')} failed: {failed[0]['kind']} of "
             f"{failed[0]['topic']}-{failed[0]['partition']}: {failed[0].get('detail', '')}")


def log_passes() -> Any:
    """The logger of the background maintenance, its lines on stderr with a time and a level
    (``rivven serve`` and ``rivven maintain``)."""
    import logging

    from .render import printable

    class Line(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            record.msg, record.args = printable(record.getMessage()), None
            return super().format(record)

    log = logging.getLogger("rivven.maintenance")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(Line("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.propagate = False
        log.setLevel(logging.INFO)
    return log
