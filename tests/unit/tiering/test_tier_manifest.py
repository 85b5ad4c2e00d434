"""Issue 13, tiered storage: a tier manifest is acted on only inside the partition's own cold
prefix (a crafted or bit-flipped ``tier.json`` never makes rivven read or delete anything
else), manifests are sealed, and the cold cache trusts neither its directory nor its copies
unchecked (another local user may have put them there).

The reproducers run the real ``rivven`` command on real files; the cache attack runs with two
real unprivileged users (setpriv): the forger pre-creates the reader's cache directory."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import ROOT, flip, run_rivven

from engine import Engine, Record
from engine.errors import DamagedMetadata
from engine.fs import jsondoc
from engine.segments import tier_manifest
from engine.storage.catalog import home_of

TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
          "segment.bytes": "1500"}
SUFFIXES = (".log", ".index", ".timeindex")
TS0 = int(time.time() * 1000) - 60_000  # (recent: retention keeps it)
READER, FORGER = 65534, 65533  # nobody, and another unprivileged uid


def pdir(data_dir, topic="tt", p=0):
    return os.path.join(data_dir, "topics", topic, f"partition-{p}")


def make(data_dir, topic="tt", n=300, letter=b"g", cfg=None):
    """A tiered topic of ``n`` records whose values are ``letter`` * 6 + index, fixed
    timestamps (two data dirs made with different letters have segments of the same sizes),
    moved to the default cold store."""
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, 1, {**TIERED, **(cfg or {})})
        for i in range(0, n, 10):
            eng.produce(topic, [Record(key=b"k%d" % (i + j), value=letter * 6 + b"%05d" % (i + j),
                                       timestamp=TS0 + i + j) for j in range(10)], partition=0)
        eng.maintenance.tier(topic)
        return eng.topic(topic).id


def segments(data_dir, topic="tt"):
    with open(tier_manifest.path(pdir(data_dir, topic)), "rb") as f:
        return json.loads(f.read())["segments"]


def write_manifest(data_dir, segs, form, topic="tt", prefixes=None):
    """``tier.json`` as an older rivven wrote it (``v1``: no checksum) or as this one does
    (``v2``: sealed; a crafted file can carry a right checksum too)."""
    if form == "v1":
        raw = json.dumps({"version": 1, "segments": segs}).encode()
    else:
        pre = sorted({s["object"].rpartition("/")[0] for s in segs} | set(prefixes or []))
        raw = jsondoc.seal({"version": 2, "prefixes": pre, "segments": segs})
    with open(tier_manifest.path(pdir(data_dir, topic)), "wb") as f:
        f.write(raw)


def tree(path):
    """Every file under ``path`` with its bytes."""
    out = {}
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".stats"]  # counters, not data (docs/METRICS.md)
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = f.read()
    return out


def victim_dir(base):
    """A directory that is not rivven's: a precious file, and files named like an object."""
    (base / "sub").mkdir(parents=True)
    (base / "keep.txt").write_text("precious")
    for s in SUFFIXES:
        (base / "sub" / f"obj{s}").write_bytes(b"not rivven's " + s.encode())
    return tree(base)


def clean(r):
    err = r.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err, err
    return err


def values(stdout):
    return [line.split(" ", 1)[1] for line in stdout.decode().splitlines()]


# ---------------------------------------------------------------- topic delete


@pytest.mark.parametrize("form", ["v1", "v2"])
def test_topic_delete_never_removes_a_directory_a_crafted_entry_names(data_dir, tmp_path, form):
    tid = make(data_dir)
    victim = tmp_path / "victim"
    before = victim_dir(victim)
    segs = segments(data_dir)
    segs[0]["object"] = f"file://{victim}/sub/obj"
    write_manifest(data_dir, segs, form)
    r = run_rivven(data_dir, "topic", "delete", "tt", "--yes")
    assert tree(victim) == before  # never deleted
    err = clean(r)
    assert r.returncode == 3, err
    assert "tier.json" in err and f"{victim}/sub/obj" in err and "was deleted" in err
    # the topic itself is gone: its local files and its own cold prefix
    assert not os.path.exists(os.path.join(data_dir, "topics", "tt"))
    assert not os.path.exists(os.path.join(data_dir, "cold", f"tt-{tid}"))
    r = run_rivven(data_dir, "topic", "list", "--json", check=True)
    assert "tt" not in {t["name"] for t in json.loads(r.stdout)}


