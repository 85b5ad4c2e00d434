"""Consumer groups through ``rivven serve``: real clients (confluent-kafka's librdkafka,
kafka-python) in processes of their own join, leave, are killed with -9, commit and resume;
the group's offsets are rivven's own (``rivven group describe``); a group is rivven-native or
Kafka-protocol while it has members, never both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, run_rivven
from helpers.kafka import FAST, Served, start_server

from engine import Engine, Record

MEMBER = ROOT / "tests" / "kafka_member.py"
# members' sessions are 3 s (a member killed with -9 is gone within that)
SETTINGS = (*FAST, "group.min.session.timeout.ms=1000")
PARTITIONS = 6


# ---------------------------------------------------------------- members in processes
class Members:
    """Member processes (tests/kafka_member.py), each writing its events to a file."""

    def __init__(self, served: Served, tmp: Path, group: str, assignor: str) -> None:
        self.served, self.tmp, self.group, self.assignor = served, tmp, group, assignor
        self.procs: dict[str, subprocess.Popen] = {}
        self.killed: set[str] = set()

    def start(self, name: str, kind: str, pause_ms: int = 10) -> None:
        with open(self.tmp / f"{name}.log", "wb") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, str(MEMBER), kind, self.served.bootstrap, self.group, "t",
                 self.assignor, name, str(pause_ms)], stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(ROOT)))

    def lines(self, name: str) -> list[list[str]]:
        text = (self.tmp / f"{name}.log").read_text(errors="replace")
        return [line.split() for line in text.split("\n")[:-1]]  # (a kill may cut the last)

    def stop(self, name: str) -> None:
        """SIGTERM: the member closes (leaves the group) and exits."""
        p = self.procs[name]
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, self.lines(name)[-5:]
        assert self.lines(name)[-1] == ["closed"]

    def kill(self, name: str) -> None:
        self.procs[name].kill()
        self.procs[name].wait(30)
        self.killed.add(name)

    def close(self) -> None:
        if sys.exc_info()[0] is not None:  # (a failed test: each live member's stacks)
            for p in self.procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGUSR1)
            time.sleep(1)
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)


def wait_for(what: str, check, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.1)


def live(data_dir: str, group: str) -> dict:
    with Engine.open(data_dir, read_only=True) as eng:
        return dict(eng.groups.live(group))


def stable_with(data_dir: str, group: str, n: int) -> bool:
    g = live(data_dir, group)
    return g["state"] == "Stable" and len(g["members"]) == n and \
        sorted(a["partition"] for m in g["members"] for a in m["assignment"]) == \
        list(range(PARTITIONS))


def produce(data_dir: str, n_per_partition: int) -> None:
    with Engine.open(data_dir) as eng:
        for p in range(PARTITIONS):
            eng.produce("t", [Record(value=b"v%d" % i) for i in range(n_per_partition)],
                        partition=p)


def ends(data_dir: str) -> dict[int, int]:
    with Engine.open(data_dir, read_only=True) as eng:
        return {p: eng.offsets.of_partition("t", p)[1] for p in range(PARTITIONS)}


def committed(data_dir: str, group: str) -> dict[int, int]:
    with Engine.open(data_dir, read_only=True) as eng:
        try:
            return {p: o for (_, p), o in eng.groups.committed(group).items()}
        except Exception:
            return {}


def consumed_under_commits(members: Members) -> tuple[dict, set]:
    """Which member took each record under a commit of its own: a record ``R p o`` counts
    when the same member then committed an offset past it on that partition before the
    partition was assigned to it anew (``A p``: its position came from the group's offsets
    again). A killed member's records after its last commit may have been committed too
    (the kill can fall between the commit and its line): those are ``maybe``."""
    taken: dict[tuple[int, int], list[str]] = {}
    maybe: set[tuple[int, int]] = set()
    for name in members.procs:
        open_: dict[int, list[int]] = {}  # partition -> records taken, not yet committed
        for f in members.lines(name):
            if f[0] == "A":
                open_[int(f[1])] = []
            elif f[0] == "R" and len(f) == 3:
                open_.setdefault(int(f[1]), []).append(int(f[2]))
            elif f[0] == "C" and len(f) == 3:
                p, upto = int(f[1]), int(f[2])
                rest = []
                for o in open_.get(p, []):
                    if o < upto:
                        taken.setdefault((p, o), []).append(name)
                    else:
                        rest.append(o)
                open_[p] = rest
        if name in members.killed:
            maybe.update((p, o) for p, os_ in open_.items() for o in os_)
    return taken, maybe


class Producing:
    """Records into every partition all along (6 every 20 ms), from a thread."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with Engine.open(self.data_dir) as eng:
            while not self.done.wait(0.02):
                for p in range(PARTITIONS):
                    eng.produce("t", [Record(value=b"x")], partition=p)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(30)


