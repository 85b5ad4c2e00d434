"""The tiering job, run by ``spark-submit`` (see engine.spark.submit.tier): ``tier_job.py PLAN``.

One task per segment: each copies the segment's ``.log``, ``.index``, ``.timeindex`` (and ``.txnindex``) to
the cold store and reads every copy back whole to check its size and CRC32C
(engine.tiering.copy_segment). The driver writes the copies' checksums to ``result.json``;
the manifest update and the local deletes happen afterwards, outside Spark, under the
partitions' tier locks.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def copy(task: dict[str, Any]) -> dict[str, Any]:
    from engine.tiering.tier_pass import copy_segment

    return {**copy_segment(task), "topic": task["topic"]}


def run(spark: Any, plan: dict[str, Any], plan_path: str) -> dict[str, Any]:
    tasks = sorted(plan["tasks"], key=lambda t: -t["bytes"])  # big ones first
    copies = (spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(copy).collect()
              if tasks else [])
    return {"copies": copies, "done_at": time.time()}


def main(argv: list[str]) -> int:
    from engine.spark.job import run_job

    return run_job(argv, "tier", run)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
