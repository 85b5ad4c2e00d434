"""Two-phase commit under kill -9: a coordinator killed mid-commit leaves a decision the
next open finishes, and the next writer of a key finishes the pending decision before taking
up its transactional id."""

import signal

import pytest
from helpers.txn_prepare import committed, coordinate, writers

from engine import Engine
from engine.errors import InvalidArgument


@pytest.mark.parametrize("point", ["decision.after_decide", "decision.after_complete_one"])
def test_a_coordinator_killed_mid_commit_leaves_a_decision_the_next_open_finishes(topics, point):
    batch = writers(topics, 3, "c")
    r = coordinate(topics, "sink-q2", batch, 0, failpoint=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    with Engine.open(topics, recover=False) as eng:  # (no recovery yet: the state as left)
        assert eng.txn.decision("sink-q2")["pending"]["sequence"] == 0
        assert len(committed(eng, 1)) < 3  # not all visible yet
    with Engine.open(topics) as eng:
        assert eng.last_recovery["decisions"] == [
            {"key": "sink-q2", "action": "committed", "error": None}]
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3 and committed(eng, 1) == [b"b"] * 3
        assert eng.txn.decision("sink-q2") == {"key": "sink-q2", "committed": 0, "pending": None,
                                             "ended": [], "aborts": {}}


def test_a_producer_of_the_key_finishes_the_pending_decision_before_taking_up_its_id(topics):
    """The next batch's writer of an id must not abort the transaction a decision commits:
    taking up its id under the key's lock finishes the decision first."""
    batch = writers(topics, 2, "d")
    r = coordinate(topics, "sink-q3", batch, 4, failpoint="decision.after_decide")
    assert r.returncode == -signal.SIGKILL
    with Engine.open(topics, recover=False) as eng:
        tp = eng.producer(transactional_id="d-0", decision_key="sink-q3")
        tp.close()
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 2
        assert eng.txn.decision("sink-q3")["committed"] == 4
        abort_me = writers(topics, 1, "e")
        eng.txn.abort_prepared("sink-q3", abort_me)
        assert eng.txn.describe("e-0")["state"] == "CompleteAbort"
        with pytest.raises(InvalidArgument, match="decision key"):
            eng.txn.commit_prepared("", abort_me)