def test_a_bare_relative_path_is_not_resolved_against_the_working_directory(data_dir, tmp_path):
    make(data_dir)
    victim = tmp_path / "victim2"
    before = victim_dir(victim)
    cwd = tmp_path / "a" / "b" / "c"
    cwd.mkdir(parents=True)
    segs = segments(data_dir)
    segs[0]["object"] = "../../../victim2/sub/obj"
    write_manifest(data_dir, segs, "v1")
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "rivven_cli.main", "topic", "delete", "tt", "--yes"],
                       capture_output=True, env=env, cwd=cwd, timeout=120)
    assert tree(victim) == before
    err = clean(r)
    assert r.returncode == 3 and "../../../victim2/sub/obj" in err
    assert not os.path.exists(os.path.join(data_dir, "topics", "tt"))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["as written", "v1"])
def test_a_flipped_bit_before_partition_0_does_not_delete_the_whole_cold_store(data_dir, form):
    tid = make(data_dir)
    make(data_dir, topic="other")
    cold = os.path.join(data_dir, "cold")
    others = {k: v for k, v in tree(cold).items() if k.startswith("other-")}
    assert others
    if form == "v1":  # as an older rivven wrote it: nothing but the containment rule helps
        write_manifest(data_dir, segments(data_dir), "v1")
    path = tier_manifest.path(pdir(data_dir))
    with open(path, "rb") as f:
        raw = f.read()
    pos = raw.index(b"/partition-0/")
    flip(path, pos, 0)  # "/" -> "."
    with open(path, "rb") as f:
        assert f.read()[pos:pos + 12] == b".partition-0"
    r = run_rivven(data_dir, "topic", "delete", "tt", "--yes")
    assert {k: v for k, v in tree(cold).items() if k.startswith("other-")} == others
    err = clean(r)
    assert r.returncode == 3 and path in err
    assert not os.path.exists(os.path.join(cold, f"tt-{tid}"))
    assert not os.path.exists(os.path.join(data_dir, "topics", "tt"))
    r = run_rivven(data_dir, "consume", "other", "-o", "beginning", "-f", "%o %v\n", check=True)
    assert values(r.stdout) == [f"gggggg{i:05d}" for i in range(300)]


def test_a_prefix_recorded_elsewhere_is_followed_only_down_its_topic_id(data_dir, tmp_path):
    """A sealed manifest may record the prefix of a store the topic was tiered to before its
    URI changed; topic delete removes <that store>/<topic>-<id> and nothing above it."""
    tid = make(data_dir)
    store = tmp_path / "elsewhere"
    before = victim_dir(store)
    segs = segments(data_dir)
    moved = store / f"tt-{tid}" / "partition-0"
    moved.mkdir(parents=True)
    name = segs[0]["object"].rpartition("/")[2]
    for s in SUFFIXES:
        shutil.move(segs[0]["object"][len("file://"):] + s, moved / (name + s))
    segs[0]["object"] = f"file://{moved}/{name}"
    write_manifest(data_dir, segs, "v2")
    with Engine.open(data_dir) as eng:  # the moved segment reads from its recorded prefix
        assert eng.read("tt", 0, 0, 1)[0].value == b"gggggg00000"
        out = eng.delete_topic("tt")
    assert out["problems"] == [] and f"file://{store}/tt-{tid}" in out["cold_prefixes"]
    assert not (store / f"tt-{tid}").exists()
    assert tree(store) == before


# ---------------------------------------------------------------- restore, retention, delete-records


@pytest.mark.parametrize("form", ["v1", "v2"])
@pytest.mark.parametrize("command", ["restore", "delete-records", "retention"])
def test_no_command_deletes_or_installs_what_a_crafted_entry_names(data_dir, tmp_path, form,
                                                                   command):
    make(data_dir)
    if command == "retention":  # (set now: retention would have deleted them before the tier)
        with Engine.open(data_dir) as eng:
            eng.alter_topic_config("tt", {"retention.bytes": "3000"})
    segs = segments(data_dir)
    # the victim holds exact copies of a real segment's objects (sizes and CRCs right), so
    # nothing but where they lie tells them apart
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    for s in SUFFIXES:
        shutil.copy(segs[0]["object"][len("file://"):] + s, victim / "sub" / f"obj{s}")
    (victim / "keep.txt").write_text("precious")
    before_victim = tree(victim)
    segs[0]["object"] = f"file://{victim}/sub/obj"
    write_manifest(data_dir, segs, form)
    before_cold = tree(os.path.join(data_dir, "cold"))
    local = sorted(os.listdir(pdir(data_dir)))
    args = {"restore": ["tier", "restore", "tt", "--from", "0"],
            "delete-records": ["delete-records", "tt", "--before",
                               str(segs[1]["next_offset"]), "--yes"],
            "retention": ["retention", "apply"]}[command]
    r = run_rivven(data_dir, *args)
    assert tree(victim) == before_victim
    assert tree(os.path.join(data_dir, "cold")) == before_cold
    err = clean(r)
    assert r.returncode == 3 and f"{victim}/sub/obj" in err, err
    assert sorted(os.listdir(pdir(data_dir))) == local


