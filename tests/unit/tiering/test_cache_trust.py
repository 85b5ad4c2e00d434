"""The cold cache trusts neither its directory nor its copies unchecked: a cache another local
user forged (two real unprivileged users, setpriv), a forged copy in a private cache, a linked
or foreign tier cache in the data dir; cache directories are private, a shared temp root that
is not is replaced, and a group-shared data dir's group reads its cold data."""

import os
import shutil
import stat
import subprocess
import tempfile

import pytest
from helpers import run_rivven
from helpers.fs import other_user_python
from helpers.tiered import SUFFIXES, TS0, clean, make, pdir, segments, tree, values, victim_dir

from engine import Engine, Record
from engine.segments import tier_manifest
from engine.storage.catalog import home_of

READER, FORGER = 65534, 65533  # nobody, and another unprivileged uid


# ---------------------------------------------------------------- the cold cache


def run_as(uid, data_dir, *args, tmpdir):
    """This checkout's ``rivven`` run as user ``uid``: from a copy that user can read (the
    checkout and its venv may be private: helpers.fs.other_user_python)."""
    python, lib = other_user_python(uid)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmpdir, "TMPDIR": tmpdir,
           "RIVVEN_DATA_DIR": data_dir, "PYTHONPATH": lib}
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           python, "-m", "rivven_cli.main", *args],
                          capture_output=True, env=env, cwd="/", timeout=120)


def forged_segments(tmp_path, data_dir):
    """For each cold entry of tt: the segment files of a data dir written with the same
    shapes (same offsets and sizes, CRCs right) but forged values ("EEEEEE...")."""
    forged = str(tmp_path / "forged")
    with Engine.open(forged) as eng:
        eng.create_topic("tt", 1, {"segment.bytes": "1500"})
        for i in range(0, 300, 10):
            eng.produce("tt", [Record(key=b"k%d" % (i + j), value=b"E" * 6 + b"%05d" % (i + j),
                                      timestamp=TS0 + i + j) for j in range(10)], partition=0)
    out = []
    for s in segments(data_dir):
        log = os.path.join(pdir(forged), f"{s['base_offset']:020d}.log")
        assert os.path.getsize(log) == s["bytes"]  # the size check alone cannot tell
        out.append((s, log[:-len(".log")]))
    return out


def folder_of(obj):
    import hashlib
    return hashlib.sha1(obj.encode()).hexdigest()[:24]


@pytest.fixture
def shared_tmp():
    """A directory every local user can reach, with a sticky world-writable tmp inside (the
    test's own /tmp)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as two other users")
    base = tempfile.mkdtemp(prefix="rivven-h13-")
    os.chmod(base, 0o755)
    tmp = os.path.join(base, "tmp")
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    yield base, tmp
    shutil.rmtree(base, ignore_errors=True)


FORGER_SCRIPT = """
import os, shutil, sys
root, folder = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, folder), exist_ok=True)
os.chmod(root, 0o777)
os.chmod(os.path.join(root, folder), 0o777)
for src in sys.argv[3:]:
    dst = os.path.join(root, folder, os.path.basename(src))
    shutil.copy(src, dst)
    os.chmod(dst, 0o666)  # (so the victim may touch them: its reads go on undisturbed)
