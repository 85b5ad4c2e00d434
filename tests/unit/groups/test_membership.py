"""engine.groups.membership under races: a consumer whose construction failed leaves no live
member behind, and cleaning a dead member never removes a live one of the same id."""

import os
import threading

import pytest
from helpers.pipeline import HANG_S

from engine import Engine
from engine.errors import OffsetOutOfRange
from engine.groups import membership


# ------------------------------------------------------------------------ consumer groups
def test_failed_consumer_construction_leaves_no_live_member(data_dir):
    """Consumer.__init__ raising (auto_offset_reset='none' and no committed offset) must not
    leave its member file locked and its leases held until the engine closes: the caller has
    no object to close, and the other members lose those partitions."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 2)
    eng.produce_batch("t", [b"x"] * 4, partition=0)
    with pytest.raises(OffsetOutOfRange):
        eng.consumer("g", "t", auto_offset_reset="none")
    gdir = membership.group_dir(data_dir, "g")
    assert membership.live_members(gdir) == [], "a failed consumer is still a live member"
    assert membership.lease_owners(gdir) == {}, "a failed consumer still holds leases"
    eng.close()


# ------------------------------------------------------------------------ membership
def test_cleaning_a_dead_member_never_removes_a_live_one(data_dir, monkeypatch):
    """membership.live_members: it opens a dead member's file, takes its lock and unlinks the
    *path*. A consumer restarted with the same --member-id may have renamed its own (locked)
    file onto that path meanwhile: the live member's file is removed, it becomes invisible to
    the group (and, computing its share without itself, reads nothing)."""
    gdir = membership.group_dir(data_dir, "g")
    mdir = os.path.join(gdir, membership.MEMBERS)
    os.makedirs(mdir)
    with open(os.path.join(mdir, "m1.json"), "w") as f:  # left by a member that died
        f.write('{"member_id": "m1"}')
    real = membership.try_lock
    opened, go = threading.Event(), threading.Event()
    scanner = {}

    def slow_try_lock(fd):
        if threading.get_ident() == scanner.get("id") and not opened.is_set():
            opened.set()  # the scan has the dead member's file open
            go.wait(10)
        return real(fd)

    monkeypatch.setattr(membership, "try_lock", slow_try_lock)

    def scan():
        scanner["id"] = threading.get_ident()
        membership.live_members(gdir)

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    assert opened.wait(10)
    m = membership.Member(gdir, "m1", {"topics": ["t"]})  # the restarted consumer
    go.set()
    t.join(HANG_S)
    try:
        ids = [x["member_id"] for x in membership.live_members(gdir)]
        assert ids == ["m1"], f"live member m1 was removed by a scan (members: {ids})"
    finally:
        m.close()
