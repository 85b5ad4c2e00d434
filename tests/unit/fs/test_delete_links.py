"""Every path that deletes files checks every directory it descends (engine.fs.guard): a
directory of the data dir replaced by a symbolic link to somewhere else is refused with the
one-line error naming the link and its fix (exit 3), and nothing outside is removed. Real
links, the real ``rivven`` where a command deletes, the engine where only the API does.
(Links refused on writes and the trash: test_guard.py.)"""

import os
import shutil
import time

import pytest
from helpers import run_rivven
from helpers.fs import no_internal_error, produce

from engine import Engine, Record
from engine.fs import guard
from engine.segments import filenames


def tree(path: str) -> dict[str, bytes | None]:
    """Everything under ``path``: relative name -> file bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for root, dirs, names in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path)] = None
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                out[os.path.relpath(os.path.join(root, n), path)] = f.read()
    return out


def linked(path: str, outside: str) -> str:
    """Move the directory ``path`` to ``outside`` (plus a file of someone else's) and leave a
    link to it in its place; returns ``path``."""
    shutil.move(path, outside)
    with open(os.path.join(outside, "precious.db"), "wb") as f:
        f.write(b"precious" * 100)
    os.symlink(outside, path)
    return path


def refused(r, link: str) -> None:
    """Exit 3 with one line naming the link and the fix."""
    no_internal_error(r)
    err = r.stderr.decode()
    assert r.returncode == 3, err
    assert link in err and "symbolic link" in err and "replace the link" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.fixture
def topic(data_dir):
    """Topic ``t`` with 3 segments of records, retention and compaction possible."""
    run_rivven(data_dir, "topic", "create", "t", "-c", "segment.bytes=1024", check=True)
    assert produce(data_dir, "t", [f"k{i % 3}:{'v' * 100}{i}" for i in range(40)],
                   ).returncode == 0
    return data_dir


def pdir(data_dir: str, p: int = 0) -> str:
    return filenames.partition_dir(data_dir, "t", p)


@pytest.mark.parametrize("level", ["partition", "topic"])
def test_topic_delete_never_unlinks_through_a_linked_dir(topic, tmp_path, level):
    """A linked partition-0 had the outside .lock file unlinked by 'topic delete'."""
    link = linked(pdir(topic) if level == "partition" else os.path.dirname(pdir(topic)),
                  str(tmp_path / "outside"))
    before = tree(str(tmp_path / "outside"))
    r = run_rivven(topic, "topic", "delete", "t", "--yes")
    refused(r, link)
    assert tree(str(tmp_path / "outside")) == before
    # nothing changed: the topic is still there, and goes once the link is replaced
    assert "t" in run_rivven(topic, "topic", "list", "--json", check=True).stdout.decode()
    os.unlink(link)
    shutil.move(str(tmp_path / "outside"), link)
    assert run_rivven(topic, "topic", "delete", "t", "--yes").returncode == 0
    assert not os.path.lexists(link)


@pytest.mark.parametrize("cmd", [
    ["delete-records", "t", "--before", "10", "--yes"],
    ["retention", "apply", "t"],
    ["segment", "recover", "t", "--yes"],
])
def test_commands_that_delete_segments_refuse_a_linked_partition(topic, tmp_path, cmd):
    link = linked(pdir(topic), str(tmp_path / "outside"))
    run_rivven(topic, "topic", "alter-config", "t", "--set", "retention.bytes=1",
               check=False)
    before = tree(str(tmp_path / "outside"))
    r = run_rivven(topic, *cmd)
    refused(r, link)
    assert tree(str(tmp_path / "outside")) == before


def test_segment_recover_refuses_a_linked_topic_dir(topic, tmp_path):
    """The repair checked only the partition dir: a linked topic dir let it cut files there."""
    link = linked(os.path.dirname(pdir(topic)), str(tmp_path / "outside"))
    before = tree(str(tmp_path / "outside"))
    refused(run_rivven(topic, "segment", "recover", "t", "--yes"), link)
    assert tree(str(tmp_path / "outside")) == before


def test_compaction_refuses_a_linked_partition(topic, tmp_path):
    run_rivven(topic, "topic", "alter-config", "t", "--set", "cleanup.policy=compact",
               check=True)
    link = linked(pdir(topic), str(tmp_path / "outside"))
    before = tree(str(tmp_path / "outside"))
    with Engine.open(topic) as eng, pytest.raises(guard.UnexpectedLink, match=link):
        eng.maintenance.compact("t", force=True)
    assert tree(str(tmp_path / "outside")) == before


def test_compaction_staging_and_its_cleanup_refuse_a_linked_compaction_dir(topic, tmp_path):
    """DATA/.compaction linked: a stale Spark log there (a week old) was unlinked in the
    link's target by the staging clean-up."""
    from engine.spark.submit import clean_stale

    outside = tmp_path / "outside"
    outside.mkdir()
    old = outside / "compaction-123.log"
    old.write_text("someone else's log")
    os.utime(old, (time.time() - 30 * 86400,) * 2)
    (outside / "local-1-abc").mkdir()
    link = os.path.join(topic, ".compaction")
    os.symlink(outside, link)
    before = tree(str(outside))
    with pytest.raises(guard.UnexpectedLink, match=link):
        clean_stale(topic)
    refused(run_rivven(topic, "retention", "apply", "t"), link)  # (any writable open)
    assert tree(str(outside)) == before


def test_tier_deletion_never_follows_a_linked_cold_dir(data_dir, tmp_path):
    """DATA/cold (the default cold store) linked: deleting the topic removed its cold
    prefix in the link's target."""
    from helpers.tiering import make

    make(data_dir, n=300)
    topic = data_dir
    with Engine.open(topic) as eng:
        tid = eng.topic("t").id
        assert eng.maintenance.tier("t")["partitions"][0]["uploaded"]
    cold = os.path.join(topic, "cold")
    link = linked(cold, str(tmp_path / "outside"))
    before = tree(str(tmp_path / "outside"))
    assert any(tid in name for name in before)
    refused(run_rivven(topic, "topic", "delete", "t", "--yes"), link)
    refused(run_rivven(topic, "retention", "apply", "t"), link)
    assert tree(str(tmp_path / "outside")) == before


def test_a_cold_object_is_never_removed_through_a_linked_partition_prefix(tmp_path):
    """In a local cold store, the dirs rivven makes (<topic>-<id>/partition-N) are its own."""
    from engine.tiering import cold

    store = tmp_path / "store" / "t-0123" / "partition-0"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "00000000000000000000.log").write_bytes(b"x")
    store.parent.mkdir(parents=True)
    os.symlink(outside, store)
    with pytest.raises(guard.UnexpectedLink, match=str(store)):
        cold.remove(f"file://{store}/00000000000000000000.log")
    assert (outside / "00000000000000000000.log").read_bytes() == b"x"


