"""A data dir a writer left with work for each kind of background pass (retention, compaction,
tiering) and nothing open since: shared by tests/cli/test_cli_maintain.py and
tests/kafka/test_serve_maintenance.py."""

import os
import time

from engine import Engine, Record

DAY = 86_400_000


def seg_count(data_dir, topic, p=0):
    d = os.path.join(data_dir, "topics", topic, f"partition-{p}")
    return len([f for f in os.listdir(d) if f.endswith(".log")])


def idle_data_dir(data_dir, cold_uri=None):
    """Three topics a writer left, each with work for one kind of pass, and nothing open
    since: ``t`` past retention (set after the writes: nothing applied it), ``c`` compacted
    with every segment dirty, ``r`` tiered past local.retention.bytes."""
    now = int(time.time() * 1000)
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "1200", "retention.ms": "-1"})
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "2000"})
        eng.create_topic("r", 1, {"remote.storage.enable": "true", "segment.bytes": "1500",
                                  "local.retention.bytes": "3000",
                                  **({"remote.storage.uri": cold_uri} if cold_uri else {})})
        for i in range(0, 300, 10):
            eng.produce("t", [Record(value=b"v%05d" % (i + j),
                                     timestamp=now - 3 * DAY if i < 200 else now)
                              for j in range(10)])
            for t in ("c", "r"):
                eng.produce(t, [Record(key=b"k%d" % (j % 5), value=b"v%05d" % (i + j))
                                for j in range(10)])
        eng.alter_topic_config("t", {"retention.ms": str(DAY)})
