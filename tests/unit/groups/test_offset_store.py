"""A group's offsets.log (engine.groups.offset_store) as crafted or damaged: a commit frame with
a valid CRC but impossible values is damage naming the file and byte, a bad frame with commits
after it is not a torn tail, a torn last commit is cut by the next writer, and a 4 GiB sparse
log or one larger than the memory limit is read in bounded memory (real ``RLIMIT_AS``)."""

from __future__ import annotations

import json
import os
import struct

import pytest
from helpers import flip
from helpers.crafted import clean, run_limited

from engine.format.crc import crc32c


# ================================================================ offsets.log frames
def frame(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), crc32c(payload)) + payload


def group_with_commits(rivven, data_dir, commits: int = 1) -> str:
    """A group g over topic t (3 records) with ``commits`` commits; its offsets.log
    (``rivven``: the ``rivven`` or the ``cli`` fixture)."""
    assert rivven("topic", "create", "t").returncode == 0
    assert rivven("produce", "t", input=b"a\nb\nc\n").returncode == 0
    for _ in range(commits):
        r = rivven("consume", "t", "-g", "g", "-n", "1")
        assert r.returncode == 0, r.stderr
    return os.path.join(data_dir, "groups", "g", "offsets.log")


CRAFTED_FRAMES = {
    "infinity-ts": b'{"ts":Infinity,"set":[]}',
    "nan-offset": b'{"ts":1,"set":[["t",0,NaN,""]]}',
    "huge-float": b'{"ts":1e400,"set":[]}',
    "deep": b'{"ts":1,"set":' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "not-an-object": b"[1,2,3]",
    "no-ts": b'{"set":[]}',
    "string-ts": b'{"ts":"now","set":[]}',
    "set-not-a-list": b'{"ts":1,"set":"t"}',
    "short-row": b'{"ts":1,"set":[["t",0]]}',
    "string-partition": b'{"ts":1,"set":[["t","0",5,""]]}',
    "negative-offset": b'{"ts":1,"set":[["t",0,-1,""]]}',
    "float-offset": b'{"ts":1,"set":[["t",0,1.5,""]]}',
    "bad-topic-name": b'{"ts":1,"set":[["a/b",0,1,""]]}',
    "metadata-not-a-string": b'{"ts":1,"set":[["t",0,1,{"a":1}]]}',
    "bad-del": b'{"ts":1,"set":[],"del":[["t"]]}',
    "not-utf8": b'{"ts":1,"set":[["\xff",0,1,""]]}',
    "int-digits": b'{"ts":' + b"9" * 5000 + b',"set":[]}',
}


@pytest.mark.parametrize("case", sorted(CRAFTED_FRAMES))
def test_a_crafted_commit_with_a_valid_crc_is_damage_naming_file_and_byte(
        cli, data_dir, case):
    log = group_with_commits(cli, data_dir)
    at = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(frame(CRAFTED_FRAMES[case]))
    before = open(log, "rb").read()
    for args in (("group", "describe", "g"), ("group", "list"),
                 ("consume", "t", "-g", "g", "-n", "1"),
                 ("group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute")):
        err = clean(cli(*args), 3)
        assert log in err and f"byte {at}" in err, (args, err)
    assert open(log, "rb").read() == before  # nothing cut, nothing appended
    # the way out: delete the group (then it can be used again)
    r = cli("group", "delete", "g", "-y")
    assert r.returncode == 0, r.stderr
    assert cli("consume", "t", "-g", "g", "-n", "1").returncode == 0


def test_a_bad_frame_with_commits_after_it_is_damage_not_a_torn_tail(rivven, data_dir):
    log = group_with_commits(rivven, data_dir, commits=3)
    data = open(log, "rb").read()
    first = struct.unpack_from("<I", data, 0)[0] + 8
    flip(log, first + 12, 1)  # inside the second commit's payload: its CRC fails
    before = open(log, "rb").read()
    err = clean(rivven("group", "describe", "g"), 3)
    assert f"commit at byte {first}" in err and "checksum mismatch" in err
    err = clean(rivven("consume", "t", "-g", "g", "-n", "1"), 3)
    assert log in err
    assert open(log, "rb").read() == before  # the third commit was never cut away


def test_a_torn_last_commit_is_still_cut_by_the_next_writer(rivven, data_dir):
    log = group_with_commits(rivven, data_dir, commits=2)
    data = open(log, "rb").read()
    first = struct.unpack_from("<I", data, 0)[0] + 8
    flip(log, len(data) - 3, 2)  # the last commit, half written by a dying writer
    r = rivven("group", "describe", "g", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitions"][0]["current_offset"] == 1
    r = rivven("consume", "t", "-g", "g", "-n", "1")
    assert r.returncode == 0 and r.stdout == b"b\n", r.stderr
    r = rivven("group", "describe", "g", "--json")
    assert json.loads(r.stdout)["partitions"][0]["current_offset"] == 2
    assert len(open(log, "rb").read()) == len(data)  # the torn commit was cut, one appended
    assert open(log, "rb").read()[:first] == data[:first]


# ================================================================ offsets.log size
@pytest.mark.slow
def test_a_4_gib_sparse_offsets_log_reads_in_bounded_memory(rivven, data_dir):
    log = group_with_commits(rivven, data_dir)
    good = os.path.getsize(log)
    os.truncate(log, 4 << 30)  # a zero-filled tail: an append a crash left unwritten
    for args in (("group", "describe", "g", "--json"), ("group", "list", "--json")):
        r = run_limited(data_dir, *args)
        clean(r, 0)
    r = run_limited(data_dir, "group", "describe", "g", "--json")
    assert json.loads(r.stdout)["partitions"][0]["current_offset"] == 1
    r = run_limited(data_dir, "consume", "t", "-g", "g", "-n", "1")
    clean(r, 0)
    assert r.stdout == b"b\n"
    assert good < os.path.getsize(log) < 4096  # the tail cut, the new commit appended


@pytest.mark.slow
def test_a_4_gib_offsets_log_with_data_after_a_hole_is_clean_damage(rivven, data_dir):
    log = group_with_commits(rivven, data_dir)
    good = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.seek(4 << 30)
        f.write(b"not zeros")
    for args in (("group", "describe", "g"), ("group", "list"),
                 ("consume", "t", "-g", "g", "-n", "1")):
        err = clean(run_limited(data_dir, *args), 3)
        assert f"commit at byte {good}" in err
    assert os.path.getsize(log) == (4 << 30) + 9


STREAMED_LIMIT_MB = 120  # (``group describe`` itself runs in about 60 MB of address space)


@pytest.mark.slow
def test_an_offsets_log_larger_than_the_memory_limit_is_streamed(rivven, data_dir):
    """A log 50 MB larger than the address space the command may use is read commit by
    commit (the whole file would not fit): the bound of 400 MiB under 350 MB, at less than
    half the size."""
    log = group_with_commits(rivven, data_dir)
    meta = "m" * (4 << 20)
    with open(log, "ab") as f:  # 44 commits of 4 MiB each (176 MiB): the last one wins
        for i in range(44):
            payload = json.dumps({"ts": 10 + i, "set": [["t", 0, i % 3, meta]]}).encode()
            f.write(frame(payload))
    assert os.path.getsize(log) > (STREAMED_LIMIT_MB + 50) << 20
    r = run_limited(data_dir, "group", "describe", "g", "--json", limit_mb=STREAMED_LIMIT_MB)
    clean(r, 0)
    row = json.loads(r.stdout)["partitions"][0]
    assert (row["current_offset"], row["last_commit"]) == (43 % 3, 53)
