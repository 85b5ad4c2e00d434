"""Issue 13, the file system part: symbolic links, file modes, lock waits, a full disk, and
the trash. Real files, real `rivven` processes, a real other user (`nobody`), a real tmpfs."""

import contextlib
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import ROOT, run_rivven

from engine import Engine, Record
from engine.errors import CorruptRecordError, LockTimeout
from engine.fs import durable, guard, locks, reserve
from engine.segments import filenames

IS_ROOT = os.geteuid() == 0
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def produce(data_dir: str, topic: str, values: list[str], *extra: str
            ) -> subprocess.CompletedProcess:
    return run_rivven(data_dir, *extra, "produce", topic, input="\n".join(values).encode() + b"\n")


def consume_all(data_dir: str, topic: str) -> list[str]:
    r = run_rivven(data_dir, "consume", topic, "-o", "beginning", "--json", check=True)
    return [json.loads(line)["value"] for line in r.stdout.decode().splitlines()]


def tree(path: str) -> dict[str, bytes | None]:
    """Everything under ``path``: relative name -> file bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".stats"]  # counters, not data (docs/METRICS.md)
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path)] = None
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                out[os.path.relpath(os.path.join(root, n), path)] = f.read()
    return out


def no_internal_error(r: subprocess.CompletedProcess) -> None:
    err = r.stderr.decode()
    assert "internal error" not in err and "Traceback" not in err, err


@pytest.fixture
def victim(tmp_path) -> str:
    """Another application's data next to the data dir: directories without WAL files."""
    v = tmp_path / "victim"
    for d in ("lost+found", "otherapp/data", "otherapp/cache"):
        (v / d).mkdir(parents=True)
    (v / "otherapp" / "data" / "precious.db").write_bytes(b"precious" * 100)
    (v / "notes.txt").write_text("keep me")
    return str(v)


# ------------------------------------------------------------------------------ symlinks
def test_symlinked_wal_dir_is_refused_not_followed(data_dir, victim):
    """A symlinked wal/ made the first plain produce delete every directory in the target
    without .wal files (lost+found, another app's data)."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    assert produce(data_dir, "t", ["a"]).returncode == 0
    shutil.rmtree(os.path.join(data_dir, "wal"))
    os.symlink(victim, os.path.join(data_dir, "wal"))
    before = tree(victim)
    r = produce(data_dir, "t", ["b"])
    no_internal_error(r)
    assert r.returncode == 3
    assert os.path.join(data_dir, "wal") in r.stderr.decode()
    assert "symbolic link" in r.stderr.decode()
    assert tree(victim) == before  # nothing deleted, nothing created (no stream.lock)


def test_stray_directories_in_wal_are_left_alone(data_dir):
    """wal/ on a file system of its own has a lost+found: not a stream, never removed."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    lf = os.path.join(data_dir, "wal", "lost+found")
    os.makedirs(os.path.join(lf, "inode-123"))
    elsewhere = os.path.join(os.path.dirname(data_dir), "elsewhere")
    os.makedirs(os.path.join(elsewhere, "keep"))
    os.symlink(elsewhere, os.path.join(data_dir, "wal", "123-0badc0de"))  # named like a stream
    assert produce(data_dir, "t", ["a", "b"]).returncode == 0
    assert run_rivven(data_dir, "wal", "checkpoint").returncode == 0
    assert os.path.isdir(os.path.join(lf, "inode-123"))
    assert os.path.isdir(os.path.join(elsewhere, "keep"))
    assert not os.path.exists(os.path.join(elsewhere, "stream.lock"))
    assert consume_all(data_dir, "t") == ["a", "b"]


def test_symlinked_trash_is_refused_not_emptied(data_dir, victim):
    """A symlinked trash/ had every subdirectory of its target deleted on a writable open."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    os.symlink(victim, os.path.join(data_dir, "trash"))
    before = tree(victim)
    r = produce(data_dir, "t", ["a"])
    no_internal_error(r)
    assert r.returncode == 3 and os.path.join(data_dir, "trash") in r.stderr.decode()
    r = run_rivven(data_dir, "topic", "delete", "t", "--yes")
    assert r.returncode == 3
    assert tree(victim) == before


def test_links_inside_the_trash_are_removed_not_followed(data_dir, victim):
    """A crash left a link in the trash (a topic dir that was a link, renamed there): the
    link goes, its target stays."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    os.makedirs(os.path.join(data_dir, "trash"), exist_ok=True)
    os.symlink(victim, os.path.join(data_dir, "trash", "t-1"))
    os.symlink(os.path.join(victim, "otherapp"), os.path.join(data_dir, "topics", "gone"))
    before = tree(victim)
    assert produce(data_dir, "t", ["a"]).returncode == 0
    assert not os.path.lexists(os.path.join(data_dir, "trash", "t-1"))
    assert tree(victim) == before


