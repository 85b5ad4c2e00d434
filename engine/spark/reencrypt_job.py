"""The re-encryption job, run by ``spark-submit`` (see engine.spark.submit.reencrypt):
``reencrypt_job.py PLAN``.

One task per segment (engine.maintenance.reencrypt.run_task): a local one rewritten into the
staging folder, a cold one downloaded, rewritten and uploaded as a new object (checked). The
topic's data keys reach the tasks inside their closure (engine.spark.keys: the driver got them
from the launcher's environment). The driver writes the results to ``result.json``; the swaps
and the manifest writes happen afterwards, outside Spark, in the launcher.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any


def rewrite(keys: Any, task: dict[str, Any]) -> dict[str, Any]:
    from engine.maintenance.reencrypt import run_task

    opener = keys.opener_for(task["partition"]) if keys is not None else None
    seal = (functools.partial(keys.seal_batch, partition=task["partition"])
            if keys is not None and task["target"] else None)
    return run_task(task, opener, seal)


def run(spark: Any, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    from engine.spark.keys import for_topic
    from engine.spark.reencrypt_job import rewrite as task_fn  # (this file runs as __main__)

    keys = for_topic(plan["data_dir"], plan["topic"])  # (from the launcher, or the keyring)
    tasks = sorted(plan["tasks"], key=lambda t: -t["bytes"])  # big ones first
    results = (spark.sparkContext.parallelize(tasks, max(1, len(tasks)))
               .map(functools.partial(task_fn, keys)).collect() if tasks else [])
    return {"results": results, "done_at": time.time()}


def main(argv: list[str]) -> int:
    from engine.spark.job import run_job

    return run_job(argv, "reencrypt", run)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
