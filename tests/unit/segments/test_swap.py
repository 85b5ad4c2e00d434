"""The segment swap (engine/segments/swap.py) and a replaced segment's ``.txnindex``: a new
segment that brings none must not inherit the old one's entries (they name markers the new
segment may not hold), however often the roll-forward is cut short and run again. (The swap
under kill -9: tests/crash/test_compaction_crash.py.)"""

import json
import os

from engine.segments import filenames, swap

SEGMENT = (filenames.LOG, filenames.INDEX, filenames.TIMEINDEX)


def write(directory, base, suffixes, content):
    os.makedirs(directory, exist_ok=True)
    for suffix in suffixes:
        with open(filenames.path(directory, base, suffix), "w") as f:
            f.write(content)


def read(directory, base, suffix):
    try:
        with open(filenames.path(directory, base, suffix)) as f:
            return f.read()
    except FileNotFoundError:
        return None


def partition(tmp_path):
    """Old segments 0, 10, 20, each with a .txnindex; new 0 (with one) and 20 (without)."""
    pdir, staged = str(tmp_path / "p"), str(tmp_path / "staged")
    for base in (0, 10, 20):
        write(pdir, base, (*SEGMENT, filenames.TXNINDEX), "old")
    write(staged, 0, (*SEGMENT, filenames.TXNINDEX), "new")
    write(staged, 20, SEGMENT, "new")
    swap.stage(pdir, staged, [0, 20])
    swap.commit(pdir, [0, 20], [0, 10, 20], {})
    return pdir


def test_a_new_segment_without_a_txnindex_does_not_keep_the_old_one(tmp_path):
    pdir = partition(tmp_path)
    assert swap.roll_forward(pdir)
    assert read(pdir, 0, filenames.TXNINDEX) == "new" and read(pdir, 0, filenames.LOG) == "new"
    assert read(pdir, 20, filenames.LOG) == "new" and read(pdir, 20, filenames.TXNINDEX) is None
    assert read(pdir, 10, filenames.LOG) is None and read(pdir, 10, filenames.TXNINDEX) is None
    assert not swap.pending(pdir)


def test_a_roll_forward_cut_short_keeps_the_new_txnindex_and_drops_the_old(tmp_path):
    pdir = partition(tmp_path)
    # a crash in step 2: 20 not touched yet, 0's new .txnindex in place but not its .log
    for base in (0, 20):
        for suffix in SEGMENT + ((filenames.TXNINDEX,) if base == 0 else ()):
            os.replace(filenames.path(pdir, base, suffix + filenames.CLEANED),
                       filenames.path(pdir, base, suffix + filenames.SWAP))
    os.replace(filenames.path(pdir, 0, filenames.TXNINDEX + filenames.SWAP),
               filenames.path(pdir, 0, filenames.TXNINDEX))
    assert swap.roll_forward(pdir)
    assert read(pdir, 0, filenames.TXNINDEX) == "new"
    assert read(pdir, 20, filenames.TXNINDEX) is None and read(pdir, 20, filenames.LOG) == "new"
    assert not swap.roll_forward(pdir)  # (done: nothing left to do)


def test_a_manifest_of_an_earlier_rivven_leaves_txnindex_files_alone(tmp_path):
    pdir = partition(tmp_path)
    p = os.path.join(pdir, swap.MANIFEST)
    with open(p) as f:
        m = json.load(f)
    assert m["txnindex"] == [0]
    del m["txnindex"]
    with open(p, "w") as f:
        json.dump(m, f)
    assert swap.roll_forward(pdir)
    assert read(pdir, 20, filenames.TXNINDEX) == "old"  # (as that version left it)
