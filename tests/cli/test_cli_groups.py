"""``rivven group`` and ``rivven consume --group`` as a Kafka or rpk user drives them: where a
new group starts, ``reset-offsets`` (plans, files, groups not yet known), ``describe`` and
``seek``, through the real command."""

import json
import os
import socket
import time

import pytest

from engine import Engine, Record


def fill(data_dir, partitions=2, n=10, topic="t"):
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, partitions)
        for p in range(partitions):
            eng.produce(topic, [Record(value=b"%d-%d" % (p, i)) for i in range(n)], partition=p)


def ok(r):
    assert r.returncode == 0, r.stderr.decode()
    return r


def usage(r):
    assert r.returncode == 2, (r.returncode, r.stderr.decode())
    return r


def error(r, text):
    err = r.stderr.decode()
    assert r.returncode == 1 and text in err and "Traceback" not in err, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    return err


def committed(data_dir, group):
    with Engine.open(data_dir, read_only=True) as eng:
        return eng.groups.committed(group)


def produce(data_dir, partition, *values):
    with Engine.open(data_dir) as eng:
        eng.produce("t", [Record(value=v) for v in values], partition=partition)


# ---------------------------------------------------------------- item 3
def test_a_new_group_started_at_the_end_remembers_it(rivven, data_dir):
    fill(data_dir, partitions=2, n=10)
    r = ok(rivven("consume", "t", "-g", "g", "-o", "end", "-n", "1"))
    assert r.stdout == b""
    assert committed(data_dir, "g") == {("t", 0): 10, ("t", 1): 10}  # where it started
    produce(data_dir, 1, b"new-1", b"new-2")
    r = ok(rivven("consume", "t", "-g", "g", "-n", "1", "-f", "%p %o %v\n"))
    assert r.stdout == b"1 10 new-1\n"  # after the start, not from the beginning
    r = ok(rivven("consume", "t", "-g", "g", "-f", "%p %o %v\n"))
    assert r.stdout == b"1 11 new-2\n"


def test_a_group_started_at_the_end_and_interrupted_keeps_its_start(rivven, data_dir):
    """--follow stopped (Ctrl-C, kill) before any record came: the next run still reads what
    was appended after the first one started."""
    fill(data_dir, partitions=1, n=5)
    r = ok(rivven("consume", "t", "-g", "g", "-o", "end"))
    assert r.stdout == b""
    produce(data_dir, 0, b"late")
    r = ok(rivven("consume", "t", "-g", "g", "-o", "end", "-f", "%o %v\n"))
    assert r.stdout == b"5 late\n"


def test_the_python_api_commits_where_a_new_group_starts(data_dir):
    fill(data_dir, partitions=2, n=10)
    with Engine.open(data_dir) as eng:  # no auto-commit, nothing read, nothing committed by hand
        eng.consumer("g", "t", auto_offset_reset="latest", enable_auto_commit=False).close()
        assert eng.groups.committed("g") == {("t", 0): 10, ("t", 1): 10}
        eng.produce("t", [Record(value=b"after")], partition=0)
        with eng.consumer("g", "t", enable_auto_commit=False) as c:  # (earliest: not used)
            assert [(r.partition, r.offset, r.value) for r in c.poll(timeout_ms=100)] == \
                [(0, 10, b"after")]
        with eng.consumer("h", "t", enable_auto_commit=False) as c:
            c.commit({("t", 1): 3})
        eng.maintenance.delete_records("t", {1: 10})  # retention passed the offset: the reset position is
        events = []                       # committed too
        with eng.consumer("h", "t", auto_offset_reset="latest", enable_auto_commit=False,
                          on_reset=events.append):
            pass
        assert eng.groups.committed("h") == {("t", 0): 0, ("t", 1): 10}
        assert [(e["partition"], e["reason"]) for e in events] == [(1, "out-of-range")]