def test_segment_log_symlink_is_never_truncated_or_written(data_dir, tmp_path):
    """A segment .log that is a symlink to an outside file was truncated and appended to."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    assert produce(data_dir, "t", ["a"]).returncode == 0
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"someone else's bytes\n" * 50)
    log = os.path.join(data_dir, "topics", "t", "partition-0", filenames.name(0, filenames.LOG))
    os.unlink(log)
    os.symlink(outside, log)
    r = produce(data_dir, "t", ["b"])
    no_internal_error(r)
    assert r.returncode == 3 and log in r.stderr.decode()
    assert outside.read_bytes() == b"someone else's bytes\n" * 50
    for cmd in (["segment", "recover", "t", "--yes"], ["segment", "reindex", log]):
        r = run_rivven(data_dir, *cmd)
        no_internal_error(r)
        assert r.returncode in (1, 3)
        assert outside.read_bytes() == b"someone else's bytes\n" * 50


def test_symlinked_partition_dir_is_refused(data_dir, tmp_path):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    moved = str(tmp_path / "moved-partition")
    shutil.move(pdir, moved)
    os.symlink(moved, pdir)
    before = tree(moved)
    r = produce(data_dir, "t", ["a"])
    no_internal_error(r)
    assert r.returncode == 3 and pdir in r.stderr.decode()
    assert tree(moved) == before


def test_lease_file_link_is_never_truncated(data_dir, tmp_path):
    """A consumer's partition lease is truncated and written on acquisition: through a link
    it would overwrite any file the consumer's user can write."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not a lease")
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", [Record(value=b"v")])
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.close()
        leases = os.path.join(data_dir, "groups", "g", "leases")
        for n in os.listdir(leases):
            os.unlink(os.path.join(leases, n))
        os.symlink(outside, os.path.join(leases, "t@0"))
        try:
            eng.consumer("g", "t", enable_auto_commit=False).poll(timeout_ms=200)
            error = None
        except CorruptRecordError as e:
            error = e
    assert outside.read_text() == "not a lease"
    assert error is not None and "t@0" in str(error) and "symbolic link" in str(error)


