"""The background maintenance of ``rivven serve`` and ``rivven maintain`` (docs/KAFKA.md,
maintenance): engine.maintenance.scheduler over an engine, its compactions past
``log.cleaner.spark.threshold.bytes`` run as Spark jobs (engine.spark.submit)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..maintenance.results import MaintenancePass
from ..maintenance.scheduler import MaintenanceConfig, Scheduler


def scheduler(engine: Any, cfg: MaintenanceConfig, log: logging.Logger | None = None,
              on_pass: Callable[[MaintenancePass], None] | None = None) -> Scheduler:
    """The scheduler of a writable ``engine`` (not started)."""

    def spark(topic: str, partition: int) -> dict[str, Any]:
        from ..spark import submit  # (only for a partition past the threshold)

        return submit.compact(engine, topic, [partition], master=cfg.log_cleaner_spark_master)

    return Scheduler(engine.maintenance, cfg, spark, log, on_pass)


def start(engine: Any, cfg: MaintenanceConfig, log: logging.Logger | None = None,
          initial_delay_s: float | None = None) -> Scheduler | None:
    """The scheduler, started on its threads; None when the settings turn every kind off."""
    if not cfg.kinds():
        return None
    s = scheduler(engine, cfg, log)
    s.start(initial_delay_s)
    return s