# ---------------------------------------------------------------- item 4
def test_reset_offsets_sets_up_a_group_that_does_not_exist_yet(rivven, data_dir):
    fill(data_dir, partitions=2, n=10)
    r = ok(rivven("group", "reset-offsets", "nogroup", "--topic", "t", "--to-offset", "4"))
    assert b"does not exist yet" in r.stderr and b"dry run" in r.stderr
    assert [line.split()[:4] for line in r.stdout.decode().splitlines()[1:]] == \
        [["t", "0", "-", "4"], ["t", "1", "-", "4"]]
    assert json.loads(ok(rivven("group", "list", "--json")).stdout) == []  # a dry run
    r = ok(rivven("group", "reset-offsets", "nogroup", "--topic", "t:1", "--to-latest", "--json"))
    out = json.loads(r.stdout)
    assert (out["new_group"], out["executed"], out["active_members"]) == (True, False, 0)
    assert [(x["prior"], x["new"]) for x in out["partitions"]] == [(None, 10)]

    r = ok(rivven("group", "reset-offsets", "nogroup", "--topic", "t", "--to-offset", "4",
                  "--execute"))
    assert b"set up" in r.stderr
    assert committed(data_dir, "nogroup") == {("t", 0): 4, ("t", 1): 4}
    r = ok(rivven("consume", "t", "-g", "nogroup", "-n", "1", "-f", "%o\n"))
    assert r.stdout == b"4\n"
    out = json.loads(ok(rivven("group", "reset-offsets", "nogroup", "--topic", "t",
                               "--to-earliest", "--json")).stdout)
    assert out["new_group"] is False


def test_a_new_groups_name_is_checked_by_the_dry_run_too(cli, data_dir):
    fill(data_dir, partitions=1, n=1)
    for name, text in (("a\x01b", "control character"), ("x" * 250, "too long"),
                       ("é" * 43, "too long")):
        for extra in ((), ("--execute",)):
            r = cli("group", "reset-offsets", name, "--topic", "t", "--to-earliest", *extra)
            error(r, text)
    assert not os.path.exists(os.path.join(data_dir, "groups"))


# ---------------------------------------------------------------- plans
def test_to_current_export_and_from_file_round_trip(rivven, data_dir, tmp_path):
    fill(data_dir, partitions=3, n=10)
    with Engine.open(data_dir) as eng:  # (a plan as a mapping, in the API)
        out = eng.groups.reset_offsets("g", None, "from-file", {("t", 0): 3, ("t", 2): 7},
                                      execute=True)
        assert out["new_group"] and [r["new"] for r in out["partitions"]] == [3, 7]
    r = ok(rivven("group", "reset-offsets", "g", "--all-topics", "--to-current", "--export"))
    assert r.stdout == b"t,0,3\nt,2,7\n"  # Kafka's plan file: topic,partition,offset
    assert b"dry run" in r.stderr
    out = json.loads(ok(rivven("group", "reset-offsets", "g", "--topic", "t", "--to-current",
                               "--json")).stdout)
    assert [(x["partition"], x["prior"], x["new"]) for x in out["partitions"]] == \
        [(0, 3, 3), (1, None, 10), (2, 7, 7)]  # no commit: the log end, as Kafka

    plan = tmp_path / "plan.csv"
    plan.write_bytes(ok(rivven("group", "reset-offsets", "g", "--all-topics", "--to-current",
                               "--export")).stdout)
    r = ok(rivven("group", "reset-offsets", "copy", "--from-file", str(plan), "--execute"))
    assert committed(data_dir, "copy") == {("t", 0): 3, ("t", 2): 7}
    # an executed export: the plan printed is the one applied
    r = ok(rivven("group", "reset-offsets", "copy", "--topic", "t:0", "--to-offset", "5",
                  "--execute", "--export"))
    assert r.stdout == b"t,0,5\n" and committed(data_dir, "copy")[("t", 0)] == 5

    # Kafka's several-group form, rpk's spaces, comments, blank lines, clamping, a filter
    plan.write_text("# made by hand\n\ncopy,t,1,2\nother,t,1,9\ncopy , t , 2 , 99\n")
    out = json.loads(ok(rivven("group", "reset-offsets", "copy", "--from-file", str(plan),
                               "--json")).stdout)
    assert out["mode"] == "from-file"
    assert [(x["partition"], x["new"], x["clamped"]) for x in out["partitions"]] == \
        [(1, 2, False), (2, 10, True)]
    plan.write_text("t 1 6\nt 2 1\n")
    out = json.loads(ok(rivven("group", "reset-offsets", "copy", "--from-file", str(plan),
                               "--topic", "t:2", "--json")).stdout)
    assert [(x["partition"], x["new"]) for x in out["partitions"]] == [(2, 1)]


