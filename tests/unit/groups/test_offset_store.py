"""Issue 13, crafted metadata and input: topics.json, rivven.json, offsets.log frames and
``produce --input json`` lines (clean errors, never an internal one); the offsets log read in
bounded memory; index entries checked before use; names whose every later operation works.

Everything runs the real CLI in subprocesses over real files; memory limits are real
``RLIMIT_AS`` limits set in the child before the CLI starts.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys

import pytest
from conftest import ROOT, flip

from engine.format.crc import crc32c

LIMITED = """
import resource, runpy, sys
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["rivven"] + sys.argv[2:]
runpy.run_module("rivven_cli.main", run_name="__main__")
"""
LIMIT_MB = 350  # the CLI itself runs in well under 200 MB of address space


def run_limited(data_dir: str, *args: str, limit_mb: int = LIMIT_MB, input: bytes = b""
                ) -> subprocess.CompletedProcess:
    """The real CLI in a child whose address space is limited to ``limit_mb``."""
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", LIMITED, str(limit_mb), *args], input=input,
                          capture_output=True, env=env, timeout=300, cwd=ROOT)


def clean(r: subprocess.CompletedProcess, code: int) -> str:
    """Assert exit ``code`` with one clean error line (no internal error, no traceback)."""
    err = r.stderr.decode(errors="replace")
    assert r.returncode == code, (r.returncode, err)
    assert "internal error" not in err and "Traceback" not in err and "MemoryError" not in err
    return err


# ================================================================ topics.json
ID = "0123456789abcdef0123456789abcdef"


def entry(**over):
    t = {"id": ID, "partitions": 1, "config": {}, "created_ms": 1}
    t.update(over)
    return t


def catalog_text(topics) -> str:
    return json.dumps({"format": 1, "topics": topics})


CRAFTED_CATALOGS = {
    "infinity": catalog_text({"t": entry()}).replace('"created_ms": 1', '"created_ms": Infinity'),
    "nan": catalog_text({"t": entry()}).replace('"partitions": 1', '"partitions": NaN'),
    "huge-float": catalog_text({"t": entry()}).replace('"created_ms": 1', '"created_ms": 1e400'),
    "deep": '{"format": 1, "topics": ' + "[" * 10_000 + "]" * 10_000 + "}",
    "deep-config": catalog_text({"t": entry()}).replace(
        '"config": {}', '"config": ' + '{"a":' * 10_000 + "1" + "}" * 10_000),
    "non-hex-id": catalog_text({"t": entry(id="z" * 32)}),
    "short-id": catalog_text({"t": entry(id="abc")}),
    "int-id": catalog_text({"t": entry(id=12345)}),
    "float-partitions": catalog_text({"t": entry(partitions=2.5)}),
    "bool-partitions": catalog_text({"t": entry(partitions=True)}),
    "string-created": catalog_text({"t": entry(created_ms="yesterday")}),
    "negative-created": catalog_text({"t": entry(created_ms=-5)}),
    "bad-config-value": catalog_text({"t": entry(config={"retention.ms": "soon"})}),
    "unknown-config-key": catalog_text({"t": entry(config={"retention.mss": "1"})}),
    "non-string-config": catalog_text({"t": entry(config={"retention.ms": 5})}),
    "config-list": catalog_text({"t": entry(config=["retention.ms"])}),
    "topics-list": json.dumps({"format": 1, "topics": ["t"]}),
    "topic-not-object": catalog_text({"t": 5}),
    "not-utf8": b'{"format": 1, "topics": {"\xff": 1}}',
}


@pytest.mark.parametrize("case", sorted(CRAFTED_CATALOGS))
def test_a_crafted_catalog_is_damage_naming_the_file_in_every_command(rivven, data_dir, case):
    assert rivven("topic", "create", "t").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    text = CRAFTED_CATALOGS[case]
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    before = open(path, "rb").read()
    for args in (("topic", "list"), ("consume", "t", "-n", "1"), ("topic", "create", "u")):
        err = clean(rivven(*args, input=b"x\n"), 3)
        assert path in err and "damaged" in err, (args, err)
    r = rivven("produce", "t", input=b"x\n")
    assert path in clean(r, 3)
    assert open(path, "rb").read() == before  # never rewritten from damage


def test_a_bad_stored_config_value_names_the_topic_the_key_and_the_file(rivven, data_dir):
    assert rivven("topic", "create", "orders", "-c", "retention.ms=1000").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    doc = json.loads(open(path).read())
    doc.pop("crc32c", None)
    doc["topics"]["orders"]["config"]["retention.ms"] = "-7"
    with open(path, "w") as f:
        f.write(json.dumps(doc))
    err = clean(rivven("topic", "describe", "orders"), 3)
    assert "topic orders" in err and "retention.ms" in err and path in err


def test_the_catalog_is_sealed_and_a_flipped_bit_is_damage(rivven, data_dir):
    assert rivven("topic", "create", "t", "-p", "2").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    raw = open(path, "rb").read()
    assert b'"crc32c"' in raw
    # '2' -> '3': still a valid catalog, but not the one written
    flip(path, raw.index(b'"partitions": 2') + len(b'"partitions": '), 0)
    err = clean(rivven("topic", "list"), 3)
    assert "checksum mismatch" in err and path in err


def test_a_catalog_written_before_seals_is_still_read_and_sealed_on_the_next_change(
        rivven, data_dir):
    assert rivven("topic", "create", "old").returncode == 0
    path = os.path.join(data_dir, "topics.json")
    doc = json.loads(open(path).read())
    del doc["crc32c"]  # as rivven wrote it before seals
    with open(path, "w") as f:
        f.write(json.dumps(doc, indent=1))
    r = rivven("topic", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [t["topic"] for t in json.loads(r.stdout)] == ["old"]
    assert rivven("topic", "create", "new").returncode == 0
    doc = json.loads(open(path).read())
    assert sorted(doc["topics"]) == ["new", "old"] and "crc32c" in doc


# ================================================================ rivven.json
@pytest.mark.parametrize("text", [
    '{"format": Infinity}',
    '{"format": NaN}',
    '{"format": 1.0}',
    '{"format": "1"}',
    '{"format": true}',
    "[1]",
    "1e400",
    "[" * 10_000 + "]" * 10_000,
    '{"format": ' + "[" * 10_000 + "]" * 10_000 + "}",
])
def test_a_crafted_marker_is_damage_naming_the_file(rivven, data_dir, text):
    assert rivven("topic", "create", "t").returncode == 0
    marker = os.path.join(data_dir, "rivven.json")
    with open(marker, "w") as f:
        f.write(text)
    for args in (("topic", "list"), ("produce", "t")):
        err = clean(rivven(*args, input=b"x\n"), 3)
        assert marker in err and "damaged" in err
    assert open(marker).read() == text


# ================================================================ offsets.log frames
def frame(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), crc32c(payload)) + payload


def group_with_commits(rivven, data_dir, commits: int = 1) -> str:
    """A group g over topic t (3 records) with ``commits`` commits; its offsets.log."""
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
        rivven, data_dir, case):
    log = group_with_commits(rivven, data_dir)
    at = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(frame(CRAFTED_FRAMES[case]))
    before = open(log, "rb").read()
    for args in (("group", "describe", "g"), ("group", "list"),
                 ("consume", "t", "-g", "g", "-n", "1"),
                 ("group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute")):
        err = clean(rivven(*args), 3)
        assert log in err and f"byte {at}" in err, (args, err)
    assert open(log, "rb").read() == before  # nothing cut, nothing appended
    # the way out: delete the group (then it can be used again)
    r = rivven("group", "delete", "g", "-y")
    assert r.returncode == 0, r.stderr
    assert rivven("consume", "t", "-g", "g", "-n", "1").returncode == 0


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


@pytest.mark.slow
def test_an_offsets_log_larger_than_the_memory_limit_is_streamed(rivven, data_dir):
    log = group_with_commits(rivven, data_dir)
    meta = "m" * (4 << 20)
    with open(log, "ab") as f:  # 100 commits of 4 MiB each (400 MiB): the last one wins
        for i in range(100):
            payload = json.dumps({"ts": 10 + i, "set": [["t", 0, i % 3, meta]]}).encode()
            f.write(frame(payload))
    assert os.path.getsize(log) > (LIMIT_MB + 50) << 20
    r = run_limited(data_dir, "group", "describe", "g", "--json")
    clean(r, 0)
    row = json.loads(r.stdout)["partitions"][0]
    assert (row["current_offset"], row["last_commit"]) == (99 % 3, 109)


# ================================================================ produce --input json
BAD_LINES = {
    "infinity": (b'{"value": Infinity}', "Infinity"),
    "nan": (b'{"value": {"a": NaN}}', "NaN"),
    "huge-float": (b'{"value": 1e400}', "out of range"),
    "huge-negative-float": (b'{"key": [-1e999]}', "out of range"),
    "deep": (b'{"value": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nested too deeply"),
    "int-digits": (b'{"value": ' + b"1" * 5000 + b"}", "digits"),
    "not-utf8": (b'{"value": "\xff"}', "malformed JSON"),
    "surrogate-key": (b'{"key": "\\ud800"}', "surrogate"),
    "surrogate-value": (b'{"value": "a\\udfff"}', "surrogate"),
    "surrogate-header-key": (b'{"headers": [["\\ud800", "v"]]}', "surrogate"),
    "surrogate-header-value": (b'{"headers": {"k": "\\ud800"}}', "surrogate"),
    "partition-too-large": (b'{"partition": 2}', "partition must be an integer from 0 to 1"),
    "partition-huge": (b'{"partition": 99999999999999999999}', "partition must be"),
    "partition-bool": (b'{"partition": true}', "partition must be"),
    "partition-float": (b'{"partition": 1.0}', "partition must be"),
    "timestamp-huge": (b'{"timestamp": 99999999999999999999}', "timestamp must be"),
    "timestamp-bool": (b'{"timestamp": false}', "timestamp must be"),
    "headers-pairs": (b'{"headers": [["only-a-key"]]}', "[key, value] pairs"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_json_input_line_is_a_clean_error_naming_the_line(rivven, case):
    assert rivven("topic", "create", "t", "-p", "2").returncode == 0
    line, says = BAD_LINES[case]
    r = rivven("produce", "t", "--input", "json", input=b'{"value": "first"}\n' + line + b"\n"
               + b'{"value": "never"}\n')
    err = clean(r, 1)
    assert "line 2:" in err and says in err, err
    r = rivven("consume", "t", "-f", "%v\n")
    assert r.stdout == b"first\n"  # the line before is stored, nothing after


# ================================================================ indexes
def sealed_topic(rivven, data_dir) -> str:
    """Topic x: 300 records in 60 batches over 3 segments, indexed every ~256 bytes."""
    assert rivven("topic", "create", "x", "-c", "segment.bytes=4096",
                  "-c", "index.interval.bytes=256").returncode == 0
    r = rivven("produce", "x", "--batch-records", "5",
               input=b"".join(b"%d\n" % i for i in range(300)))
    assert r.returncode == 0, r.stderr
    pdir = os.path.join(data_dir, "topics", "x", "partition-0")
    assert len([f for f in os.listdir(pdir) if f.endswith(".log")]) >= 3
    return os.path.join(pdir, "00000000000000000000")


def set_entry(path: str, i: int, fmt: str, *values: int) -> None:
    width = struct.calcsize(fmt)
    with open(path, "r+b") as f:
        f.seek(i * width)
        f.write(struct.pack(fmt, *values))


def entries(path: str, fmt: str) -> list[tuple[int, ...]]:
    data = open(path, "rb").read()
    return list(struct.iter_unpack(fmt, data))


@pytest.mark.parametrize("position", [-5, -(1 << 31), 1 << 30, 849, 0])
def test_a_crafted_index_entry_is_checked_before_use(rivven, data_dir, position):
    seg = sealed_topic(rivven, data_dir)
    rel, _ = entries(seg + ".index", "<ii")[3]
    set_entry(seg + ".index", 3, "<ii", rel, position)
    r = rivven("consume", "x", "--offset", str(rel + 5), "-n", "2", "-f", "%o %v\n")
    err = clean(r, 0)
    assert r.stdout == b"%d %d\n%d %d\n" % (rel + 5, rel + 5, rel + 6, rel + 6)
    assert "warning: ignoring the indexes of" in err and "segment reindex" in err  # reported
    r = rivven("consume", "x", "-g", "g", "-n", "1", "-f", "%o\n")
    clean(r, 0)
    assert r.stdout == b"0\n"
    r = rivven("segment", "verify")
    clean(r, 3)
    assert (seg + ".index").encode() in r.stdout
    # the way out: rebuilt from the log
    assert rivven("segment", "reindex", seg + ".log").returncode == 0
    clean(rivven("segment", "verify"), 0)


@pytest.mark.parametrize("entry", [(0, -5), (1, -1), (1, (1 << 31) - 1), (2, 0)])
def test_a_crafted_time_index_entry_never_breaks_a_time_lookup(rivven, data_dir, entry):
    seg = sealed_topic(rivven, data_dir)
    times = entries(seg + ".timeindex", "<qi")
    r = rivven("offsets", "x", "--time", str(times[1][0] + 1), "--json")
    want = json.loads(r.stdout)[0]["offset"]
    i, rel = entry
    set_entry(seg + ".timeindex", i, "<qi", times[i][0], rel)
    r = rivven("offsets", "x", "--time", str(times[1][0] + 1), "--json")
    clean(r, 0)
    assert json.loads(r.stdout)[0]["offset"] == want
    r = rivven("segment", "verify")
    clean(r, 3)
    assert (seg + ".timeindex").encode() in r.stdout


@pytest.mark.slow
def test_a_huge_sparse_index_is_not_read(rivven, data_dir):
    seg = sealed_topic(rivven, data_dir)
    os.truncate(seg + ".index", 2 << 30)
    os.truncate(seg + ".timeindex", 3 << 30)
    r = run_limited(data_dir, "consume", "x", "--offset", "35", "-n", "1")
    clean(r, 0)
    assert r.stdout == b"35\n"
    r = run_limited(data_dir, "offsets", "x", "--time", "0", "--json")
    clean(r, 0)
    assert json.loads(r.stdout)[0]["offset"] == 0
    r = run_limited(data_dir, "segment", "verify")
    clean(r, 3)
    assert b"more entries than" in r.stdout
    r = run_limited(data_dir, "produce", "x", input=b"more\n")  # a writer: works too
    clean(r, 0)


def test_a_writer_rebuilds_a_crafted_index_of_the_active_segment(rivven, data_dir):
    assert rivven("topic", "create", "a", "-c", "index.interval.bytes=0").returncode == 0
    for i in range(5):
        assert rivven("produce", "a", input=b"%d\n" % i).returncode == 0
    base = os.path.join(data_dir, "topics", "a", "partition-0", "00000000000000000000")
    good = entries(base + ".index", "<ii")
    assert len(good) == 4
    set_entry(base + ".index", 2, "<ii", good[2][0], -12)
    r = rivven("consume", "a", "--offset", "3", "-n", "1")
    assert clean(r, 0) == "" and r.stdout == b"3\n"  # (the active segment: not reported)
    assert rivven("produce", "a", input=b"5\n").returncode == 0
    assert entries(base + ".index", "<ii")[:4] == good
    assert rivven("segment", "verify").returncode == 0


# ================================================================ names
def names_cycle(rivven, group: str, member: str | None = None) -> None:
    """Create (consume -g, commit), use, reset, delete and recreate a group."""
    extra = ("--member-id", member) if member is not None else ()
    r = rivven("consume", "t", "-g", group, "-n", "1", *extra)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"a\n"
    r = rivven("group", "describe", group, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitions"][0]["current_offset"] == 1
    r = rivven("group", "list", "--json")
    assert group in [g["group"] for g in json.loads(r.stdout)]
    r = rivven("group", "reset-offsets", group, "--topic", "t", "--to-latest", "--execute")
    assert r.returncode == 0, r.stderr
    r = rivven("group", "delete", group, "-y")
    assert r.returncode == 0, r.stderr
    r = rivven("group", "list", "--json")
    assert json.loads(r.stdout) == []
    r = rivven("group", "reset-offsets", group, "--topic", "t", "--to-offset", "2", "--execute")
    assert r.returncode == 0, r.stderr  # recreated by a reset
    r = rivven("consume", "t", "-g", group, "-n", "1", *extra)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"c\n"
    assert rivven("group", "delete", group, "-y").returncode == 0


@pytest.fixture
def topic_t(rivven):
    assert rivven("topic", "create", "t").returncode == 0
    assert rivven("produce", "t", input=b"a\nb\nc\n").returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("group", ["g" * 249, "é" * 42, "\U0001F600" * 21, " " * 85],
                         ids=["ascii-249", "e-acute-42", "emoji-21", "spaces"])
def test_the_longest_group_names_can_be_created_used_deleted_and_recreated(
        rivven, topic_t, group):
    names_cycle(rivven, group)


@pytest.mark.slow
@pytest.mark.parametrize("member", ["m" * 200, "é" * 125, "\U0001F600" * 62],
                         ids=["ascii-200", "e-acute-125", "emoji-62"])
def test_the_longest_member_ids_can_be_used_again_and_again(rivven, topic_t, member):
    names_cycle(rivven, "g", member)


@pytest.mark.parametrize("group,chars,nbytes", [
    ("g" * 250, 250, 250), ("é" * 43, 43, 258), ("é" * 100, 100, 600),
    ("\U0001F600" * 22, 22, 264), (" " * 86, 86, 258)])
def test_a_group_name_too_long_for_later_operations_is_refused_at_creation(
        rivven, data_dir, topic_t, group, chars, nbytes):
    for args in (("consume", "t", "-g", group, "-n", "1"),
                 ("group", "reset-offsets", group, "--topic", "t", "--to-earliest",
                  "--execute")):
        err = clean(rivven(*args), 1)
        assert f"{chars} characters, {nbytes} bytes" in err
        assert "at most 249 characters and 255 bytes" in err
    assert not os.path.exists(os.path.join(data_dir, "groups")) or \
        os.listdir(os.path.join(data_dir, "groups")) == []


@pytest.mark.parametrize("member,chars,nbytes", [
    ("m" * 201, 201, 201), ("é" * 126, 126, 252), ("\U0001F600" * 63, 63, 252)])
def test_a_member_id_too_long_is_refused_naming_the_limits(rivven, topic_t, member, chars,
                                                          nbytes):
    err = clean(rivven("consume", "t", "-g", "g", "--member-id", member, "-n", "1"), 1)
    assert f"{chars} characters, {nbytes} bytes" in err
    assert "at most 200 characters and 250 bytes" in err


@pytest.mark.parametrize("name,where,code", [
    ("a\nb", 2, "U+000A"), ("\tx", 1, "U+0009"), ("ab\x1b[31m", 3, "U+001B"),
    ("x\x7f", 2, "U+007F"), ("x\u2028y", 2, "U+2028"), ("nul\x00", 4, "U+0000")])
def test_control_characters_are_refused_in_group_names_and_member_ids(
        rivven, data_dir, topic_t, name, where, code):
    if "\x00" in name:  # (no NUL in a command line: the engine API)
        from engine import Engine
        from engine.errors import InvalidArgument
        with Engine.open(data_dir) as eng:
            says = re.escape(f"character {where} is a control character ({code})")
            with pytest.raises(InvalidArgument, match=says):
                eng.consumer(name, "t")
            with pytest.raises(InvalidArgument, match=says):
                eng.consumer("g", "t", member_id=name)
            with pytest.raises(InvalidArgument, match=f"client id .*character {where}"):
                eng.consumer("g", "t", client_id=name)
        return
    for args in (("consume", "t", "-g", name, "-n", "1"),
                 ("consume", "t", "-g", "g", "--member-id", name, "-n", "1"),
                 ("group", "reset-offsets", name, "--topic", "t", "--to-earliest", "--execute")):
        err = clean(rivven(*args), 1)
        assert f"character {where} is a control character ({code})" in err, err
    assert rivven("group", "list", "--json").stdout.strip() == b"[]"


def test_a_group_made_with_a_newline_by_an_older_rivven_lists_as_one_line_and_deletes(
        rivven, data_dir, topic_t):
    assert rivven("consume", "t", "-g", "x", "-n", "1").returncode == 0
    root = os.path.join(data_dir, "groups")
    os.rename(os.path.join(root, "x"), os.path.join(root, "a%0Ab"))  # as quote() named it
    r = rivven("group", "list")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.decode().splitlines()
    assert len(rows) == 2 and rows[1].startswith("a\\nb ")  # header + one escaped row
    r = rivven("group", "list", "--json")
    assert [g["group"] for g in json.loads(r.stdout)] == ["a\nb"]
    assert rivven("group", "delete", "a\nb", "-y").returncode == 0
    assert os.listdir(root) == []


def test_a_directory_no_group_maps_to_is_not_listed(rivven, data_dir, topic_t):
    assert rivven("consume", "t", "-g", "real", "-n", "1").returncode == 0
    for stray in ("a b", "x" * 250, "%zz"):
        os.makedirs(os.path.join(data_dir, "groups", stray))
    r = rivven("group", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [g["group"] for g in json.loads(r.stdout)] == ["real"]


def test_a_group_name_that_is_rich_markup_is_shown_as_it_is(rivven, topic_t):
    assert rivven("consume", "t", "-g", "[bold]x[/bold]", "-n", "1").returncode == 0
    r = rivven("group", "list")
    assert b"[bold]x[/bold]" in r.stdout


@pytest.mark.parametrize("name,ok", [("t" * 249, True), ("t" * 250, False),
                                     ("é", False), ("a\nb", False)])
def test_topic_names_are_checked_at_creation(rivven, name, ok):
    r = rivven("topic", "create", name)
    if ok:
        assert r.returncode == 0, r.stderr
        assert rivven("produce", name, input=b"x\n").returncode == 0
    else:
        assert "1-249 characters" in clean(r, 1)
