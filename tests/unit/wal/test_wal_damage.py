"""Damaged WAL records and bounded WAL scans: a record whose frame is intact but whose batch
is not is found by ``wal verify``, blocks every writable open with a clean error naming it, and
``wal recover`` cuts it (one kind of record through real processes, the others in process); an
8 GiB sparse WAL file is scanned in flat memory (real ``RLIMIT_AS``)."""

import json
import os
import resource
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.cli import run_in_process
from helpers.verify import assert_clean_error, batch, consume_all, forge

from engine import Engine


# ---------------------------------------------------------------- damaged WAL records
def dead_pid():
    """The pid of a process that has exited (what a dead stream's name carries)."""
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, check=True)
    return int(p.stdout)


def wal_frame(payload):
    """A WAL record whose frame (length, type, CRC, padding) is intact, whatever it holds."""
    from engine.format import crc
    from engine.wal.wal_file import FRAME, FRAME_SIZE

    value = crc.crc32c(payload, crc.crc32c(bytes([1, 0, 0, 0])))
    return FRAME.pack(len(payload), 1, value) + payload + bytes(-(FRAME_SIZE + len(payload)) & 7)


def wal_payload(tid, partition=0, name=b"t", batch_bytes=b"", name_len=None):
    from engine.wal.wal_file import PAYLOAD

    return PAYLOAD.pack(tid, partition, 1, len(name) if name_len is None else name_len) + \
        name + batch_bytes


def damaged_records(tid):
    good = batch(10)
    return {
        "short batch": wal_payload(tid, batch_bytes=b"\x01" * 20),
        "bad magic": wal_payload(tid, batch_bytes=b"\x00" * 104),
        "name longer than the record": wal_payload(tid, name_len=5000, batch_bytes=good),
        "name not utf-8": wal_payload(tid, name=b"\xff\xfe", batch_bytes=good),
        "partition out of range": wal_payload(tid, partition=1 << 31, batch_bytes=good),
        "batch shorter than its header says": wal_payload(tid, batch_bytes=good[:-8]),
        "batch crc": wal_payload(tid, batch_bytes=good[:-1] + b"\x01"),
        "batch header out of range": wal_payload(
            tid, batch_bytes=forge(good, base_offset=(1 << 63) - 1)),
    }


@pytest.mark.parametrize("name", [n if n == "short batch" else pytest.param(
    n, marks=pytest.mark.slow) for n in sorted(damaged_records(bytes(16)))])
def test_wal_record_with_intact_frame_and_bad_inner_batch(data_dir, name):
    """The reproducer: a WAL record with a valid frame CRC but a short or bad inner batch was
    a struct.error internal error in wal verify, produce, consume -g and segment recover,
    blocked every writable open, and wal recover found nothing."""
    run = run_rivven if name == "short batch" else run_in_process  # (one through a real process)
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        tid = bytes.fromhex(eng.topic("t").id)
    stream = os.path.join(data_dir, "wal", f"{dead_pid()}-deadbeef")
    os.makedirs(stream)
    open(os.path.join(stream, "stream.lock"), "w").close()
    wal = os.path.join(stream, "00000000000000000000.wal")
    first = wal_frame(wal_payload(tid, batch_bytes=batch(0)))  # replayable: log end is 0
    with open(wal, "wb") as f:
        f.write(first + wal_frame(damaged_records(tid)[name])
                + wal_frame(wal_payload(tid, batch_bytes=batch(10))))
    at = len(first)
    r = run(data_dir, "wal", "verify", "--json")
    assert_clean_error(r, 3)
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["file"], f["position"]) == (wal, at)
    r = run(data_dir, "wal", "inspect")
    assert_clean_error(r, 0)
    assert f"position: {at} error:" in r.stdout.decode()
    assert_clean_error(run(data_dir, "wal", "list"), 0)
    for args, inp in ((("produce", "t"), b"x\n"), (("consume", "t", "-g", "g", "-n", "1"), None),
                      (("segment", "recover"), None), (("wal", "checkpoint"), None)):
        r = run(data_dir, *args, input=inp)
        assert_clean_error(r, 3, f"{wal}:{at}", "rivven wal recover")
    r = run(data_dir, "wal", "recover", "--dry-run", "--json")
    assert_clean_error(r, 0)
    (row,) = json.loads(r.stdout)
    assert (row["file"], row["truncate_at"], row["damaged_record"], row["records_after"]) == \
        (wal, at, True, 1)
    r = run(data_dir, "wal", "recover")  # it would drop an intact record: asks
    assert_clean_error(r, 1, "--yes", "1 intact record(s)")
    r = run(data_dir, "wal", "recover", "--yes")
    assert_clean_error(r, 0)
    assert f"truncated at {at}" in r.stdout.decode() and os.path.getsize(wal) == at
    r = run(data_dir, "produce", "t", input=b"after\n")
    assert_clean_error(r, 0, "1 batch(es) replayed")
    r, offsets = consume_all(data_dir, 11, run)
    assert offsets == list(range(11))


# ---------------------------------------------------------------- bounded WAL scans
def limited(mib):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return set_limit


def rivven_limited(data_dir, *args, input=None, mib=300):
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "rivven_cli.main", *args], input=input,
                          capture_output=True, env=env, cwd=ROOT, timeout=600,
                          preexec_fn=limited(mib))


@pytest.mark.slow
@pytest.mark.parametrize("tail", ["zeros", "huge record"])
def test_sparse_multi_gib_wal_file_is_scanned_in_flat_memory(data_dir, tail):
    """The reproducer: scan_file read whole files: an 8 GiB sparse WAL file was a MemoryError
    under a 1 GB limit. Here the limit is 300 MB of address space."""
    code = (f"import os\nfrom engine import Engine, Record\ne = Engine.open({data_dir!r})\n"
            "e.create_topic('t', 1)\ne.produce('t', [Record(value=b'v%d' % i) for i in "
            "range(10)])\nos._exit(0)  # dies: its stream stays\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    from engine import wal as wal_mod
    from engine.wal.wal_file import FRAME

    (wal,) = [os.path.join(s, f) for s in wal_mod.all_streams(data_dir)
              for f in os.listdir(s) if f.endswith(".wal")]
    used = os.path.getsize(wal)
    if tail == "huge record":  # a frame claiming 2 GiB, its bytes the file's hole
        with open(wal, "ab") as f:
            f.write(FRAME.pack((1 << 31) - 1, 1, 0))
    os.truncate(wal, 8 << 30)  # sparse: 8 GiB that take no disk space
    r = rivven_limited(data_dir, "wal", "verify")
    assert_clean_error(r, 0 if tail == "zeros" else 3)
    if tail != "zeros":
        assert f"{wal} at position {used}: CRC mismatch" in r.stdout.decode()
    r = rivven_limited(data_dir, "wal", "list", "--json")
    assert_clean_error(r, 0)
    (row,) = json.loads(r.stdout)
    assert row["records"] == 1 and row["bytes"] == used
    r = rivven_limited(data_dir, "produce", "t", input=b"after\n")  # a writable open replays
    assert_clean_error(r, 0, "1 already in the log")
    assert not os.path.exists(wal)
    r, offsets = consume_all(data_dir, 11)
    assert offsets == list(range(11))
