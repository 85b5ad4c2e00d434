"""Reading .stats/ and a producer process: shared by tests/unit/counters and
tests/crash/test_counters_crash.py."""

import os
import subprocess
import sys
import textwrap

from engine.counters import gather, slots
from engine.counters.meter import STATS_DIR
from helpers import ROOT

APPENDED = "rivven_records_appended_total"


def stats(d: str) -> str:
    return os.path.join(d, STATS_DIR)


def appended(d: str, topic: str = "t") -> dict[int, float]:
    got = gather.gather(stats(d)).series
    return {int(dict(lab)["partition"]): v[0] for (name, lab), v in got.items()
            if name == APPENDED and dict(lab)["topic"] == topic}


def process_files(d: str) -> list[str]:
    return slots.process_files(stats(d))


PRODUCER = textwrap.dedent("""
    import sys
    from engine import Engine, Record
    d, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    eng = Engine.open(d)
    for i in range(n):
        eng.produce("t", [Record(key=None, value=b"x" * 10)] * 10, partition=i % 2)
    print("acked", n * 10, flush=True)
    if mode == "wait":
        sys.stdin.readline()  # (held open until the test says)
    if mode != "kill":
        eng.close()
    else:
        import time
        time.sleep(60)
""")


def start_producer(d: str, n: int, mode: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", PRODUCER, d, str(n), mode], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.readline().split() == [b"acked", str(n * 10).encode()]
    return p

