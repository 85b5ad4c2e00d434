"""engine.counters across kill -9: a killed producer's counts in .stats/ are merged once into
retired.json, never lost, never counted twice."""

import json
import os
import signal

from helpers.counters import APPENDED, appended, process_files, start_producer, stats

from engine import Engine
from engine.counters import gather


def test_a_killed_producers_counts_survive_exactly_once(topic_dir):
    p = start_producer(topic_dir, 9, "kill")
    with Engine.open(topic_dir, read_only=True) as eng:  # a reader meanwhile: read live
        assert {k: v for k, v in appended(topic_dir).items()} == {0: 50, 1: 40}
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        doc = eng.metrics()  # the first gather after the death merges it
    assert process_files(topic_dir) == []
    samples = {s["labels"]["partition"]: s["value"] for s in doc[APPENDED]["samples"]}
    assert samples == {"0": 50, "1": 40}
    assert appended(topic_dir) == {0: 50, 1: 40}  # and never again
    retired = json.loads(open(os.path.join(stats(topic_dir), gather.RETIRED)).read())
    assert retired["merged"] == [] or all(m not in process_files(topic_dir)
                                          for m in retired["merged"])