"""


@pytest.mark.slow
def test_a_cache_another_user_forged_is_never_trusted(tmp_path, shared_tmp):
    base, tmp = shared_tmp
    data_dir = os.path.join(base, "data")  # root's: the reader cannot write it
    make(data_dir)
    stage = os.path.join(base, "stage")
    os.mkdir(stage)
    forged = forged_segments(tmp_path, data_dir)
    subprocess.run(["chmod", "-R", "a+rX", data_dir, stage], check=True)
    # the forger, another unprivileged user, pre-creates the reader's cache with forged
    # copies of every cold segment (sizes right, batch CRCs right)
    tag = __import__("hashlib").sha1(data_dir.encode()).hexdigest()[:12]
    root = os.path.join(tmp, f"rivven-tier-cache-{READER}-{tag}")
    for s, stem in forged:
        files = []
        for suffix in SUFFIXES:
            dst = os.path.join(stage, f"{s['base_offset']:020d}{suffix}")
            shutil.copy(stem + suffix, dst)
            os.chmod(dst, 0o644)
            files.append(dst)
        r = subprocess.run(["setpriv", f"--reuid={FORGER}", f"--regid={FORGER}",
                            "--clear-groups", other_user_python(FORGER)[0], "-c", FORGER_SCRIPT, root,
                            folder_of(s["object"]), *files], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
    assert os.stat(root).st_uid == FORGER
    planted = tree(root)
    # the reader (nobody) consumes: never a forged record
    r = run_as(READER, data_dir, "consume", "tt", "-o", "beginning", "-f", "%o %v\n",
               tmpdir=tmp)
    assert b"EEEEEE" not in r.stdout
    clean(r)
    assert r.returncode == 0, r.stderr
    assert values(r.stdout) == [f"gggggg{i:05d}" for i in range(300)]
    assert tree(root) == planted  # not used, not changed
    assert [n for n in os.listdir(tmp) if n.startswith("rivven-tier-cache-")] == \
        [os.path.basename(root)]  # the private one of that run is gone with it
    # verify --cold does not call this OK: it names the cache it refuses
    r = run_as(READER, data_dir, "segment", "verify", "--cold", tmpdir=tmp)
    clean(r)
    assert r.returncode == 3 and root.encode() in r.stdout + r.stderr


def copy_into_cache(root, forged):
    for s, stem in forged:
        folder = os.path.join(root, folder_of(s["object"]))
        os.makedirs(folder, exist_ok=True)
        for suffix in SUFFIXES:
            shutil.copy(stem + suffix, os.path.join(folder, f"{s['base_offset']:020d}{suffix}"))


def test_a_forged_copy_in_a_private_cache_is_checked_before_first_use(data_dir, tmp_path):
    make(data_dir)
    forged = forged_segments(tmp_path, data_dir)
    root = os.path.join(data_dir, ".tier-cache")
    os.mkdir(root, 0o700)
    copy_into_cache(root, forged)  # same sizes, batch CRCs right: only the manifest's CRC32C tells
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    clean(r)
    assert r.returncode == 3 and b"cached copy of cold object" in r.stdout
    r = run_rivven(data_dir, "consume", "tt", "-o", "beginning", "-f", "%o %v\n", check=True)
    assert values(r.stdout) == [f"gggggg{i:05d}" for i in range(300)]
    r = run_rivven(data_dir, "segment", "verify", "--cold")  # replaced by intact copies
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_symlinked_tier_cache_in_the_data_dir_is_not_followed(data_dir, tmp_path):
    make(data_dir)
    outside = tmp_path / "outside"
    before = victim_dir(outside)
    os.symlink(outside, os.path.join(data_dir, ".tier-cache"))
    r = run_rivven(data_dir, "consume", "tt", "-o", "beginning")
    assert tree(outside) == before
    err = clean(r)
    assert r.returncode == 1 and ".tier-cache is a symbolic link" in err and "rm -r" in err
    # a local read needs no cache
    r = run_rivven(data_dir, "consume", "tt", "-o", "299", "-f", "%o %v\n", check=True)
    assert values(r.stdout) == ["gggggg00299"]


def test_a_tier_cache_of_another_user_in_the_data_dir_is_refused(data_dir, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory another user owns")
    make(data_dir)
    root = os.path.join(data_dir, ".tier-cache")
    os.mkdir(root, 0o700)
    copy_into_cache(root, forged_segments(tmp_path, data_dir))
    subprocess.run(["chown", "-R", f"{FORGER}:{FORGER}", root], check=True)
    r = run_rivven(data_dir, "consume", "tt", "-o", "beginning", "-f", "%o %v\n")
    assert b"EEEEEE" not in r.stdout
    err = clean(r)
    assert r.returncode == 1 and f"belongs to uid {FORGER}" in err
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 3 and root.encode() in r.stdout


def test_cache_directories_are_private(data_dir):
    make(data_dir)
    root = os.path.join(data_dir, ".tier-cache")
    os.mkdir(root)
    os.chmod(root, 0o755)  # as an older rivven made it under umask 022
    with Engine.open(data_dir) as eng:
        assert eng.read("tt", 0, 0, 1)[0].value == b"gggggg00000"
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    shutil.rmtree(root)
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.read("tt", 0, 0, 1)[0].value == b"gggggg00000"
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700


def test_a_shared_temp_root_that_is_not_private_is_replaced_for_the_engine(tmp_path, data_dir):
    from engine.tiering.cache import ColdCache

    make(data_dir)
    root = tmp_path / "rivven-tier-cache-x"
    root.mkdir()
    os.chmod(root, 0o777)
    (root / "planted").write_text("x")
    entry = tier_manifest.load(pdir(data_dir), home_of(pdir(data_dir)))[0]
    cache = ColdCache(str(root), 1 << 30, fallback=True)
    seg = cache.segment(entry)
    mine = cache.root
    assert mine != str(root) and os.path.dirname(seg.path).startswith(mine)
    st = os.lstat(mine)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert sorted(os.listdir(root)) == ["planted"]
    cache.close()
    assert not os.path.exists(mine)
    strict = ColdCache(str(root), 1 << 30)  # (a data dir's .tier-cache: refused)
    with pytest.raises(Exception, match="is writable by other users"):
        strict.segment(entry)


def test_a_group_member_reads_the_cold_data_of_a_group_shared_data_dir(tmp_path):
    """A group-shared data dir (setgid, group rwx: storage.guard.modes) trusts its group;
    its cold cache does the same: another member of the group reads cold offsets through
    the cache root made by the first (it refused a cache another uid owned)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as another member of the group")
    base = tempfile.mkdtemp(prefix="rivven-h13-shared-")
    try:
        os.chmod(base, 0o755)
        data = os.path.join(base, "data")
        os.mkdir(data)
        os.chown(data, 0, READER)  # the group of nobody (65534)
        os.chmod(data, 0o2770)
        make(data)
        with Engine.open(data, read_only=True) as eng:  # (root fills the cache: its root is
            assert eng.read("tt", 0, 0, 1)[0].value == b"gggggg00000"  # root's, group-shared)
        cache = os.lstat(os.path.join(data, ".tier-cache"))
        assert cache.st_uid == 0 and cache.st_gid == READER
        assert stat.S_IMODE(cache.st_mode) == 0o2770
        tmp = os.path.join(base, "tmp")
        os.mkdir(tmp)
        os.chmod(tmp, 0o1777)
        r = run_as(READER, data, "consume", "tt", "-o", "beginning", "-n", "300", "-f", "%v\n",
                   tmpdir=tmp)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().split() == [f"gggggg{i:05d}" for i in range(300)]
        r = run_as(READER, data, "segment", "verify", "--cold", tmpdir=tmp)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