# ---------------------------------------------------------------- the manifest file


def home(data_dir, tid, p=0, topic="tt"):
    return tier_manifest.home(data_dir, topic, tid, p)


NAME0 = "00000000000000000000-0123abcd"


def entry(obj, base=0):
    return {"base_offset": base, "next_offset": base + 10, "bytes": 1, "crc32c": 2,
            "max_timestamp": TS0, "index_bytes": 0, "index_crc32c": 0, "timeindex_bytes": 0,
            "timeindex_crc32c": 0, "object": obj, "uploaded_ms": TS0}


TID = "0123456789abcdef0123456789abcdef"
BAD = [  # (what, object) with {p}: this partition's prefix, {d}: the data dir
    ("dot-dot", "file://{d}/cold/x/../../../tt-{t}/partition-0/" + NAME0),
    ("double slash", "file://{d}/cold//tt-{t}/partition-0/" + NAME0),
    ("percent dots", "file://{d}/cold/%2e%2e/%2e%2e/tt-{t}/partition-0/" + NAME0),
    ("percent slash", "file://{d}/cold/x%2F..%2F..%2Ftt-{t}/partition-0/" + NAME0),
    ("another host", "file://otherhost{d}/cold/tt-{t}/partition-0/" + NAME0),
    ("localhost", "file://localhost{d}/cold/tt-{t}/partition-0/" + NAME0),
    ("upper-case scheme", "FILE://{d}/cold/tt-{t}/partition-0/" + NAME0),
    ("query", "file://{d}/cold?/tt-{t}/partition-0/" + NAME0),
    ("fragment", "file://{d}/cold#/tt-{t}/partition-0/" + NAME0),
    ("bare path", "{d}/cold/tt-{t}/partition-0/" + NAME0),
    ("relative path", "../../cold/tt-{t}/partition-0/" + NAME0),
    ("another topic", "file://{d}/cold/uu-{t}/partition-0/" + NAME0),
    ("another topic id", "file://{d}/cold/tt-" + "f" * 32 + "/partition-0/" + NAME0),
    ("another partition", "file://{d}/cold/tt-{t}/partition-1/" + NAME0),
    ("a subfolder", "{p}/sub/" + NAME0),
    ("the prefix itself", "{p}"),
    ("a parent", "file://{d}/cold/tt-{t}"),
    ("a foreign name", "{p}/obj"),
    ("another base offset", "{p}/00000000000000000099-0123abcd"),
    ("a victim", "file:///tmp/victim/sub/obj"),
    ("a flipped slash", "file://{d}/cold/tt-{t}.partition-0/" + NAME0),
]


@pytest.mark.parametrize("form", ["v1", "v2"])
@pytest.mark.parametrize("what,obj", BAD, ids=[b[0] for b in BAD])
def test_an_object_outside_the_partition_prefix_is_damage(tmp_path, form, what, obj):
    d = str(tmp_path / "data")
    where = home(d, TID)
    obj = obj.format(d=d, t=TID, p=where.prefix)
    segs = [entry(obj)]
    if form == "v1":
        raw = json.dumps({"version": 1, "segments": segs}).encode()
    else:  # the crafted prefix recorded too, with a right checksum
        raw = jsondoc.seal({"version": 2, "prefixes": sorted({where.prefix, obj.rpartition("/")[0]}),
                            "segments": segs})
    with pytest.raises(DamagedMetadata, match="tier manifest x/tier.json is damaged") as e:
        tier_manifest.parse(raw, "x/tier.json", where)
    assert "outside tt-0's cold prefix" in str(e.value) or "damaged (" in str(e.value)


@pytest.mark.parametrize("store", ["", "s3://bucket/deep/prefix", "memory://rivven-cold",
                                   "file:///mnt/cold store"])