@pytest.mark.parametrize("text, message", [
    ("t,0\n", "line 1: 't,0' is not topic,partition,offset"),
    ("t,0,1\nt,x,1\n", "line 2: 't,x,1': partition and offset must be integers"),
    ("t,0,-1\n", "must not be negative"),
    ("t,0,1\nt,0,2\n", "line 2: t-0 appears twice"),
    ("other,t,0,1\n", "has no offsets for group 'g' (it has rows for other)"),
    ("", "has no offsets for group 'g'"),
    ("nope,0,1\n", "topic 'nope' does not exist"),
    ("t,7,1\n", "partition 7 does not exist"),
    (b"t,0,\xff\n", "line 1: not UTF-8 text"),
])
def test_a_bad_plan_file_names_the_line(cli, data_dir, tmp_path, text, message):
    fill(data_dir, partitions=1, n=3)
    plan = tmp_path / "plan.csv"
    plan.write_bytes(text if isinstance(text, bytes) else text.encode())
    error(cli("group", "reset-offsets", "g", "--from-file", str(plan), "--execute"), message)
    assert not os.path.exists(os.path.join(data_dir, "groups"))


def test_plan_options_usage(cli, data_dir, tmp_path):
    fill(data_dir, partitions=1, n=3)
    error(cli("group", "reset-offsets", "g", "--from-file", str(tmp_path / "none.csv")),
          "cannot read reset plan")
    usage(cli("group", "reset-offsets", "g", "--topic", "t", "--to-current", "--export",
              "--json"))
    usage(cli("group", "reset-offsets", "g", "--topic", "t", "--to-current",
              "--from-file", "x"))
    usage(cli("group", "reset-offsets", "g", "--to-current"))  # no scope


# ---------------------------------------------------------------- describe
def test_describe_members_and_state(rivven, data_dir):
    fill(data_dir, partitions=3, n=5)
    with Engine.open(data_dir) as eng:
        a = eng.consumer("g", "t", member_id="m-a", client_id="app",
                         enable_auto_commit=False)
        b = eng.consumer("g", "t", member_id="m-b", client_id="app",
                         enable_auto_commit=False)
        deadline = time.monotonic() + 60
        while not b.assignment() and time.monotonic() < deadline:  # until m-a hands t-1 over
            a.poll()
            b.poll(timeout_ms=20)
        assert (a.assignment(), b.assignment()) == ([("t", 0), ("t", 2)], [("t", 1)])
        out = json.loads(ok(rivven("group", "describe", "g", "--members", "--json")).stdout)
        assert out == {"group": "g", "state": "Active", "members": [
            {"member_id": m, "client_id": "app", "host": socket.gethostname(),
             "pid": os.getpid(), "topics": ["t"], "joined": out["members"][i]["joined"],
             "assignment": [{"topic": "t", "partition": p} for p in parts]}
            for i, (m, parts) in enumerate((("m-a", [0, 2]), ("m-b", [1])))]}
        table = ok(rivven("group", "describe", "g", "--members")).stdout.decode()
        lines = table.splitlines()
        assert lines[0] == "group: g  state: Active  members: 2"
        assert lines[1].split() == ["CONSUMER-ID", "HOST", "PID", "CLIENT-ID", "PARTITIONS",
                                    "ASSIGNMENT"]
        assert lines[2].split() == ["m-a", socket.gethostname(), str(os.getpid()), "app", "2",
                                    "t(0,2)"]
        assert lines[3].split()[-2:] == ["1", "t(1)"]
        out = json.loads(ok(rivven("group", "describe", "g", "--state", "--json")).stdout)
        assert out == {"group": "g", "state": "Active", "assignment_strategy": "roundrobin",
                       "members": 2, "topics": ["t"], "total_lag": 15}
        a.close()
        b.close()
    lines = ok(rivven("group", "describe", "g", "--state")).stdout.decode().splitlines()
    assert lines[0].split() == ["GROUP", "STATE", "ASSIGNMENT-STRATEGY", "MEMBERS", "TOPICS",
                                "TOTAL-LAG"]
    assert lines[1].split() == ["g", "Empty", "roundrobin", "0", "t", "15"]
    r = ok(rivven("group", "describe", "g", "--members"))
    assert b"no active members" in r.stderr
    out = json.loads(ok(rivven("group", "describe", "g", "--json")).stdout)
    assert set(out) == {"group", "state", "members", "partitions", "total_lag"}  # as before
    usage(rivven("group", "describe", "g", "--members", "--state"))
    error(rivven("group", "describe", "nope", "--state"), "does not exist")


