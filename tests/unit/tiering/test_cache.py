"""engine.tiering.cache: the local cache of cold segments, over real files and a file:// store."""

import os
import shutil
import time

import pytest
from helpers import flip

from engine.errors import ColdObjectError
from engine.format import decode_records, encode_batch, read_header
from engine.format.decode import body_of, layout
from engine.segments import filenames
from engine.segments.segment import Segment
from engine.segments.tier_manifest import SUFFIXES, ColdSegment
from engine.tiering import cold
from engine.tiering.cache import TMP_PREFIX, ColdCache, cache_root, download_segment

TS0 = 1_700_000_000_000


def build_segment(directory: str, base: int, batches: int = 4) -> Segment:
    os.makedirs(directory, exist_ok=True)
    seg = Segment(directory, base, writable=True, create=True)
    seg.index_interval = 0
    pos, off = 0, base
    for i in range(batches):
        buf = encode_batch([b"k%d" % i] * 2, [b"v%04d-%d" % (base, i) * 20] * 2, TS0 + i).assign(off)
        h = read_header(buf)
        seg.write(buf, pos)
        seg.appended(pos, off, len(buf), h.next_offset, h.max_timestamp)
        pos, off = pos + len(buf), h.next_offset
    seg.sync_all()
    return seg


def upload(seg: Segment, store: str, name: str) -> ColdSegment:
    """Copy a segment's three files to the cold store; its manifest entry."""
    obj = f"{store}/{name}"
    got = {s: cold.put(filenames.path(seg.directory, seg.base, s), obj + s) for s in SUFFIXES}
    return ColdSegment(
        base_offset=seg.base, next_offset=seg.next_offset, bytes=got[filenames.LOG][0],
        crc32c=got[filenames.LOG][1], max_timestamp=seg.max_timestamp,
        index_bytes=got[filenames.INDEX][0], index_crc32c=got[filenames.INDEX][1],
        timeindex_bytes=got[filenames.TIMEINDEX][0], timeindex_crc32c=got[filenames.TIMEINDEX][1],
        object=obj, uploaded_ms=TS0)


@pytest.fixture
def store(tmp_path):
    return "file://" + str(tmp_path / "cold")


@pytest.fixture
def entry(tmp_path, store):
    seg = build_segment(str(tmp_path / "local"), 100)
    e = upload(seg, store, "topic/0/00000000000000000100-abc")
    seg.close()
    return e


def cold_file(entry: ColdSegment, suffix: str) -> str:
    return cold.local_path(entry.url(suffix))


def records_of(seg: Segment) -> list:
    out = []
    for ref in seg.iter_batches(0, seg.size):
        body = body_of(ref.buf, ref.start, ref.header)
        out += decode_records(body, ref.header, layout(body, ref.header), partition=0)
    return out


def test_cache_root_of_a_writable_data_dir(data_dir):
    os.makedirs(data_dir)
    assert cache_root(data_dir) == os.path.join(data_dir, ".tier-cache")


def test_the_upload_matches_the_local_files(tmp_path, entry):
    for suffix in SUFFIXES:
        local = filenames.path(str(tmp_path / "local"), 100, suffix)
        assert os.path.getsize(local) == entry.expected(suffix)[0] > 0
        assert cold.checksum(entry.url(suffix)) == entry.expected(suffix)


def test_download_segment(tmp_path, entry):
    dest = tmp_path / "dl"
    dest.mkdir()
    total = download_segment(entry, str(dest))
    assert total == entry.bytes + entry.index_bytes + entry.timeindex_bytes
    for suffix in SUFFIXES:
        got = filenames.path(str(dest), 100, suffix)
        with open(got, "rb") as a, open(filenames.path(str(tmp_path / "local"), 100, suffix), "rb") as b:
            assert a.read() == b.read()


def test_segment_downloads_once_then_hits(tmp_path, entry):
    cache = ColdCache(str(tmp_path / "cache"), max_bytes=1 << 30)
    seg = cache.segment(entry)
    assert cache.stats() == {"hits": 0, "downloads": 1, "downloaded_bytes":
                             entry.bytes + entry.index_bytes + entry.timeindex_bytes}
    assert (seg.size, seg.next_offset, seg.max_timestamp) == \
        (entry.bytes, entry.next_offset, entry.max_timestamp)
    assert seg.loaded and not seg.writable
    assert os.path.dirname(seg.path) == cache.folder(entry)
    assert [r.value for r in records_of(seg)] == [b"v0100-%d" % i * 20 for i in range(4) for _ in (0, 1)]
    assert [r.offset for r in records_of(seg)] == list(range(100, 108))
    # the downloaded indexes work
    assert seg.position_for(106) > 0 and len(seg.index) == 3
    again = cache.segment(entry)
    assert again is seg
    assert (cache.hits, cache.downloads) == (1, 1)
    # only the finished folder is left, no temp folder
    assert os.listdir(cache.root) == [os.path.basename(cache.folder(entry))]


def test_a_second_cache_on_the_same_root_reuses_the_folder(tmp_path, entry):
    root = str(tmp_path / "cache")
    ColdCache(root, 1 << 30).segment(entry)
    other = ColdCache(root, 1 << 30)  # another process
    seg = other.segment(entry)
    assert (other.hits, other.downloads) == (1, 0)
    assert len(records_of(seg)) == 8


def test_an_altered_cached_copy_is_downloaded_again(tmp_path, entry):
    root = str(tmp_path / "cache")
    first = ColdCache(root, 1 << 30)
    seg = first.segment(entry)
    with open(seg.path, "ab") as f:
        f.write(b"junk")
    second = ColdCache(root, 1 << 30)
    seg2 = second.segment(entry)
    assert (second.hits, second.downloads) == (0, 1)
    assert os.path.getsize(seg2.path) == entry.bytes