def test_objects_in_the_configured_or_a_recorded_prefix_are_accepted(tmp_path, store):
    d = str(tmp_path / "data")
    where = tier_manifest.home(d, "tt", TID, 0, store)
    old = f"file:///old/cold/tt-{TID}/partition-0"  # recorded when the URI changed
    segs = [entry(f"{old}/{NAME0}"), entry(f"{where.prefix}/00000000000000000010-89abcdef", 10)]
    doc = tier_manifest.document([tier_manifest.ColdSegment(**s) for s in segs], where)
    assert doc["version"] == 2 and doc["prefixes"] == sorted({old, where.prefix})
    got = tier_manifest.parse(json.dumps(doc).encode(), "x", where)
    assert [e.object for e in got.entries] == [s["object"] for s in segs]
    # version 1 (no checksum, no recorded prefixes) is still read
    v1 = json.dumps({"version": 1, "segments": segs}).encode()
    assert tier_manifest.parse(v1, "x", where).entries == got.entries


def test_every_single_bit_flip_of_a_sealed_manifest_is_refused(tmp_path):
    d = str(tmp_path / "data")
    where = home(d, TID)
    segs = [tier_manifest.ColdSegment(**entry(f"{where.prefix}/{NAME0}"))]
    raw = json.dumps(tier_manifest.document(segs, where)).encode()
    assert tier_manifest.parse(raw, "x", where).entries == segs
    passed = []
    for pos in range(len(raw)):
        for bit in range(8):
            bad = bytearray(raw)
            bad[pos] ^= 1 << bit
            try:
                tier_manifest.parse(bytes(bad), "x", where)
                passed.append((pos, bit))
            except DamagedMetadata:
                pass
    assert passed == []


def test_version_rules(tmp_path):
    d = str(tmp_path / "data")
    where = home(d, TID)
    segs = [entry(f"{where.prefix}/{NAME0}")]
    v1_sealed = jsondoc.seal({"version": 1, "segments": segs})
    with pytest.raises(DamagedMetadata, match="version 1 with a checksum"):
        tier_manifest.parse(v1_sealed, "x", where)
    v2_bare = json.dumps({"version": 2, "prefixes": [where.prefix], "segments": segs}).encode()
    with pytest.raises(DamagedMetadata, match="no crc32c checksum"):
        tier_manifest.parse(v2_bare, "x", where)
    v2_no_prefixes = json.dumps({"version": 2, "segments": segs}).encode()
    with pytest.raises(DamagedMetadata, match="version 2 without a checksum"):
        tier_manifest.parse(v2_no_prefixes, "x", where)
    for crafted in (b'{"version": 1, "segments": [{"base_offset": Infinity}]}',
                    b'{"version": 1, "segments": {}}', b"[" * 100_000, b"\xff\xfe",
                    json.dumps({"version": 1, "segments": [dict(segs[0], crc32c=1 << 40)]}
                               ).encode()):
        with pytest.raises(DamagedMetadata):
            tier_manifest.parse(crafted, "x", where)


def test_a_legacy_manifest_is_read_and_rewritten_sealed(data_dir):
    make(data_dir)
    segs = segments(data_dir)
    write_manifest(data_dir, segs, "v1")
    with Engine.open(data_dir) as eng:
        assert [r.value for r in eng.read("tt", 0, 0, 3)] == [b"gggggg%05d" % i for i in range(3)]
        eng.maintenance.delete_records("tt", {0: segs[0]["next_offset"]})  # rewrites the manifest
    with open(tier_manifest.path(pdir(data_dir)), "rb") as f:
        doc = json.loads(f.read())
    assert doc["version"] == 2 and "crc32c" in doc and doc["segments"] == segs[1:]
    assert doc["prefixes"] == [segs[0]["object"].rpartition("/")[0]]
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_a_symlinked_data_dir_root_keeps_its_cold_data(tmp_path):
    real = str(tmp_path / "real")
    make(real)
    link = str(tmp_path / "link")
    os.symlink(real, link)
    r = run_rivven(link, "consume", "tt", "-o", "beginning", "-f", "%o %v\n", check=True)
    assert values(r.stdout) == [f"gggggg{i:05d}" for i in range(300)]
    r = run_rivven(link, "segment", "verify", "--cold")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_rivven(link, "topic", "delete", "tt", "--yes")
    assert r.returncode == 0, r.stderr
    assert os.listdir(os.path.join(real, "cold")) == []


# ---------------------------------------------------------------- the cold cache


def run_as(uid, data_dir, *args, tmpdir):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmpdir, "TMPDIR": tmpdir,
           "RIVVEN_DATA_DIR": data_dir, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           sys.executable, "-m", "rivven_cli.main", *args],
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
                            "--clear-groups", sys.executable, "-c", FORGER_SCRIPT, root,
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