# ---------------------------------------------------------------- seek
def test_seek_is_rpks_spelling_of_reset_offsets_execute(rivven, data_dir, tmp_path):
    now_ms = 1_800_000_000_000
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
        eng.create_topic("u", 1)
        for p in range(2):
            eng.produce("t", [Record(value=b"v", timestamp=now_ms + i * 1000) for i in range(10)],
                        partition=p)
        eng.produce("u", [Record(value=b"v") for _ in range(4)])
        with eng.consumer("g", "t", enable_auto_commit=False) as c:
            c.commit({("t", 0): 5, ("t", 1): 6})

    ok(rivven("group", "seek", "g", "--to", "start"))  # every topic the group has committed
    assert committed(data_dir, "g") == {("t", 0): 0, ("t", 1): 0}
    ok(rivven("group", "seek", "g", "--to", "end", "--topics", "t"))
    assert committed(data_dir, "g") == {("t", 0): 10, ("t", 1): 10}
    out = json.loads(ok(rivven("group", "seek", "g", "--to", "3", "--json")).stdout)
    assert out["executed"] is True and out["mode"] == "to-offset"
    assert committed(data_dir, "g") == {("t", 0): 3, ("t", 1): 3}
    r = ok(rivven("group", "seek", "g", "--to", f"@{now_ms + 7000}"))
    assert b"resolved to" in r.stderr
    assert committed(data_dir, "g") == {("t", 0): 7, ("t", 1): 7}
    for word, want in (("beginning", 0), ("earliest", 0), ("latest", 10)):
        ok(rivven("group", "seek", "g", "--to", word))
        assert committed(data_dir, "g")[("t", 0)] == want

    # a topic the group has no offsets for: left out unless --allow-new-topics (rpk)
    r = ok(rivven("group", "seek", "g", "--to", "start", "--topics", "t,u"))
    assert b"no committed offsets for topic u" in r.stderr and b"--allow-new-topics" in r.stderr
    assert ("u", 0) not in committed(data_dir, "g")
    error(rivven("group", "seek", "g", "--to", "start", "--topics", "u"), "--allow-new-topics")
    ok(rivven("group", "seek", "g", "--to", "2", "--topics", "u", "--allow-new-topics"))
    assert committed(data_dir, "g")[("u", 0)] == 2
    ok(rivven("group", "seek", "new", "--to", "end", "--topics", "u", "--allow-new-topics"))
    assert committed(data_dir, "new") == {("u", 0): 4}

    plan = tmp_path / "seek.txt"  # rpk's --to-file: TOPIC PARTITION OFFSET
    plan.write_text("t 0 1\nt 1 2\nu 0 3\n")
    r = ok(rivven("group", "seek", "g", "--to-file", str(plan), "--topics", "t", "--dry-run"))
    assert b"drop --dry-run" in r.stderr and committed(data_dir, "g")[("t", 0)] == 0
    ok(rivven("group", "seek", "g", "--to-file", str(plan), "--topics", "t"))
    assert committed(data_dir, "g") == {("t", 0): 1, ("t", 1): 2, ("u", 0): 2}

    usage(rivven("group", "seek", "g"))
    usage(rivven("group", "seek", "g", "--to", "start", "--to-file", str(plan)))
    ok(rivven("group", "seek", "g", "--to", "-1", "--topics", "t"))  # the one grammar: -N, +N
    assert committed(data_dir, "g") == {("t", 0): 9, ("t", 1): 9, ("u", 0): 2}
    ok(rivven("group", "seek", "g", "--to", "+2", "--topics", "t"))
    assert committed(data_dir, "g") == {("t", 0): 2, ("t", 1): 2, ("u", 0): 2}
    usage(rivven("group", "seek", "g", "--to", "sometime"))


def test_seek_of_a_topic_partition_names_reset_offsets(cli, data_dir):
    """``--topics t:0`` (Kafka's TOPIC:P habit) is no topic name: a usage error naming the
    command that moves some partitions, not "no committed offsets for 't:0'"."""
    fill(data_dir, 2)
    with Engine.open(data_dir) as eng, eng.consumer("g", "t", enable_auto_commit=False) as c:
        c.commit({("t", 0): 5, ("t", 1): 6})
    r = cli("group", "seek", "g", "--to", "start", "--topics", "t:0")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "--topics takes topic names" in err and "group reset-offsets g --topic t:0" in err
    assert committed(data_dir, "g") == {("t", 0): 5, ("t", 1): 6}
