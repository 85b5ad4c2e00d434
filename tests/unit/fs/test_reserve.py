"""A full disk (engine.fs.reserve): on a real 20 MB tmpfs a full disk is a clean error that
delete-records and topic delete can free; write_atomic gives up the reserve before it says the
disk is full, and without space the deletes come before the metadata write."""

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.fs import IS_ROOT, consume_all, no_internal_error, produce

from engine import Engine, Record
from engine.fs import durable, guard, reserve
from engine.segments import filenames


# ------------------------------------------------------------------------------ a full disk
@pytest.fixture
def small_disk(tmp_path):
    """A real 20 MB tmpfs, mounted for the test."""
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], check=True)
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


WRITER = """
import os, sys
from engine import Engine, Record, StorageError
data, topic, n, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
eng = Engine.open(data)
acked = 0
while acked < count:
    try:
        eng.produce(topic, [Record(value=f"{topic}-{i:08d}-".encode() + b"x" * 1000)
                            for i in range(n + acked, n + acked + 20)])
    except StorageError as e:
        sys.stderr.write(str(e) + "\\n")
        break
    acked += 20
print("acked", acked, flush=True)
sys.stdin.read()  # alive (its WAL stream live) until the test kills it
"""


class Filler:
    """Real `rivven produce` calls of 1 KiB records until the disk is full; remembers every
    record a call acknowledged (exit 0), in order."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.acked: dict[str, list[str]] = {}
        self.errors: list[str] = []  # of the refused calls
        self.n = 0

    def produce(self, topic: str, count: int) -> subprocess.CompletedProcess:
        values = []
        for _ in range(count):
            values.append(f"{topic}-{self.n:08d}-" + "x" * 1000)
            self.n += 1
        r = produce(self.data_dir, topic, values)
        no_internal_error(r)
        if r.returncode == 0:
            self.acked.setdefault(topic, []).extend(values)
        return r

    def fill(self, topic: str) -> None:
        for size in (2000, 300, 40):  # (big calls, then smaller into what a refused one left)
            for _ in range(200):
                r = self.produce(topic, size)
                if r.returncode != 0:
                    assert r.returncode == 1, r.stderr.decode()
                    self.errors.append(r.stderr.decode())
                    break
            else:
                raise AssertionError("the disk never filled up")
        assert free_bytes(self.data_dir) < 256 << 10

    def writer(self, topic: str, count: int) -> subprocess.Popen:
        """A process producing ``count`` records (or until the disk is full), then alive
        until killed: its WAL stream holds them meanwhile."""
        p = subprocess.Popen([sys.executable, "-c", WRITER, self.data_dir, topic, str(self.n),
                              str(count)], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        acked = int(p.stdout.readline().split()[-1])
        self.acked.setdefault(topic, []).extend(
            f"{topic}-{i:08d}-" + "x" * 1000 for i in range(self.n, self.n + acked))
        self.n += acked + 100  # (a refused batch may still come back from its WAL)
        return p

    def check(self, topic: str) -> None:
        """Every acknowledged record is there, except a prefix deleted on purpose."""
        got = consume_all(self.data_dir, topic)
        acked = self.acked.get(topic, [])
        have, want = set(got), set(acked)
        kept = [v for v in acked if v in have]
        assert acked[len(acked) - len(kept):] == kept, "an acknowledged record is missing"
        assert [v for v in got if v in want] == kept  # (in order)


def middle(data_dir: str, topic: str) -> str:
    """The offset halfway through partition 0's log."""
    r = run_rivven(data_dir, "offsets", topic, "--json", check=True)
    p = json.loads(r.stdout)[0]
    return str((p["start_offset"] + p["end_offset"]) // 2)


@pytest.mark.slow
def test_a_full_disk_is_a_clean_error_and_can_be_freed(small_disk):
    """On a full 20 MB tmpfs: ENOSPC was an internal error, and every writable open failed
    (WAL replay wrote .checkpoint.tmp first), also for the commands that would free space.
    Each of them, run through the real CLI on a disk filled by real produce calls, now
    succeeds, frees space, and produce works again; nothing acknowledged is lost."""
    data = os.path.join(small_disk, "data")
    f = Filler(data)
    for t in ("t", "u"):
        run_rivven(data, "topic", "create", t, "-c", "segment.bytes=524288", check=True)
    f.produce("u", 2000)  # 2 MB for 'topic delete' to free

    def freed(command: list[str], *, expect_more: int = 256 << 10) -> None:
        before = free_bytes(data)
        r = run_rivven(data, *command)
        no_internal_error(r)
        assert r.returncode == 0, (command, r.stderr.decode())
        assert free_bytes(data) >= before + expect_more, command
        assert f.produce("t", 100).returncode == 0, command  # produce works again

    # delete-records, with the WAL of a writer killed -9 meanwhile (the open replays it, and
    # that wrote a .checkpoint.tmp first): the log start moves past whole segments, which go
    w = f.writer("t", 1000)
    f.fill("t")
    w.kill()
    w.wait()
    freed(["delete-records", "t", "--before", middle(data, "t"), "--yes"])
    f.check("t")
    # retention apply (after lowering retention.bytes: a catalog write on a full disk)
    f.fill("t")
    r = run_rivven(data, "topic", "alter-config", "t", "--set", "retention.bytes=4000000")
    no_internal_error(r)
    assert r.returncode == 0, r.stderr.decode()
    freed(["retention", "apply", "t"], expect_more=0)  # (the open may have applied it)
    assert free_bytes(data) > 2 << 20
    f.check("t")
    run_rivven(data, "topic", "alter-config", "t", "--delete", "retention.bytes", check=True)
    # topic delete
    f.fill("t")
    freed(["topic", "delete", "u", "--yes"], expect_more=1 << 20)
    f.acked.pop("u")
    f.check("t")
    # segment recover: a sealed segment with a torn tail (half a MB of zeros), then full
    pdir = os.path.join(data, "topics", "t", "partition-0")
    sealed = filenames.path(pdir, filenames.segment_bases(pdir)[-2], filenames.LOG)
    with open(sealed, "ab") as out:
        out.write(bytes(512 << 10))
    f.fill("t")
    freed(["segment", "recover", "t", "--yes"], expect_more=400 << 10)
    f.check("t")
    # wal checkpoint: the WAL stream of a producer killed -9 (then the disk filled up) goes
    run_rivven(data, "delete-records", "t", "--before", middle(data, "t"), "--yes",
               check=True)  # (room for the writer)
    w = f.writer("t", 1500)
    f.fill("t")
    w.kill()
    w.wait()
    before = free_bytes(data)
    r = run_rivven(data, "wal", "checkpoint")
    no_internal_error(r)
    assert r.returncode == 0, r.stderr.decode()
    assert [n for n in os.listdir(os.path.join(data, "wal")) if n != "recovery.lock"] == [], \
        r.stderr.decode() + r.stdout.decode()
    assert free_bytes(data) > before + (1 << 20)
    assert f.produce("t", 100).returncode == 0
    f.check("t")
    # a producer that wrote until the disk was full, then killed -9: its WAL may hold a batch
    # that never reached its segment (refused: not acknowledged), which a replay must put
    # back, with space it does not have. Opens still work: appends wait, frees proceed
    w = f.writer("t", 10 ** 9)
    w.kill()
    w.wait()
    f.fill("t")
    r = run_rivven(data, "delete-records", "t", "--before", middle(data, "t"), "--yes")
    no_internal_error(r)
    assert r.returncode == 0, r.stderr.decode()
    r = run_rivven(data, "wal", "checkpoint")
    no_internal_error(r)
    assert r.returncode == 0, r.stderr.decode()
    assert [n for n in os.listdir(os.path.join(data, "wal")) if n != "recovery.lock"] == []
    assert f.produce("t", 100).returncode == 0
    f.check("t")
    # and the rest of what a full disk meets: clean errors, nothing lost
    for cmd in (["topic", "create", "v" * 200, "-p", "50"], ["group", "reset-offsets", "g",
                "--topic", "t", "--to-earliest", "--execute"]):
        f.fill("t")
        r = run_rivven(data, *cmd)
        no_internal_error(r)
        assert r.returncode in (0, 1), r.stderr.decode()
    run_rivven(data, "delete-records", "t", "--before", middle(data, "t"), "--yes", check=True)
    assert f.produce("t", 100).returncode == 0
    f.check("t")
    # every refusal said what it was: the path and "disk full"
    assert f.errors and all("disk full" in e and "/data/" in e for e in f.errors), f.errors


def test_write_atomic_gives_up_the_reserve_then_says_disk_full(tmp_path, monkeypatch):
    d = str(tmp_path / "data")
    with Engine.open(d):
        pass
    assert os.path.getsize(os.path.join(d, reserve.RESERVE)) == reserve.RESERVE_BYTES
    real = os.write
    full = {"left": 1}

    def enospc_once(fd, b):
        if full["left"]:
            full["left"] -= 1
            raise OSError(28, "No space left on device")
        return real(fd, b)

    monkeypatch.setattr(os, "write", enospc_once)
    durable.write_atomic(os.path.join(d, "x.json"), b"{}")  # the reserve makes room
    assert not os.path.exists(os.path.join(d, reserve.RESERVE))
    full["left"] = 1
    from engine.errors import StorageError

    with pytest.raises(StorageError, match=r"x\.json: disk full"):
        durable.write_atomic(os.path.join(d, "x.json"), b"{}")  # no reserve left
    monkeypatch.setattr(os, "write", real)
    assert [n for n in os.listdir(d) if ".tmp." in n] == []  # (no temp file left behind)


@pytest.mark.parametrize("what", ["delete-records", "topic delete"])
def test_without_space_deletes_come_before_the_metadata_write(tmp_path, monkeypatch, what):
    """With the reserve gone, delete-records and topic delete still free space: the files go
    first, then the .checkpoint / catalog write, which the freed space makes possible."""
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "1000"})
        for _ in range(30):
            eng.produce("t", [Record(value=b"v" * 200)])
    os.unlink(os.path.join(d, reserve.RESERVE))
    monkeypatch.setattr(reserve, "keep_reserve", lambda data_dir: None)
    state = {"freed": False}
    real_write, real_delete, real_remove = durable._write_atomic, filenames.delete_segment, \
        guard.remove_tree

    def write(target, data, sync_dir=True):
        if not state["freed"]:
            raise OSError(28, "No space left on device")
        return real_write(target, data, sync_dir)

    def delete(directory, base):
        state["freed"] = True
        return real_delete(directory, base)

    def remove(root, path):
        state["freed"] = True
        return real_remove(root, path)

    with Engine.open(d) as eng:
        monkeypatch.setattr(durable, "_write_atomic", write)
        monkeypatch.setattr(filenames, "delete_segment", delete)
        monkeypatch.setattr(guard, "remove_tree", remove)
        if what == "delete-records":
            eng.maintenance.delete_records("t", {0: 20})
            assert eng.start_offsets("t")[0] == 20
        else:
            eng.delete_topic("t")
        monkeypatch.undo()
    with Engine.open(d) as eng:
        if what == "delete-records":
            assert eng.start_offsets("t")[0] == 20  # persisted
            assert [r.value for r in eng.read("t", 0, 20)][:1] == [b"v" * 200]
        else:
            assert eng.topics() == [] and os.listdir(os.path.join(d, "topics")) == []
