"""The Spark progress bar as a terminal showed it: shared by tests/cli/test_cli_spark.py and
the real jobs of tests/spark/."""

import re

FRAME = re.compile(r"^(spark: [a-z]+(?: \d+/\d+)?) .*?(\d+)/(\d+|\?) tasks (\d+):(\d\d):(\d\d)$")


def progress_frames(frames):
    """``(label, done, total, elapsed seconds)`` of each redraw of the Spark progress bar."""
    out = []
    for f in frames:
        m = FRAME.match(f)
        if m:
            h, mi, s = (int(x) for x in m.group(4, 5, 6))
            out.append((m.group(1), int(m.group(2)), m.group(3), h * 3600 + mi * 60 + s))
    return out


def assert_progress_moved(frames, between=True):
    """The bar went from starting through planning to the stages, its task count and elapsed
    time never going back, up to every task done; with ``between``, at least one state was
    seen between no task done and all done."""
    got = progress_frames(frames)
    labels = [g[0] for g in got]
    assert labels and labels[0] == "spark: starting", frames
    assert "spark: planning" in labels
    assert any(lb.startswith("spark: stage ") for lb in labels), labels
    counted = [(done, int(total)) for _, done, total, _ in got if total != "?"]
    assert [d for d, _ in counted] == sorted(d for d, _ in counted)
    assert counted and counted[-1][0] == counted[-1][1], counted
    if between:  # seen while it ran, not only at the end
        assert any(0 < d < t for d, t in counted), counted
    seconds = [g[3] for g in got]
    assert seconds == sorted(seconds) and seconds[-1] >= 1