def test_a_deleted_cached_copy_is_downloaded_again(tmp_path, entry):
    cache = ColdCache(str(tmp_path / "cache"), 1 << 30)
    seg = cache.segment(entry)
    shutil.rmtree(os.path.dirname(seg.path))  # evicted by another process
    seg2 = cache.segment(entry)
    assert cache.downloads == 2
    assert os.path.exists(seg2.path)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_damaged_object_is_refused(tmp_path, entry, suffix):
    flip(cold_file(entry, suffix), 0)  # same size, different bytes
    cache = ColdCache(str(tmp_path / "cache"), 1 << 30)
    with pytest.raises(ColdObjectError) as e:
        cache.segment(entry)
    msg = str(e.value)
    assert f"cold object {entry.url(suffix)} is damaged" in msg
    assert "rivven segment verify --cold" in msg
    # nothing was kept: neither the folder nor a temp folder
    assert os.listdir(cache.root) == []
    assert cache.downloads == 0


def test_a_truncated_object_is_refused(tmp_path, entry):
    os.truncate(cold_file(entry, filenames.LOG), entry.bytes - 8)
    with pytest.raises(ColdObjectError, match=f"holds {entry.bytes - 8} bytes"):
        download_segment(entry, str(tmp_path))


def test_a_missing_object(tmp_path, entry):
    os.unlink(cold_file(entry, filenames.TIMEINDEX))
    cache = ColdCache(str(tmp_path / "cache"), 1 << 30)
    with pytest.raises(ColdObjectError, match="is missing"):
        cache.segment(entry)
    assert os.listdir(cache.root) == []


def age(folder: str, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    for name in os.listdir(folder):
        os.utime(os.path.join(folder, name), (t, t))


def folder_bytes(e: ColdSegment) -> int:
    return e.bytes + e.index_bytes + e.timeindex_bytes


def test_eviction_removes_least_recently_opened_folders(tmp_path, store):
    entries = []
    for i, base in enumerate((0, 100, 200, 300)):
        seg = build_segment(str(tmp_path / "local" / str(i)), base)
        entries.append(upload(seg, store, f"seg-{base}"))
        seg.close()
    one = folder_bytes(entries[0])
    assert {folder_bytes(e) for e in entries} == {one}
    cache = ColdCache(str(tmp_path / "cache"), max_bytes=2 * one + one // 2)  # room for two
    a, b, c, d = entries
    cache.segment(a)
    age(cache.folder(a), 300)
    cache.segment(b)
    age(cache.folder(b), 200)
    assert os.path.isdir(cache.folder(a)) and os.path.isdir(cache.folder(b))
    # reopen a (another cache object, so the open is a real one that touches the folder)
    reader = ColdCache(cache.root, cache.max_bytes)
    reader.segment(a)
    assert reader.hits == 1
    cache.segment(c)  # three folders: b, the least recently opened, goes
    assert not os.path.exists(cache.folder(b))
    assert os.path.isdir(cache.folder(a)) and os.path.isdir(cache.folder(c))
    age(cache.folder(a), 100)
    cache.segment(d)
    assert not os.path.exists(cache.folder(a))
    assert sorted(os.listdir(cache.root)) == sorted(os.path.basename(cache.folder(e)) for e in (c, d))
    # an evicted segment is fetched again when asked for
    downloads = cache.downloads
    seg_b = cache.segment(b)
    assert cache.downloads == downloads + 1
    assert seg_b.next_offset == 108


def test_the_folder_just_opened_is_never_evicted(tmp_path, store):
    entries = []
    for base in (0, 100):
        seg = build_segment(str(tmp_path / "local" / str(base)), base)
        entries.append(upload(seg, store, f"seg-{base}"))
        seg.close()
    cache = ColdCache(str(tmp_path / "cache"), max_bytes=100)  # smaller than one segment
    first = cache.segment(entries[0])
    assert os.path.isdir(cache.folder(entries[0]))  # over budget, but just opened
    assert len(records_of(first)) == 8
    second = cache.segment(entries[1])
    assert not os.path.exists(cache.folder(entries[0]))
    assert os.path.isdir(cache.folder(entries[1]))
    assert len(records_of(second)) == 8
    # the evicted one was dropped from the open set: asking again downloads it again
    cache.segment(entries[0])
    assert cache.downloads == 3
    # a reader that still had the evicted files open keeps reading them
    assert len(records_of(first)) == 8


def test_eviction_clears_stale_temp_folders_only(tmp_path, entry):
    root = tmp_path / "cache"
    old = root / f"{TMP_PREFIX}1-dead"
    new = root / f"{TMP_PREFIX}2-busy"
    for d in (old, new):
        d.mkdir(parents=True)
        (d / "part").write_bytes(b"x" * 10)
    t = time.time() - 7200
    os.utime(old / "part", (t, t))
    os.utime(old, (t, t))
    cache = ColdCache(str(root), 1 << 30)
    cache.segment(entry)
    assert not old.exists()  # a downloader that died an hour ago
    assert new.exists()  # one that may still be running


def test_a_segment_opened_from_the_cache_reads_the_same_as_the_local_one(tmp_path, entry):
    local = Segment(str(tmp_path / "local"), 100, writable=False)
    local.load(repair=False)
    cached = ColdCache(str(tmp_path / "cache"), 1 << 30).segment(entry)
    assert records_of(cached) == records_of(local)
    assert list(cached.timeindex.keys) == list(local.timeindex.keys)
    local.close()
