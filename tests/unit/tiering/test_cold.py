"""engine.tiering.cold: whole-file copies to and from the cold store (file:// under tmp_path)."""

import glob
import importlib.util
import os
import uuid

import pytest

from engine.errors import ColdObjectError, RivvenError, StorageError
from engine.tiering import cold

CRC32C_CHECK = 0xE3069283  # CRC32C of b"123456789", the standard check value


@pytest.fixture
def store(tmp_path):
    return "file://" + str(tmp_path / "cold")


def make_src(tmp_path, data: bytes, name: str = "src.bin") -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_put_returns_size_and_crc32c(tmp_path, store):
    src = make_src(tmp_path, b"123456789")
    assert cold.put(src, store + "/t/0/obj.log") == (9, CRC32C_CHECK)
    assert (tmp_path / "cold" / "t" / "0" / "obj.log").read_bytes() == b"123456789"


def test_put_result_equals_checksum(tmp_path, store):
    data = os.urandom(3 * cold.CHUNK // 2 + 17)  # more than one chunk
    src = make_src(tmp_path, data)
    uri = store + "/big"
    got = cold.put(src, uri)
    assert got[0] == len(data)
    assert cold.checksum(uri) == got


def test_put_of_an_empty_file(tmp_path, store):
    src = make_src(tmp_path, b"")
    assert cold.put(src, store + "/empty") == (0, 0)
    assert cold.checksum(store + "/empty") == (0, 0)


def test_put_leaves_no_part_files(tmp_path, store):
    for i in range(3):
        cold.put(make_src(tmp_path, b"x" * (i + 1), f"s{i}"), f"{store}/d/o{i}")
    assert sorted(os.listdir(tmp_path / "cold" / "d")) == ["o0", "o1", "o2"]
    assert glob.glob(str(tmp_path / "cold" / "**" / "*.part-*"), recursive=True) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_a_failed_put_leaves_nothing_under_the_final_name(tmp_path, store):
    # /proc/self/mem opens fine but reading its first page fails (EIO): a copy cut short
    with pytest.raises(StorageError, match="copying /proc/self/mem to the cold store"):
        cold.put("/proc/self/mem", store + "/d/obj")
    assert os.listdir(tmp_path / "cold" / "d") == []  # neither the object nor a .part file


def test_put_of_a_missing_source(tmp_path, store):
    with pytest.raises(StorageError, match="missing.bin"):
        cold.put(str(tmp_path / "missing.bin"), store + "/x")
    assert not os.path.exists(tmp_path / "cold" / "x")


def test_fetch(tmp_path, store):
    data = os.urandom(10_000)
    uri = store + "/obj"
    put = cold.put(make_src(tmp_path, data), uri)
    dest = tmp_path / "fetched"
    assert cold.fetch(uri, str(dest)) == put
    assert dest.read_bytes() == data


def test_fetch_of_a_missing_object(tmp_path, store):
    dest = tmp_path / "fetched"
    with pytest.raises(ColdObjectError, match=f"cold object {store}/nope is missing"):
        cold.fetch(store + "/nope", str(dest))
    assert not dest.exists()


def test_checksum_of_a_missing_object(store):
    with pytest.raises(ColdObjectError, match="is missing"):
        cold.checksum(store + "/nope")


def test_checksum_sees_a_changed_object(tmp_path, store):
    uri = store + "/obj"
    put = cold.put(make_src(tmp_path, b"123456789"), uri)
    with open(tmp_path / "cold" / "obj", "r+b") as f:
        f.write(b"0")
    size, crc = cold.checksum(uri)
    assert size == put[0] and crc != put[1]


def test_remove(tmp_path, store):
    uri = store + "/obj"
    cold.put(make_src(tmp_path, b"abc"), uri)
    cold.remove(uri)
    assert not (tmp_path / "cold" / "obj").exists()
    cold.remove(uri)  # already gone: fine
    cold.remove(store + "/never/was")


def test_listdir(tmp_path, store):
    assert cold.listdir(store + "/t") == []  # a missing prefix has no objects
    src = make_src(tmp_path, b"abc")
    for name in ("b", "a", "c"):
        cold.put(src, f"{store}/t/{name}")
    cold.put(src, f"{store}/t/sub/deeper")
    assert cold.listdir(store + "/t") == [f"{store}/t/{n}" for n in ("a", "b", "c", "sub")]


def test_remove_tree(tmp_path, store):
    src = make_src(tmp_path, b"abc")
    cold.put(src, f"{store}/topic/0/a")
    cold.put(src, f"{store}/topic/1/b")
    cold.put(src, f"{store}/other/c")
    cold.remove_tree(store + "/topic")
    assert not (tmp_path / "cold" / "topic").exists()
    assert cold.listdir(store + "/other") == [f"{store}/other/c"]
    cold.remove_tree(store + "/topic")  # a missing prefix: fine


@pytest.mark.parametrize("uri, path", [
    ("file:///mnt/cold", "/mnt/cold"),
    ("file://localhost/mnt/cold", "/mnt/cold"),
    ("file:///mnt/my%20cold/x", "/mnt/my cold/x"),
    ("/plain/path", "/plain/path"),
    ("relative/path", "relative/path"),
])
def test_local_path(uri, path):
    assert cold.local_path(uri) == path


@pytest.mark.parametrize("uri", ["s3://bucket/prefix", "gs://b/p", "memory://x", "hdfs://nn/p"])
def test_local_path_of_a_remote_uri_is_none(uri):
    assert cold.local_path(uri) is None


@pytest.mark.parametrize("uri", ["file://otherhost/mnt/cold", "file://example.com/x"])
def test_local_path_rejects_another_host(uri):
    with pytest.raises(RivvenError, match="file:// URIs must name a local path"):
        cold.local_path(uri)


def test_file_localhost_uri_reads_the_same_file(tmp_path):
    data = b"through localhost"
    p = str(tmp_path / "cold" / "obj")
    put = cold.put(make_src(tmp_path, data), "file://localhost" + p)
    assert cold.checksum("file://" + p) == put
    assert open(p, "rb").read() == data


def test_default_uri(tmp_path, monkeypatch):
    assert cold.default_uri(str(tmp_path / "data")) == "file://" + str(tmp_path / "data" / "cold")
    monkeypatch.chdir(tmp_path)
    assert cold.default_uri("data") == "file://" + str(tmp_path / "data" / "cold")
    assert cold.local_path(cold.default_uri("data")) == str(tmp_path / "data" / "cold")


def test_check_accepts_local_stores(store):
    cold.check(store)
    cold.check("/some/path")


def test_check_names_the_fix_for_an_unknown_scheme():
    with pytest.raises(RivvenError, match="install the fsspec backend for nosuchscheme://"):
        cold.check("nosuchscheme://bucket/x")


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed")
def test_check_names_the_extra_for_s3():
    with pytest.raises(RivvenError, match=r"pip install 'rivven\[s3\]'"):
        cold.check("s3://bucket/prefix")


def test_a_non_local_store_goes_through_fsspec(tmp_path):
    # fsspec's in-memory file system: a real backend, no network
    prefix = f"memory://rivven-test-{uuid.uuid4().hex}"
    src = make_src(tmp_path, b"123456789")
    try:
        assert cold.listdir(prefix) == []
        assert cold.put(src, prefix + "/a") == (9, CRC32C_CHECK)
        assert cold.checksum(prefix + "/a") == (9, CRC32C_CHECK)
        assert cold.listdir(prefix) == [prefix + "/a"]
        assert cold.fetch(prefix + "/a", str(tmp_path / "back")) == (9, CRC32C_CHECK)
        assert (tmp_path / "back").read_bytes() == b"123456789"
        with pytest.raises(ColdObjectError, match="is missing"):
            cold.checksum(prefix + "/b")
        cold.remove(prefix + "/a")
        cold.remove(prefix + "/a")
        assert cold.listdir(prefix) == []
    finally:
        cold.remove_tree(prefix)
