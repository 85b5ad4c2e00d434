"""Consumer groups across kill -9: a consumer killed again and again commits only what it
handed out, nothing before its last commit is delivered again, the dead member leaves the
group, and the next consumer resumes from the commits."""

import json
import os
import random
import signal
import subprocess

from helpers import RIVVEN, ROOT, run_rivven
from helpers.groups import fill, pairs


def env(data_dir):
    return dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))


def test_committed_offsets_survive_kill_9_of_a_consumer(data_dir):
    fill(data_dir, partitions=2, n=20_000)
    rng = random.Random(4)
    printed: set = set()
    for round_ in range(3):
        proc = subprocess.Popen([*RIVVEN, "consume", "t", "--group", "g", "--follow",
                                 "-f", "%p %o\n"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env(data_dir), cwd=ROOT)
        lines = 0
        want = rng.randrange(100, 4000)
        line = b""
        while lines < want:
            line = proc.stdout.readline()
            if not line.endswith(b"\n"):
                break
            printed.add(tuple(map(int, line.split())))
            lines += 1
            line = b""
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()  # (not communicate(): it skips what readline buffered)
        proc.wait()
        printed |= set(pairs(line + rest))
        r = run_rivven(data_dir, "group", "describe", "g", "--json", check=True)
        d = json.loads(r.stdout)
        assert d["state"] == "Empty"  # the dead member is gone
        for row in d["partitions"]:
            done = [o for p, o in printed if p == row["partition"]]
            # committed only what was printed, and nothing printed before the last commit
            # is ever delivered again
            assert row["current_offset"] is not None, round_
            assert row["current_offset"] <= max(done, default=-1) + 1
    r = run_rivven(data_dir, "consume", "t", "--group", "g", "-f", "%p %o\n", check=True)
    last = pairs(r.stdout)
    assert set(last) | printed == {(p, o) for p in range(2) for o in range(20_000)}
    committed = {row["partition"]: row["current_offset"] for row in d["partitions"]}
    for p, o in last:  # resumed from the commits (a partition never committed: from 0)
        assert o >= committed.get(p, 0)