def test_linked_group_dir_is_never_written_through(data_dir, victim):
    """groups/<group> as a link: a commit (reset-offsets) would write offsets.lock and
    offsets.log into the link's target, a dead member's file there would be removed."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    assert produce(data_dir, "t", ["a"]).returncode == 0
    os.makedirs(os.path.join(data_dir, "groups"))
    os.symlink(victim, os.path.join(data_dir, "groups", "g"))
    before = tree(victim)
    r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                   "--execute")
    no_internal_error(r)
    assert r.returncode == 3 and os.path.join(data_dir, "groups", "g") in r.stderr.decode()
    assert tree(victim) == before


def test_symlinked_data_dir_root_keeps_working(tmp_path):
    """Only the root may be a link: everything works through it, trash and WAL included."""
    real = tmp_path / "real"
    real.mkdir()
    root = str(tmp_path / "link")
    os.symlink(real, root)
    run_rivven(root, "topic", "create", "t", "-p", "2", check=True)
    assert produce(root, "t", [f"v{i}" for i in range(20)]).returncode == 0
    # a writer killed -9: its WAL stream is replayed and removed through the link
    killed_writer(root, partition=0)
    assert os.listdir(real / "wal")
    values = consume_all(root, "t")
    assert sorted(values) == sorted([f"v{i}" for i in range(20)] + ["late"])
    assert run_rivven(root, "wal", "checkpoint").returncode == 0
    assert [n for n in os.listdir(real / "wal") if n != "recovery.lock"] == []
    assert run_rivven(root, "topic", "delete", "t", "--yes").returncode == 0
    assert os.listdir(real / "topics") == [] and os.listdir(real / "trash") == []
    run_rivven(root, "topic", "create", "t", check=True)
    assert produce(root, "t", ["again"]).returncode == 0
    assert consume_all(root, "t") == ["again"]


def test_remove_tree_refuses_a_linked_parent(tmp_path, victim):
    """shutil.rmtree checks only the last component: a linked parent redirects it."""
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(victim, root / "trash")
    before = tree(victim)
    with pytest.raises(guard.UnexpectedLink, match="trash"):
        guard.remove_tree(str(root), str(root / "trash" / "otherapp"))
    assert tree(victim) == before
    # a link as the last component: the link goes, not its target
    os.symlink(victim, root / "entry")
    guard.remove_tree(str(root), str(root / "entry"))
    assert not os.path.lexists(root / "entry") and tree(victim) == before
    # links inside a removed tree are removed, never entered
    (root / "d" / "sub").mkdir(parents=True)
    os.symlink(victim, root / "d" / "sub" / "link")
    guard.remove_tree(str(root), str(root / "d"))
    assert not os.path.lexists(root / "d") and tree(victim) == before
    guard.remove_tree(str(root), str(root / "missing"))  # fine


def test_open_file_refuses_links_and_make_dir_refuses_linked_dirs(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"x")
    os.symlink(target, tmp_path / "f")
    for flags in (os.O_RDWR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_CREAT):
        with pytest.raises(guard.UnexpectedLink):
            guard.open_file(str(tmp_path / "f"), flags)
    assert target.read_bytes() == b"x"
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "dl")
    with pytest.raises(guard.UnexpectedLink):
        guard.make_dir(str(tmp_path / "dl"))
    with pytest.raises(guard.UnexpectedLink):
        guard.make_dirs(str(tmp_path), str(tmp_path / "dl" / "x"))
    assert not (tmp_path / "d" / "x").exists()


# ------------------------------------------------------------------------------ the trash
def test_longest_topic_name_can_be_deleted_and_recreated(data_dir):
    """Names of 236-249 characters were created but could not be deleted: the trash entry
    trash/<name>-<19 digits> exceeded 255 bytes (catalog entry gone, files stayed)."""
    for name in ("x" * 249, "y" * 236, "A-b_c." * 41 + "abc"):
        assert len(name) <= 249
        run_rivven(data_dir, "topic", "create", name, "-p", "2", check=True)
        assert produce(data_dir, name, ["one", "two"]).returncode == 0
        r = run_rivven(data_dir, "topic", "delete", name, "--yes")
        no_internal_error(r)
        assert r.returncode == 0, r.stderr.decode()
        assert not os.path.exists(os.path.join(data_dir, "topics", name))
        assert os.listdir(os.path.join(data_dir, "trash")) == []
        run_rivven(data_dir, "topic", "create", name, check=True)
        assert produce(data_dir, name, ["three"]).returncode == 0
        assert consume_all(data_dir, name) == ["three"]


# ------------------------------------------------------------------------------ file modes
@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def workload(data_dir: str) -> None:
    """Make the engine create every kind of file it has: segments and indexes (rolled),
    checkpoints, the catalog and its lock, partition locks, a WAL stream, tier manifests, cold
    objects and the cold cache, a compaction's .cleaner, group offsets, members and leases,
    hot-cache figures, the trash; a dead writer's WAL stream is looked at too."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2, {"segment.bytes": "2000", "remote.storage.enable": "true",
                                  "local.retention.bytes": "1"})
        eng.create_topic("k", 1, {"segment.bytes": "1000", "cleanup.policy": "compact",
                                  "min.cleanable.dirty.ratio": "0.01"})
        eng.create_topic("gone", 1)
        for i in range(30):
            eng.produce("t", [Record(key=b"k%d" % i, value=b"v" * 100)])
            eng.produce("k", [Record(key=b"k%d" % (i % 3), value=b"x" * 100)])
        eng.checkpoint()
        eng.maintenance.tier("t")
        assert eng.read("t", partition=0, offset=0)  # through the cold cache
        eng.maintenance.compact("k", force=True)
        c = eng.consumer("g", "t")
        c.poll(timeout_ms=500)
        c.commit()
        c.close()
        eng.delete_topic("gone")
        assert os.listdir(os.path.join(data_dir, "wal"))
        during = walk(data_dir)  # (while the WAL stream lives)
    # a writer that died: its stream stays until the next open replays it
    killed_writer(data_dir, partition=1)
    return during


def walk(root: str) -> dict[str, os.stat_result]:
    """lstat of ``root`` and everything under it."""
    out = {root: os.lstat(root)}
    for d, dirs, names in os.walk(root):
        for n in dirs + names:
            with contextlib.suppress(FileNotFoundError):  # (a temp file gone meanwhile)
                out[os.path.join(d, n)] = os.lstat(os.path.join(d, n))
    return out


KILLED_WRITER = """
import os, sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1])
eng.produce("t", [Record(value=b"late")], partition=int(sys.argv[2]))
print("ok", flush=True)
os.kill(os.getpid(), 9)
"""


