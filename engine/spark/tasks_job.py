"""A job of independent tasks, run by ``spark-submit`` (engine.spark.submit.task_runner with
this script): ``tasks_job.py PLAN``.

The plan names the function every task runs, ``"function": "engine.MODULE:NAME"``, imported
here by its name: the layer that submits the job knows this one, this one knows nothing of it
(``rivven spark export|import``: engine.bridge.spark_copy.copy_task). Each of the plan's
``tasks`` is one Spark task, ``function(plan["common"], task)``; the driver writes their
results, in the tasks' order, to ``result.json`` (``results``). A task opens what it needs
itself and closes it before it returns (a Python worker is reused across tasks and ends with
``os._exit``).
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time
from typing import Any


def function(ref: str) -> Any:
    """``engine.MODULE:NAME`` as the function it names (an engine module's only)."""
    module, _, name = ref.partition(":")
    if not module.startswith("engine.") or not name:
        raise ValueError(f"the plan's function {ref!r} is not engine.MODULE:NAME")
    return getattr(importlib.import_module(module), name)


def run(spark: Any, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    fn = function(plan["function"])  # (by reference: pickled as its module's name)
    tasks = plan["tasks"]
    results = (spark.sparkContext.parallelize(tasks, max(1, len(tasks)))
               .map(functools.partial(fn, plan.get("common") or {})).collect()
               if tasks else [])
    return {"results": results, "done_at": time.time()}


def main(argv: list[str]) -> int:
    from engine.spark.job import run_job

    with open(argv[1]) as f:
        kind = json.load(f).get("kind") or "tasks"
    return run_job(argv, kind, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
