"""Consumer groups: committed offsets, the consumer API, partition split, offset resets. (A
consumer killed -9: tests/crash/test_groups_crash.py.)"""

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import ROOT, run_rivven
from helpers.cli import run_in_process
from helpers.groups import fill, pairs

from engine import Engine, Record
from engine.errors import InvalidArgument, OffsetOutOfRange
from engine.groups.offset_store import OffsetStore


# ---------------------------------------------------------------- engine API
def test_consumer_reads_commits_and_resumes(data_dir):
    fill(data_dir, partitions=3, n=50)
    with Engine.open(data_dir) as eng:
        with eng.consumer("g", "t", enable_auto_commit=False, max_poll_records=7) as c:
            assert c.assignment() == [("t", 0), ("t", 1), ("t", 2)]
            got = []
            while len(got) < 40:
                got += c.poll(timeout_ms=100)
            seen = {(r.partition, r.offset) for r in got}
            assert len(seen) == len(got)  # no record twice
            c.commit()
            assert {tp: c.position(*tp) for tp in c.assignment()} == \
                {tp: c.committed(*tp) for tp in c.assignment()}
            c.seek("t", 1, 3)
            assert c.position("t", 1) == 3
            with pytest.raises(OffsetOutOfRange, match="valid offsets are 0..50"):
                c.seek("t", 1, 51)
            with pytest.raises(InvalidArgument, match="not assigned"):
                c.position("t", 9)
        committed = eng.groups.committed("g")
    with Engine.open(data_dir) as eng:  # a new process view: resumes where the group stopped
        with eng.consumer("g", ["t"], consumer_timeout_ms=300) as c:
            rest = list(c)
        got_all = {(r.partition, r.offset) for r in got} | {(r.partition, r.offset) for r in rest}
        assert got_all == {(p, o) for p in range(3) for o in range(50)}
        for r in rest:
            assert r.offset >= committed[("t", r.partition)]
        assert eng.groups.committed("g") == {("t", p): 50 for p in range(3)}  # closed: commits


def test_iterator_commits_only_records_it_handed_out(data_dir):
    fill(data_dir, partitions=1, n=100)
    with Engine.open(data_dir) as eng:
        c = eng.consumer("g", "t", max_poll_records=50)
        it = iter(c)
        first = [next(it) for _ in range(10)]  # the consumer fetched 50, handed out 10
        assert [r.offset for r in first] == list(range(10))
        c.close()
        assert eng.groups.committed("g") == {("t", 0): 10}


def test_auto_offset_reset_latest_and_none(data_dir):
    fill(data_dir, partitions=1, n=20)
    with Engine.open(data_dir) as eng:
        with eng.consumer("late", "t", auto_offset_reset="latest") as c:
            assert c.position("t", 0) == 20
            assert c.poll() == []
        with pytest.raises(OffsetOutOfRange, match="no committed offset"):
            eng.consumer("strict", "t", auto_offset_reset="none")
        with pytest.raises(InvalidArgument, match="auto_offset_reset"):
            eng.consumer("g", "t", auto_offset_reset="sometimes")