def churn(tmp_path: Path, kinds: tuple[str, str, str, str, str], assignor: str) -> None:
    """Three members (kinds[0..2]) join, a fourth joins, one leaves, one is killed with -9,
    while records keep coming, each committed on its own; then a fifth (kinds[4]) resumes
    after they all stopped."""
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", PARTITIONS)
    produce(d, 40)
    s = start_server(d, settings=SETTINGS)
    m = Members(s, tmp_path, "g", assignor)
    more = Producing(d)
    try:
        for name, kind in zip("abc", kinds):
            m.start(name, kind)
        wait_for("3 members", lambda: stable_with(d, "g", 3))
        m.start("d", kinds[3])
        wait_for("4 members", lambda: stable_with(d, "g", 4))
        wait_for("d to take records", lambda: any(f[0] == "C" for f in m.lines("d")))
        m.stop("b")
        wait_for("3 members after b left", lambda: stable_with(d, "g", 3))
        wait_for("c to take records", lambda: any(f[0] == "C" for f in m.lines("c")))
        m.kill("c")
        wait_for("2 members after c was killed", lambda: stable_with(d, "g", 2))
        more.stop()
        end = ends(d)
        wait_for("every record committed", lambda: committed(d, "g") == end, timeout=120)
        for name in "ad":
            m.stop(name)
        taken, maybe = consumed_under_commits(m)
        twice = {r: who for r, who in taken.items() if len(who) > 1}
        assert twice == {}, f"records taken twice under commits: {sorted(twice.items())[:10]}"
        everything = {(p, o) for p in range(PARTITIONS) for o in range(end[p])}
        assert everything - set(taken) - maybe == set()
        assert live(d, "g")["state"] == "Empty"
        for name in "abd":  # each took part
            assert any(f[0] == "C" for f in m.lines(name)), name

        # every member stopped: a new one resumes from the committed offsets
        before = committed(d, "g")
        produce(d, 5)
        end = ends(d)
        m.start("e", kinds[4], pause_ms=0)
        wait_for("the new records committed", lambda: committed(d, "g") == end, timeout=60)
        m.stop("e")
        got = sorted((int(f[1]), int(f[2])) for f in m.lines("e") if f[0] == "R")
        assert got == [(p, o) for p in range(PARTITIONS) for o in range(before[p], end[p])]

        out = json.loads(run_rivven(d, "group", "describe", "g", "--json", check=True).stdout)
        assert out["state"] == "Empty" and out["total_lag"] == 0
        assert [(r["partition"], r["current_offset"], r["lag"]) for r in out["partitions"]] \
            == [(p, end[p], 0) for p in range(PARTITIONS)]
    finally:
        more.stop()
        m.close()
        s.kill()
    assert "Traceback" not in s.log(), s.log()[-3000:]


@pytest.mark.slow
def test_confluent_members_join_leave_die_and_resume_cooperative_sticky(tmp_path):
    churn(tmp_path, ("confluent",) * 5, "cooperative-sticky")


@pytest.mark.slow
def test_kafka_python_members_join_leave_die_and_resume_range(tmp_path):
    churn(tmp_path, ("kafka-python",) * 5, "range")


@pytest.mark.slow
def test_mixed_members_join_leave_die_and_resume_roundrobin(tmp_path):
    churn(tmp_path, ("confluent", "kafka-python", "confluent", "kafka-python", "confluent"),
          "roundrobin")
