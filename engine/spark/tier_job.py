"""The tiering job, run by ``spark-submit`` (see engine.spark.submit.tier): ``tier_job.py PLAN``.

One task per segment: each copies the segment's ``.log``, ``.index`` and ``.timeindex`` to
the cold store and reads every copy back whole to check its size and CRC32C
(engine.tiering.copy_segment). The driver writes the copies' checksums to ``result.json``;
the manifest update and the local deletes happen afterwards, outside Spark, under the
partitions' tier locks.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def copy(task: dict[str, Any]) -> dict[str, Any]:
    from engine.tiering import copy_segment

    return {**copy_segment(task), "topic": task["topic"]}


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    from engine.spark.job import write_result

    plan_path = argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    t0 = time.time()
    spark = SparkSession.builder.appName(f"rivven-tier-{plan['topic'] or 'all'}").getOrCreate()
    started = time.time()
    try:
        tasks = sorted(plan["tasks"], key=lambda t: -t["bytes"])  # big ones first
        copies = (spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(copy).collect()
                  if tasks else [])
        done = time.time()
    finally:
        spark.stop()
    result = {"copies": copies, "startup_s": started - t0, "plan_s": 0.0,
              "exec_s": done - started, "job_s": done - started}
    write_result(plan_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
