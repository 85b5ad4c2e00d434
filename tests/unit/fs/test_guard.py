"""engine.fs.guard through the engine and the real ``rivven``: symbolic links are refused or
left alone, never followed (wal/, trash/, segments, partition and group dirs, leases; only the
data dir's root may be a link; stray directories in wal/ stay), and every file and dir is
private whatever the umask, or shared with the group of a group-shared data dir. Real files, a
real other user (``nobody``)."""

import contextlib
import os
import shutil
import stat
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.fs import IS_ROOT, NOBODY, consume_all, no_internal_error, produce

from engine import Engine, Record
from engine.errors import CorruptRecordError
from engine.fs import guard, reserve
from engine.segments import filenames


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