def test_group_delete_refuses_a_linked_group_dir(topic, tmp_path):
    r = run_rivven(topic, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                   "--execute")
    assert r.returncode == 0, r.stderr.decode()
    link = linked(os.path.join(topic, "groups", "g"), str(tmp_path / "outside"))
    before = tree(str(tmp_path / "outside"))
    refused(run_rivven(topic, "group", "delete", "g", "--yes"), link)
    assert tree(str(tmp_path / "outside")) == before


def test_transaction_state_cleanup_refuses_a_linked_ids_dir(topic, tmp_path):
    """txn/ids/ linked: a rewrite's debris (<id>.log.tmp.<pid>) is removed there."""
    with Engine.open(topic) as eng:
        p = eng.producer(transactional_id="tx")
        p.begin()
        p.produce("t", [Record(value=b"v")])
        p.commit()
        p.close()
    ids = os.path.join(topic, "txn", "ids")
    assert os.path.isdir(ids)
    link = linked(ids, str(tmp_path / "outside"))
    for n in os.listdir(link):
        if n.endswith(".log"):
            open(os.path.join(link, n + ".tmp.1"), "wb").close()
    before = tree(str(tmp_path / "outside"))
    with Engine.open(topic) as eng, pytest.raises(guard.UnexpectedLink, match=link):
        p = eng.producer(transactional_id="tx")
        p.begin()
    assert tree(str(tmp_path / "outside")) == before


def test_hot_stats_of_dead_processes_are_never_removed_through_a_linked_stats_dir(tmp_path):
    from engine.tiering import status

    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "hot-999999.json").write_text("{}")  # (no such process)
    os.symlink(outside, data / ".stats")
    status.gather_hot_stats(str(data), {})
    assert (outside / "hot-999999.json").read_text() == "{}"


def test_key_reencrypt_refuses_a_linked_partition_or_staging_dir(data_dir, tmp_path):
    """Re-encryption replaces segments (the partition dir) and stages in .compaction/."""
    from helpers import new_key, write_keyring

    keyring = write_keyring(str(tmp_path / "keyring.json"), {"k1": new_key()})
    run_rivven(data_dir, "topic", "create", "t", "-c", "encryption.enable=true",
               "-c", "encryption.key.id=k1", "--keyring", keyring, check=True)
    assert produce(data_dir, "t", ["a", "b"], "--keyring", keyring).returncode == 0
    run_rivven(data_dir, "key", "rotate", "t", "--keyring", keyring, check=True)
    outside = str(tmp_path / "outside")
    link = linked(pdir(data_dir), outside)
    before = tree(outside)
    refused(run_rivven(data_dir, "key", "reencrypt", "t", "--keyring", keyring), link)
    assert tree(outside) == before
    os.unlink(link)
    shutil.move(outside, link)
    staging = tmp_path / "staging"
    (staging / "reencrypt-1-abc").mkdir(parents=True)
    (staging / "reencrypt-1-abc" / "precious.db").write_bytes(b"precious")
    os.symlink(staging, os.path.join(data_dir, ".compaction"))
    before = tree(str(staging))
    refused(run_rivven(data_dir, "key", "reencrypt", "t", "--keyring", keyring),
            os.path.join(data_dir, ".compaction"))
    assert tree(str(staging)) == before
