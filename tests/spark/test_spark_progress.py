"""A real ``rivven spark compact`` on local[2] with its stderr on a terminal: the progress bar
moves from starting through planning to the stages, its counts never going back."""

import pytest
from helpers import run_rivven_on_a_terminal
from helpers.spark_progress import assert_progress_moved

from engine import Engine


@pytest.mark.slow
def test_spark_compact_progress_moves_on_a_terminal(data_dir):
    """A real ``rivven spark compact`` on local[2], its stderr a terminal. Python workers are
    not reused (spark.python.worker.reuse=false), so every Python task lasts a worker's
    start-up, several of the driver's 0.2 s looks: the states between first and last task
    are there to see on any machine."""
    from test_spark import expected, make_topic

    before, plans = make_topic(data_dir, seed=11, n=2000)
    rc, out, frames = run_rivven_on_a_terminal(
        data_dir, "spark", "compact", "c", "--master", "local[2]",
        "--conf", "spark.python.worker.reuse=false")
    assert rc == 0, "\n".join(frames[-30:])
    assert b"PARTITION" in out
    assert any("compacted c: 2 partition(s)" in f for f in frames)
    assert_progress_moved(frames)
    with Engine.open(data_dir, read_only=True) as eng:
        after = [r for p in (0, 1) for r in eng.read("c", p, 0, 10**9)]
    want = expected(before, plans)
    assert after == want[0] + want[1]