@pytest.mark.parametrize("damage", ["crafted entry", "garbage"])
def test_a_damaged_manifest_never_moves_the_log_start_past_the_cold_data(data_dir, damage):
    """A checkpoint (every produce's close) used to persist the first local offset as the log
    start while the manifest was unreadable: once the file was restored from a backup, the
    cold offsets lay below the log start, unreadable, and retention deleted them."""
    make(data_dir)
    path = tier_manifest.path(pdir(data_dir))
    with open(path, "rb") as f:
        good = f.read()
    if damage == "garbage":
        with open(path, "r+b") as f:
            f.write(b"{{{{")
    else:
        segs = segments(data_dir)
        segs[0]["object"] = "file:///tmp/nowhere/sub/obj"
        write_manifest(data_dir, segs, "v1")
    r = run_rivven(data_dir, "produce", "tt", input=b"hello\n")
    clean(r)
    r = run_rivven(data_dir, "consume", "tt", "-o", "beginning")
    assert r.returncode == 3 and path.encode() in r.stderr  # no silent jump past cold data
    with open(path, "wb") as f:  # restored from a backup
        f.write(good)
    r = run_rivven(data_dir, "consume", "tt", "-o", "beginning", "-f", "%o %v\n", check=True)
    assert values(r.stdout) == [f"gggggg{i:05d}" for i in range(300)] + ["hello"]


def test_a_damaged_manifest_does_not_stop_checkpoints(data_dir):
    """Retention after a partition's checkpoint read the damaged manifest and raised: the
    checkpoint pass stopped there, so other partitions went unchecked and a clean close kept
    the WAL. Retention now waits for the manifest to be mended; durability does not."""
    make(data_dir)
    with Engine.open(data_dir) as eng:
        eng.create_topic("other", 1)
    flip(tier_manifest.path(pdir(data_dir)), 5)
    eng = Engine.open(data_dir)
    eng.produce("tt", [Record(value=b"after")])
    eng.produce("other", [Record(value=b"x")])
    done = eng.checkpoint()
    assert sorted(d["topic"] for d in done) == ["other", "tt"]
    eng.close()
    wal = [f for _, _, fs in os.walk(os.path.join(data_dir, "wal")) for f in fs
           if f.endswith(".wal")]
    assert wal == []  # a clean close: nothing left to replay


def test_garbage_collection_deletes_only_names_rivven_gives(data_dir):
    tid = make(data_dir)
    prefix = os.path.join(data_dir, "cold", f"tt-{tid}", "partition-0")
    for name in ("notes.txt", "00000000000000000000-dead.log.part-1a2b3c4d"):
        with open(os.path.join(prefix, name), "w") as f:
            f.write("x")
    os.mkdir(os.path.join(prefix, "00000000000000000099-deadbeef.log"))
    with Engine.open(data_dir) as eng:
        removed = eng.maintenance.tier("tt")["partitions"][0]["orphans_removed"]
    assert [os.path.basename(u) for u in removed] == ["00000000000000000000-dead.log.part-1a2b3c4d"]
    assert os.path.exists(os.path.join(prefix, "notes.txt"))


@pytest.mark.parametrize("length", [222, 223, 249])
def test_the_longest_topic_names_tier_delete_and_come_back(data_dir, length):
    """``<topic>-<topic id>`` is 282 bytes for a 249-character topic, more than one name on a
    local disk: the cold folder cuts the topic part, and the topic tiers, reads, deletes (its
    cold objects too) and is created again under the same name."""
    topic = ("t" * length)[:length]
    for round_ in range(2):
        tid = make(data_dir, topic=topic, n=200, letter=b"abcdefgh"[round_:round_ + 1])
        folder = os.listdir(os.path.join(data_dir, "cold"))
        assert folder == [f"{topic[:222]}-{tid}"] and all(len(f) <= 255 for f in folder)
        assert segments(data_dir, topic)  # (some segments went cold)
        with Engine.open(data_dir, read_only=True) as eng:
            got = [r.value for r in eng.read(topic, 0, 0, 500)]
        letter = b"abcdefgh"[round_:round_ + 1]
        assert got == [letter * 6 + b"%05d" % i for i in range(200)]
        r = run_rivven(data_dir, "topic", "delete", topic, "--yes")
        assert r.returncode == 0, r.stderr
        assert os.listdir(os.path.join(data_dir, "cold")) == []


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