def killed_writer(data_dir: str, partition: int) -> None:
    """A writer that produced one record to ``t`` and was killed -9: its WAL stream stays
    until an open replays it."""
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(data_dir), str(partition)],
                         cwd=ROOT, stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.readline() == b"ok\n"
    p.wait()


def wrong_modes(stats: dict[str, os.stat_result], file_mode: int, dir_mode: int) -> list[str]:
    bad = []
    for p, st in stats.items():
        want = dir_mode if stat.S_ISDIR(st.st_mode) else file_mode
        if stat.S_ISLNK(st.st_mode) or st.st_mode & 0o7777 != want:
            bad.append(f"{oct(st.st_mode & 0o7777)} {p}")
    return bad


def test_every_file_and_dir_is_private_whatever_the_umask(data_dir):
    """Files followed the umask (0644/0755 under the usual 022): now 0600 and 0700."""
    with umask(0):
        during = workload(data_dir)
    assert wrong_modes(during, 0o600, 0o700) == []
    names = {os.path.basename(p) for p in during}
    for kind in (".lock", "catalog.lock", "topics.json", ".checkpoint", "tier.json",
                 ".cleaner", "offsets.log", "offsets.lock", "t@0", "stream.lock",
                 filenames.name(0, filenames.LOG), filenames.name(0, filenames.INDEX), reserve.RESERVE):
        assert kind in names, kind
    assert any(p.endswith(".wal") for p in during)
    assert any(".tier-cache" in p for p in during) and any("/cold/" in p for p in during)
    after = walk(data_dir)
    assert any(p.endswith(".wal") for p in after)  # the dead writer's stream
    assert wrong_modes(after, 0o600, 0o700) == []
    with umask(0):
        run_rivven(data_dir, "wal", "checkpoint", check=True)  # (and a CLI process)
        assert produce(data_dir, "t", ["cli"]).returncode == 0
    assert wrong_modes(walk(data_dir), 0o600, 0o700) == []


