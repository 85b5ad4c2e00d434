"""Engine.close racing a produce, then a machine crash: a produce that gets in after close()'s
checkpoint passed its partition is either refused or survives the crash."""

import threading

from helpers.pipeline import HANG_S, stored

from engine import Engine
from engine.errors import RivvenError
from engine.maintenance import retention


def test_produce_racing_close_survives_a_crash(data_dir, tmp_path, monkeypatch):
    """A produce that gets in after close()'s checkpoint passed its partition but before the
    partition is closed is acknowledged; close() then deletes the WAL holding it although its
    segment bytes were never fsynced: a machine crash loses it."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"before"] * 3, partition=0)
    real_apply = retention.apply
    out = {}

    def apply_and_race(log, cfg, now, dry_run=False):  # runs right after log.checkpoint()
        rows = real_apply(log, cfg, now, dry_run)
        if "acks" not in out:
            out["acks"] = None

            def produce():
                try:
                    out["acks"] = eng.produce_batch("t", [b"late-%d" % i for i in range(3)],
                                                    partition=0)
                except RivvenError as e:
                    out["error"] = e

            t = threading.Thread(target=produce, daemon=True)
            t.start()
            t.join(HANG_S)
        return rows

    monkeypatch.setattr(retention, "apply", apply_and_race)
    image = tmp_path / "crashed"
    from helpers.pipeline import crash_image

    eng.close()
    monkeypatch.undo()
    if out.get("acks") is None:
        return  # refused: fine
    acks = out["acks"]
    crash_image(data_dir, str(image))
    with Engine.open(str(image)) as after:
        got = stored(after, "t")
    assert all(got.get(a) == b"late-%d" % i for i, a in enumerate(acks)), (
        f"acknowledged {acks} lost by a machine crash after close(): partition holds "
        f"{sorted(got)}")
