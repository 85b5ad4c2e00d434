"""The endless producer process of tests/unit/engine/test_concurrency.py and
tests/crash/test_concurrency_crash.py."""


PRODUCER = """
import sys, time
from engine import Engine, Record
with Engine.open(sys.argv[1]) as eng:
    i = 0
    while True:
        eng.produce("app", [Record(value=b"%d" % (i + j)) for j in range(50)])
        i += 50
        print(i, flush=True)
"""