def test_a_group_shared_data_dir_shares_with_its_group(tmp_path):
    """A data dir made setgid and group-writable (mkdir -m 2770) is the one setting: every
    file and dir made in it is 0660/2770, whatever the umask of the process."""
    root = str(tmp_path / "shared")
    os.mkdir(root)
    os.chmod(root, 0o2770)
    with umask(0o077):
        during = workload(root)
        run_rivven(root, "wal", "checkpoint", check=True)
    assert wrong_modes(during, 0o660, 0o2770) == []
    assert wrong_modes(walk(root), 0o660, 0o2770) == []


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run a process as nobody")
def test_other_users_cannot_open_a_lock_file(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    lock = os.path.join(data_dir, "topics", "t", "partition-0", filenames.LOCK_FILE)
    r = subprocess.run([*NOBODY, "/usr/bin/python3", "-c", f"open({lock!r}, 'rb')"],
                       capture_output=True)
    assert r.returncode != 0 and b"PermissionError" in r.stderr


# ------------------------------------------------------------------------------ lock waits
HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)  # read-only is enough to flock
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def holder(path: str, prefix: list[str] = (), python: str = sys.executable):
    """A real process holding an exclusive flock on ``path`` until the block ends."""
    p = subprocess.Popen([*prefix, python, "-c", HOLD, path], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline()
        assert line == b"held\n", p.stderr.read()
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()


@pytest.mark.slow
@pytest.mark.crash
def test_a_stopped_lock_holder_is_named_and_the_wait_gives_up(data_dir, monkeypatch):
    """A SIGSTOPped process holding a partition's flock hung every producer for ever."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    lock = os.path.join(data_dir, "topics", "t", "partition-0", filenames.LOCK_FILE)
    monkeypatch.setenv("RIVVEN_LOCK_TIMEOUT_MS", "2500")  # (= rivven --lock-timeout-ms 2500)
    with holder(lock) as h:
        os.kill(h.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        r = run_rivven(data_dir, "produce", "t", input=b"x\n", timeout=30)
        waited = time.monotonic() - t0
        err = r.stderr.decode()
        no_internal_error(r)
        assert r.returncode == 1, err
        assert f"waiting: waiting 1 s for the lock {lock}, held by pid {h.pid}" in err
        assert "gave up after 2.5 s" in err and lock in err and f"pid {h.pid}" in err
        assert "lock.timeout.ms" in err
        assert waited >= 2.5
    assert produce(data_dir, "t", ["y"]).returncode == 0  # the holder is gone: all is well
    assert consume_all(data_dir, "t") == ["y"]  # (the timed-out produce stored nothing)


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="needs root to run a process as nobody")
def test_a_read_only_flock_of_another_user_is_named(tmp_path):
    """Any user who can open partition-N/.lock read-only can flock it: with the default
    modes nobody cannot open it (previous test); where the files are made readable to
    others on purpose, the wait names that user's process and gives up."""
    base = tempfile.mkdtemp(prefix="rivven-nobody-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        data = os.path.join(base, "data")
        run_rivven(data, "topic", "create", "t", check=True)
        lock = os.path.join(data, "topics", "t", "partition-0", filenames.LOCK_FILE)
        for d in (data, os.path.join(data, "topics"), os.path.join(data, "topics", "t"),
                  os.path.dirname(lock)):
            os.chmod(d, 0o711)
        os.chmod(lock, 0o644)
        with holder(lock, NOBODY, "/usr/bin/python3") as h:
            r = run_rivven(data, "--lock-timeout-ms", "2000", "produce", "t", input=b"x\n",
                           timeout=60)
            err = r.stderr.decode()
            no_internal_error(r)
            assert r.returncode == 1, err
            assert f"held by pid {h.pid}" in err.split("\n")[0]  # the waiting line
            assert "gave up after 2 s" in err and f"pid {h.pid}" in err.split("\n")[-2]
        assert produce(data, "t", ["y"]).returncode == 0
    finally:
        shutil.rmtree(base)


@pytest.mark.slow
@pytest.mark.parametrize("lock, command", [
    ("catalog.lock", ["topic", "create", "u"]),
    ("wal/recovery.lock", ["topic", "list"]),  # (read-only: no wait) ...
    ("wal/recovery.lock", ["offsets", "t"]),
    ("wal/recovery.lock", ["delete-records", "t", "--before", "0", "--yes"]),
    ("groups/g/offsets.lock", ["group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                               "--execute"]),
])
def test_every_lock_wait_gives_up(data_dir, lock, command):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    with Engine.open(data_dir) as eng:
        eng.produce("t", [Record(value=b"v")])
        c = eng.consumer("g", "t")
        c.poll(timeout_ms=300)
        c.commit()
        c.close()
    path = os.path.join(data_dir, lock)
    with holder(path):
        r = run_rivven(data_dir, "--lock-timeout-ms", "1000", *command, timeout=60)
    no_internal_error(r)
    if command[0] in ("topic", "offsets") and command[1:2] != ["create"]:
        assert r.returncode == 0  # readers take no lock
        return
    assert r.returncode == 1, r.stderr.decode()
    assert f"waiting for the lock {path}" in r.stderr.decode() or \
        f"the lock {path}" in r.stderr.decode()
    assert "gave up after 1 s" in r.stderr.decode()


def test_a_contended_lock_is_handed_over_when_released(tmp_path):
    """The wait blocks in the kernel (in a helper) and the caller's fd ends up holding the
    lock; after a timeout, the abandoned wait takes nothing for good."""
    path = str(tmp_path / "x.lock")
    fd = locks.open_lock_file(path)
    told = []
    with holder(path) as h:
        wait = locks.LockWait(0.5, told.append)
        with pytest.raises(LockTimeout, match=f"pid {h.pid}"):
            locks.acquire(fd, path, wait)
        assert told and f"pid {h.pid}" in told[0]
        h.stdin.close()  # it exits: the lock is free
        h.wait()
        other = os.open(path, os.O_RDONLY)  # the abandoned helper took nothing for good
        deadline = time.monotonic() + 5
        while not locks.try_lock(other):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.close(other)
    with holder(path) as h:
        got = []

        def release_soon():
            time.sleep(0.3)
            os.kill(h.pid, signal.SIGKILL)

        import threading

        threading.Thread(target=release_soon).start()
        locks.acquire(fd, path, locks.LockWait(30, got.append))
        other = os.open(path, os.O_RDONLY)
        assert not locks.try_lock(other)  # ours now, through the caller's fd
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert locks.try_lock(other)
        os.close(other)
        assert got == []  # (no notice before 3 s)
    os.close(fd)


def test_lock_timeout_setting_is_checked():
    from engine.errors import InvalidConfig
    from engine.settings import Settings

    assert Settings.parse({}).lock_timeout_ms == 30000
    assert Settings.parse({"lock.timeout.ms": "-1"}).lock_timeout_ms == -1
    for bad in ("0", "-2", "soon"):
        with pytest.raises(InvalidConfig, match="lock.timeout.ms"):
            Settings.parse({"lock.timeout.ms": bad})


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
