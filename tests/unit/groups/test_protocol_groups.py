"""What ``GroupAdmin`` offers a Kafka-protocol coordinator (``rivven serve``): commits with a
metadata text per partition, the offsets with their metadata, and the mark of a group whose
members are Kafka clients (one kind of member at a time, seen by other processes)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT
from helpers.groups import fill

from engine import Engine
from engine.errors import GroupActive, GroupKindConflict


def _details(mark_state="Stable"):
    return {"state": mark_state, "protocol": "range", "protocol_type": "consumer",
            "generation": 3,
            "members": [{"member_id": "rdkafka-1", "client_id": "app", "host": "/127.0.0.1",
                         "topics": ["t"], "joined": 1, "assignment": [["t", [0, 2]]]},
                        {"member_id": "rdkafka-2", "client_id": "app", "host": "/127.0.0.1",
                         "topics": ["t"], "joined": 2, "assignment": [["t", [1]]]}]}


def test_commit_keeps_a_metadata_text_per_partition_and_offsets_reads_them(data_dir):
    fill(data_dir, partitions=3, n=10)
    with Engine.open(data_dir) as eng:
        assert eng.groups.offsets("g") == {}  # no such group: nothing, no error
        ts = eng.groups.commit("g", {("t", 0): 4, ("t", 1): 7}, {("t", 0): "a", ("t", 1): ""})
        eng.groups.commit("g", {("t", 2): 9})
        got = eng.groups.offsets("g")
        assert got == {("t", 0): {"offset": 4, "metadata": "a", "timestamp": ts},
                       ("t", 1): {"offset": 7, "metadata": "", "timestamp": ts},
                       ("t", 2): {"offset": 9, "metadata": "", "timestamp": got[("t", 2)]
                                  ["timestamp"]}}
        d = eng.groups.describe("g")  # the same store 'rivven group describe' reads
        assert [(r["partition"], r["current_offset"], r["lag"], r["metadata"])
                for r in d["partitions"]] == [(0, 4, 6, "a"), (1, 7, 3, ""), (2, 9, 1, "")]
    with Engine.open(data_dir) as eng:  # another process's commits are read too
        eng.groups.commit("g", {("t", 0): 5}, {("t", 0): "b"})
    with Engine.open(data_dir) as other:
        kept = other.groups
        assert kept.offsets("g")[("t", 0)]["metadata"] == "b"
        with Engine.open(data_dir) as eng:
            eng.groups.commit("g", {("t", 0): 6}, {("t", 0): "c"})
        assert kept.offsets("g")[("t", 0)] == {**kept.offsets("g")[("t", 0)], "offset": 6,
                                               "metadata": "c"}
        with pytest.raises(Exception, match="offsets are integers from 0"):
            kept.commit("g", {("t", 0): -1})
        with pytest.raises(Exception, match="metadata must be a string"):
            kept.commit("g", {("t", 0): 1}, {("t", 0): None})


def test_delete_offsets_of_some_partitions(data_dir):
    fill(data_dir, partitions=3, n=10)
    with Engine.open(data_dir) as eng:
        eng.groups.commit("g", {("t", p): p for p in range(3)})
        out = eng.groups.delete_offsets("g", "t", partitions=[0, 2])
        assert out["partitions"] == [0, 2]
        assert eng.groups.committed("g") == {("t", 1): 1}
        assert eng.groups.delete_offsets("g", "t", [0], missing_ok=True)["partitions"] == []
        with pytest.raises(Exception, match="no committed offsets"):
            eng.groups.delete_offsets("g", "t", [0])


def test_a_kafka_protocol_mark_shows_its_members_and_refuses_native_consumers(data_dir):
    fill(data_dir, partitions=3, n=10)
    with Engine.open(data_dir) as eng:
        eng.groups.commit("g", {("t", 0): 4})
        mark = eng.groups.claim("g", {"client_id": "rivven serve", "listener": "x:1"})
        live = eng.groups.live("g")
        assert live["kind"] == "kafka" and live["server_pid"] == os.getpid()
        assert live["members"] == [] and live["state"] == "PreparingRebalance"
        # a mark with no details yet: a reset is refused all the same
        with pytest.raises(GroupActive, match="Kafka-protocol members through rivven serve"):
            eng.groups.reset_offsets("g", {"t": None}, "to-earliest", execute=True)
        mark.publish(_details())
        d = eng.groups.describe("g")
        assert d["state"] == "Stable"
        assert [(m["member_id"], m["client_id"], m["host"], m["assignment"])
                for m in d["members"]] == [
            ("rdkafka-1", "app", "/127.0.0.1", [{"topic": "t", "partition": 0},
                                                {"topic": "t", "partition": 2}]),
            ("rdkafka-2", "app", "/127.0.0.1", [{"topic": "t", "partition": 1}])]
        assert [r["consumer"] for r in d["partitions"]] == ["rdkafka-1", "rdkafka-2",
                                                            "rdkafka-1"]
        state = eng.groups.state("g")
        assert (state["state"], state["assignment_strategy"], state["members"]) == \
            ("Stable", "range", 2)
        with pytest.raises(GroupKindConflict) as e:
            eng.consumer("g", "t")
        msg = str(e.value)
        assert "\n" not in msg and "live Kafka-protocol members (2 members through rivven " \
            f"serve, pid {os.getpid()})" in msg and "rivven-native or Kafka-protocol" in msg
        assert eng.groups.live("g")["kind"] == "kafka"  # the refused consumer left no file
        with pytest.raises(GroupActive, match="2 active Kafka-protocol consumer"):
            eng.groups.reset_offsets("g", {"t": None}, "to-earliest", execute=True)
        with pytest.raises(GroupActive):
            eng.groups.delete("g")
        with pytest.raises(GroupActive):
            eng.groups.delete_offsets("g", "t")
        with pytest.raises(GroupKindConflict, match="another rivven serve on this data dir"):
            eng.groups.claim("g", {})  # a second server (another open file: another owner)
        mark.close()
        assert eng.groups.live("g") == {"group": "g", "kind": None, "state": "Empty",
                                        "protocol": "roundrobin", "server_pid": None,
                                        "members": []}
        assert not os.path.exists(os.path.join(eng.groups.group_dir("g"), "kafka.json"))
        with eng.consumer("g", "t", enable_auto_commit=False) as c:
            assert c.assignment() == [("t", 0), ("t", 1), ("t", 2)]
            with pytest.raises(GroupKindConflict) as e:
                eng.groups.claim("g", {})
            assert "\n" not in str(e.value) and "has 1 live rivven consumer (" in str(e.value)
            assert eng.groups.live("g")["kind"] == "rivven"  # no mark left behind


def test_the_mark_dies_with_its_process(data_dir):
    fill(data_dir, partitions=1, n=1)
    code = ("import sys, time\nfrom engine import Engine\n"
            "eng = Engine.open(sys.argv[1])\nm = eng.groups.claim('g', {})\n"
            "m.publish({'state': 'Stable', 'members': []})\nprint('ok', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, data_dir], stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert p.stdout.readline() == b"ok\n"
        with Engine.open(data_dir) as eng:
            assert eng.groups.live("g")["kind"] == "kafka"
            with pytest.raises(GroupKindConflict):
                eng.consumer("g", "t")
            p.send_signal(signal.SIGKILL)
            p.wait(30)
            deadline = time.monotonic() + 10
            while eng.groups.live("g")["kind"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert eng.groups.live("g")["state"] == "Empty"
            with eng.consumer("g", "t") as c:
                assert c.assignment() == [("t", 0)]
    finally:
        p.kill()
        p.wait()
