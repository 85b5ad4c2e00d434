"""A partition's tier manifest (``tier.json``) is acted on only inside the partition's own
cold prefix: a crafted or bit-flipped one never makes rivven read, install or delete anything
else (topic delete, restore, retention, delete-records, garbage collection), manifests are
sealed (a legacy one is read and rewritten sealed), and a damaged one never moves the log
start nor stops checkpoints. The real ``rivven`` command on real files."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT, flip, run_rivven
from helpers.tiered import SUFFIXES, clean, entry, make, pdir, segments, tree, values, victim_dir

from engine import Engine, Record
from engine.errors import DamagedMetadata
from engine.fs import jsondoc
from engine.segments import tier_manifest


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