def test_committed_offset_below_log_start_resets_and_says_so(data_dir):
    fill(data_dir, partitions=1, n=100, cfg={"segment.bytes": "600"})
    with Engine.open(data_dir) as eng:
        with eng.consumer("g", "t") as c:
            c.poll(max_records=5, timeout_ms=100)
        eng.maintenance.delete_records("t", {0: 60})
        events = []
        with eng.consumer("g", "t", on_reset=events.append) as c:
            assert c.position("t", 0) == 60
            assert c.poll(timeout_ms=100)[0].offset == 60
        assert events and events[0]["reason"] == "out-of-range" and events[0]["prior"] == 5
    r = run_rivven(data_dir, "consume", "t", "--group", "g2", "-n", "1")
    assert r.returncode == 0
    with Engine.open(data_dir) as eng:  # commit 61 for g2, then move the start past it
        eng.maintenance.delete_records("t", {0: 80})
    r = run_rivven(data_dir, "consume", "t", "--group", "g2", "-n", "1", "-f", "%o\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"80\n"
    assert b"committed offset 61 is out of range; reset to earliest (80)" in r.stderr


def test_offset_store_torn_tail_at_every_byte(tmp_path):
    d = str(tmp_path / "g")
    s = OffsetStore(d)
    s.commit({("t", 0): 5})
    s.commit({("t", 0): 9, ("t", 1): 3}, metadata="m")
    path = os.path.join(d, "offsets.log")
    data = open(path, "rb").read()
    # the first frame's end: where a store with only the first commit ends
    s1 = OffsetStore(str(tmp_path / "one"))
    s1.commit({("t", 0): 5})
    first_end = os.path.getsize(os.path.join(str(tmp_path / "one"), "offsets.log"))
    for cut in range(first_end, len(data)):
        with open(path, "wb") as f:
            f.write(data[:cut])
        r = OffsetStore(d).refresh()
        assert {k: v.offset for k, v in r.items()} == {("t", 0): 5}, cut
        w = OffsetStore(d)
        w.commit({("t", 2): 7})  # cuts the torn commit, then appends
        r = OffsetStore(d).refresh()
        assert {k: v.offset for k, v in r.items()} == {("t", 0): 5, ("t", 2): 7}, cut


def test_offset_store_rewrites_when_it_grows(tmp_path, monkeypatch):
    import engine.groups.offset_store as mod
    monkeypatch.setattr(mod, "COMPACT_MIN", 4096)
    d = str(tmp_path / "g")
    s = OffsetStore(d, sync=False)
    other = OffsetStore(d, sync=False)
    for i in range(500):
        s.commit({("t", i % 4): i})
        if i % 97 == 0:
            assert {k: v.offset for k, v in other.refresh().items()} == \
                {k: v.offset for k, v in s.offsets.items()}
    assert os.path.getsize(os.path.join(d, "offsets.log")) < 8192
    assert {k: v.offset for k, v in OffsetStore(d).refresh().items()} == \
        {("t", 0): 496, ("t", 1): 497, ("t", 2): 498, ("t", 3): 499}


# ---------------------------------------------------------------- processes
CONSUMER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from engine import Engine
data_dir, group, stop, tag = sys.argv[2:6]
with Engine.open(data_dir) as eng:
    with eng.consumer(group, "t", max_poll_records=20, auto_commit_interval_ms=200,
                      member_id=tag) as c:
        idle = None
        while True:
            recs = c.poll(timeout_ms=50)
            for r in recs:
                sys.stdout.write(f"{r.partition} {r.offset}\n")
            sys.stdout.flush()
            if recs:
                idle = None
                time.sleep(0.01)  # a slow consumer: the run overlaps the other member's
            elif os.path.exists(stop):
                idle = idle or time.monotonic()
                if time.monotonic() - idle > 1.5:
                    break
"""


def start_consumer(data_dir, group, stop, tag):
    return subprocess.Popen([sys.executable, "-c", CONSUMER, str(ROOT), data_dir, group, stop,
                             tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_two_consumer_processes_split_the_partitions(data_dir, tmp_path):
    fill(data_dir, partitions=4, n=300)
    stop = str(tmp_path / "stop")
    a = start_consumer(data_dir, "g", stop, "a")
    time.sleep(1.0)
    b = start_consumer(data_dir, "g", stop, "b")
    with Engine.open(data_dir) as eng:  # more records while both run
        for i in range(40):
            eng.produce("t", [Record(key=b"k%d" % i, value=b"late")] * 10)
            time.sleep(0.05)
        ends = eng.end_offsets("t")
        deadline = time.time() + 30
        while eng.groups.describe("g")["state"] != "Active" or \
                len(eng.groups.describe("g")["members"]) != 2:
            assert time.time() < deadline
            time.sleep(0.1)
    open(stop, "w").close()
    out_a, err_a = a.communicate(timeout=120)
    out_b, err_b = b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    got_a, got_b = pairs(out_a), pairs(out_b)
    assert got_a and got_b, "both members received records"
    every = got_a + got_b
    assert len(every) == len(set(every)), "a record was received twice"
    assert set(every) == {(p, o) for p, end in ends.items() for o in range(end)}
    with Engine.open(data_dir) as eng:
        assert eng.groups.committed("g") == {("t", p): e for p, e in ends.items()}
        assert eng.groups.describe("g")["state"] == "Empty"


def test_a_reset_position_is_committed_when_the_member_takes_the_partition(data_dir):
    fill(data_dir, partitions=2, n=10)
    with Engine.open(data_dir) as eng:
        c = eng.consumer("g", "t", auto_offset_reset="latest", enable_auto_commit=False)
        assert eng.groups.committed("g") == {("t", 0): 10, ("t", 1): 10}  # before any poll
        c.commit()  # nothing new to commit
        c.close()
        eng.produce("t", [Record(value=b"x")], partition=1)
        with eng.consumer("g", "t") as c:
            assert [(r.partition, r.offset) for r in c.poll(timeout_ms=100)] == [(1, 10)]


def test_admin_plans_for_new_groups_to_current_and_plan_files(data_dir, tmp_path):
    from engine.groups.admin import read_plan, write_plan

    fill(data_dir, partitions=2, n=10)
    with Engine.open(data_dir) as eng:
        plan = eng.groups.reset_offsets("new", {"t": None}, "to-current")
        assert (plan["new_group"], plan["executed"], plan["active_members"]) == (True, False, 0)
        assert [(r["prior"], r["new"]) for r in plan["partitions"]] == [(None, 10), (None, 10)]
        assert not os.path.exists(os.path.join(data_dir, "groups"))
        with pytest.raises(InvalidArgument, match="allow new topics"):
            eng.groups.reset_offsets("new", {"t": None}, "to-earliest", new_topics=False)
        with pytest.raises(InvalidArgument, match="control character"):
            eng.groups.reset_offsets("a\nb", {"t": None}, "to-earliest")
        rows = eng.groups.reset_offsets("new", {"t": [1]}, "to-offset", 4, execute=True)["partitions"]
        assert eng.groups.committed("new") == {("t", 1): 4}
        plan = eng.groups.reset_offsets("new", {"t": None}, "to-current", new_topics=False)
        assert not plan["new_group"] and [r["new"] for r in plan["partitions"]] == [10, 4]
        f = tmp_path / "plan.csv"
        f.write_text(write_plan(plan["partitions"]))
        assert f.read_text() == "t,0,10\nt,1,4\n"
        assert read_plan(f, "any") == {("t", 0): 10, ("t", 1): 4}
        plan = eng.groups.reset_offsets("copy", {"t": [0]}, "from-file", str(f), execute=True)
        assert [r["new"] for r in plan["partitions"]] == [10] and rows[0]["new"] == 4
        assert eng.groups.committed("copy") == {("t", 0): 10}
        state = eng.groups.state("new")
        assert state == {"group": "new", "state": "Empty", "assignment_strategy": "roundrobin",
                         "members": 0, "topics": ["t"], "total_lag": 6}
        assert eng.groups.list_groups() == [eng.groups.state("copy"), state]


# ---------------------------------------------------------------- reset-offsets
def reset(data_dir, *args):
    r = run_rivven(data_dir, "group", "reset-offsets", "g", *args, "--json")
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


@pytest.mark.slow
def test_reset_offsets_every_target_kind(data_dir):
    now = int(time.time() * 1000)
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2, {"segment.bytes": "2000", "retention.ms": "-1"})
        for p in range(2):  # offset i has timestamp now - (100 - i) minutes
            eng.produce("t", [Record(key=b"k", value=b"v", timestamp=now - (100 - i) * 60_000)
                              for i in range(100)], partition=p)
        eng.maintenance.delete_records("t", {1: 10})
        with eng.consumer("g", "t", enable_auto_commit=False) as c:
            c.commit({("t", 0): 40, ("t", 1): 50})

    r, out = reset(data_dir, "--all-topics", "--to-earliest")
    assert [(x["prior"], x["new"]) for x in out["partitions"]] == [(40, 0), (50, 10)]
    assert out["executed"] is False and b"dry run" in r.stderr
    _, out = reset(data_dir, "--topic", "t", "--to-latest")
    assert [x["new"] for x in out["partitions"]] == [100, 100]
    _, out = reset(data_dir, "--topic", "t:1", "--to-offset", "5")
    assert out["partitions"] == [{"topic": "t", "partition": 1, "prior": 50, "new": 10,
                                  "requested": 5, "clamped": True, "log_start_offset": 10,
                                  "log_end_offset": 100}]
    _, out = reset(data_dir, "--topic", "t:0,1", "--to-offset", "1000")
    assert [(x["new"], x["clamped"]) for x in out["partitions"]] == [(100, True), (100, True)]
    _, out = reset(data_dir, "--topic", "t", "--shift-by", "-45")
    assert [(x["new"], x["clamped"]) for x in out["partitions"]] == [(0, True), (10, True)]
    _, out = reset(data_dir, "--topic", "t", "--shift-by", "7")
    assert [x["new"] for x in out["partitions"]] == [47, 57]
    r, out = reset(data_dir, "--topic", "t:0", "--to-datetime", str(now - 30 * 60_000))
    assert out["partitions"][0]["new"] == 70
    r, out = reset(data_dir, "--topic", "t:0", "--to-datetime", "-30m")
    assert out["partitions"][0]["new"] in (70, 71)  # seconds pass between now and the command
    r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t:0", "--to-datetime",
                   "-30m")
    assert b"resolved to 20" in r.stderr and b"Z (" in r.stderr
    _, out = reset(data_dir, "--topic", "t:0", "--by-duration", "PT30M")
    assert out["partitions"][0]["new"] in (70, 71)
    _, out = reset(data_dir, "--topic", "t:0", "--by-duration", "1d")
    assert out["partitions"][0]["new"] == 0
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((now - 20 * 60_000) / 1000))
    _, out = reset(data_dir, "--topic", "t:0", "--to-datetime", iso)
    assert out["partitions"][0]["new"] in (80, 81)
    with Engine.open(data_dir) as eng:  # nothing above was executed
        assert eng.groups.committed("g") == {("t", 0): 40, ("t", 1): 50}

    r, out = reset(data_dir, "--topic", "t", "--to-offset", "60", "--execute")
    assert r.returncode == 0 and out["executed"] is True
    with Engine.open(data_dir) as eng:
        assert eng.groups.committed("g") == {("t", 0): 60, ("t", 1): 60}

    # usage errors: exit 2, one line
    for args in (["--topic", "t"], ["--topic", "t", "--to-earliest", "--to-latest"],
                 ["--to-earliest"], ["--all-topics", "--topic", "t", "--to-earliest"],
                 ["--topic", "t:0", "--to-datetime", "yesterday"],
                 ["--topic", "t:0", "--by-duration", "PT"]):
        r = run_in_process(data_dir, "group", "reset-offsets", "g", *args)
        assert r.returncode == 2, (args, r.stderr)
    r = run_in_process(data_dir, "group", "reset-offsets", "g", "--topic", "nope", "--to-earliest")
    assert r.returncode == 1 and b"does not exist" in r.stderr and b"Traceback" not in r.stderr
    r = run_in_process(data_dir, "group", "reset-offsets", "new", "--topic", "t", "--shift-by", "1")
    assert r.returncode == 1 and b"no committed offset" in r.stderr


@pytest.mark.slow
def test_reset_offsets_refused_while_the_group_is_active(data_dir, tmp_path):
    fill(data_dir, partitions=1, n=10)
    stop = str(tmp_path / "stop")
    proc = start_consumer(data_dir, "g", stop, "m1")
    try:
        deadline = time.time() + 30
        while True:  # (until the consumer process has joined: made the group, then its member)
            r = run_rivven(data_dir, "group", "describe", "g", "--json")
            assert r.returncode == 0 or b"does not exist" in r.stderr, r.stderr
            if r.returncode == 0 and json.loads(r.stdout)["state"] == "Active":
                break
            assert time.time() < deadline
            time.sleep(0.1)
        r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest")
        assert r.returncode == 0 and b"needs --force" in r.stderr  # the dry run warns
        r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                       "--execute")
        assert r.returncode == 1 and b"active consumer" in r.stderr and b"--force" in r.stderr
        r = run_rivven(data_dir, "group", "delete", "g", "--yes")
        assert r.returncode == 1 and b"active consumer" in r.stderr
        r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t", "--to-offset",
                       "3", "--execute", "--force", check=True)
        assert b"reset" in r.stderr
    finally:
        open(stop, "w").close()
        proc.communicate(timeout=60)
    r = run_rivven(data_dir, "group", "list", "--json", check=True)
    assert [(g["group"], g["state"]) for g in json.loads(r.stdout)] == [("g", "Empty")]
    r = run_rivven(data_dir, "group", "delete-offsets", "g", "--topic", "t", check=True)
    r = run_rivven(data_dir, "group", "describe", "g", "--json", check=True)
    assert json.loads(r.stdout)["partitions"] == []
    run_rivven(data_dir, "group", "delete", "g", "--yes", check=True)
    r = run_rivven(data_dir, "group", "describe", "g")
    assert r.returncode == 1 and b"does not exist" in r.stderr
