"""engine.tiering.hot: the in-memory run of recent batches per partition."""

import pytest

from engine.format import encode_batch
from engine.tiering.hot import HotCache

TS = 1_700_000_000_000
P0, P1 = ("t", 0), ("t", 1)


def batch(base: int, n: int = 2, size: int = 40) -> bytes:
    return bytes(encode_batch([b"k"] * n, [b"x" * size] * n, TS + base).assign(base))


def add_run(cache: HotCache, key, base: int, count: int, n: int = 2, position: int = 0) -> list:
    """Add ``count`` contiguous batches of ``n`` records from ``base``; returns their rows."""
    rows = []
    for _ in range(count):
        buf = batch(base, n)
        cache.add(key, base, base + n, position, buf)
        rows.append((base, base + n, position, buf))
        base += n
        position += len(buf)
    return rows


def test_a_miss_on_an_empty_cache():
    c = HotCache(1 << 20)
    assert c.get(P0, 0, 100, 1 << 20) == []
    assert c.partition_stats(P0) == {"bytes": 0, "hits": 0, "misses": 1}
    assert c.bytes == 0


def test_add_then_get_returns_the_very_bytes():
    c = HotCache(1 << 20)
    rows = add_run(c, P0, 10, 3)
    refs = c.get(P0, 10, 1000, 1 << 20)
    assert [r.position for r in refs] == [r[2] for r in rows]
    assert [bytes(r.buf) for r in refs] == [r[3] for r in rows]
    assert [r.start for r in refs] == [0, 0, 0]
    assert [r.header.base_offset for r in refs] == [10, 12, 14]
    assert [r.header.next_offset for r in refs] == [12, 14, 16]
    assert c.partition_stats(P0) == {"bytes": sum(len(r[3]) for r in rows), "hits": 1, "misses": 0}
    assert c.bytes == sum(len(r[3]) for r in rows)


def test_get_starts_at_the_batch_holding_the_offset():
    c = HotCache(1 << 20)
    add_run(c, P0, 10, 3)
    assert [r.header.base_offset for r in c.get(P0, 13, 1000, 1 << 20)] == [12, 14]
    assert [r.header.base_offset for r in c.get(P0, 15, 1000, 1 << 20)] == [14]


def test_get_outside_the_run_misses():
    c = HotCache(1 << 20)
    add_run(c, P0, 10, 3)  # offsets 10..15
    assert c.get(P0, 9, 1000, 1 << 20) == []
    assert c.get(P0, 16, 1000, 1 << 20) == []
    assert c.get(P0, 500, 1000, 1 << 20) == []
    assert c.partition_stats(P0)["misses"] == 3
    assert c.partition_stats(P0)["hits"] == 0


def test_get_stops_at_end():
    c = HotCache(1 << 20)
    add_run(c, P0, 10, 3)
    assert [r.header.base_offset for r in c.get(P0, 10, 14, 1 << 20)] == [10, 12]
    assert [r.header.base_offset for r in c.get(P0, 10, 15, 1 << 20)] == [10, 12]
    assert [r.header.base_offset for r in c.get(P0, 10, 16, 1 << 20)] == [10, 12, 14]


def test_get_stops_once_max_bytes_is_reached():
    c = HotCache(1 << 20)
    rows = add_run(c, P0, 10, 4)
    one = len(rows[0][3])
    assert len(c.get(P0, 10, 1000, 1)) == 1  # at least one batch
    assert len(c.get(P0, 10, 1000, one)) == 1
    assert len(c.get(P0, 10, 1000, one + 1)) == 2
    assert len(c.get(P0, 10, 1000, 3 * one)) == 3


def test_partitions_are_separate():
    c = HotCache(1 << 20)
    add_run(c, P0, 0, 2)
    add_run(c, P1, 100, 2)
    assert [r.header.base_offset for r in c.get(P1, 100, 1000, 1 << 20)] == [100, 102]
    assert c.get(P1, 0, 1000, 1 << 20) == []
    assert [r.header.base_offset for r in c.get(P0, 0, 1000, 1 << 20)] == [0, 2]
    assert c.partition_stats(P0) == {"bytes": c.bytes // 2, "hits": 1, "misses": 0}
    assert c.partition_stats(P1) == {"bytes": c.bytes // 2, "hits": 1, "misses": 1}


def test_a_gap_restarts_the_run():
    c = HotCache(1 << 20)
    add_run(c, P0, 0, 3)  # 0..5
    late = add_run(c, P0, 20, 1)  # another process appended 6..19
    assert c.get(P0, 0, 1000, 1 << 20) == []
    assert c.get(P0, 4, 1000, 1 << 20) == []
    refs = c.get(P0, 20, 1000, 1 << 20)
    assert [r.header.base_offset for r in refs] == [20]
    assert c.partition_stats(P0)["bytes"] == len(late[0][3]) == c.bytes


def test_a_run_goes_back_after_a_cut():
    c = HotCache(1 << 20)
    add_run(c, P0, 10, 3)
    c.add(P0, 4, 6, 0, batch(4))  # a lower base: not contiguous either
    assert [r.header.base_offset for r in c.get(P0, 4, 1000, 1 << 20)] == [4]
    assert c.get(P0, 12, 1000, 1 << 20) == []


def test_eviction_keeps_bytes_within_the_budget():
    one = len(batch(0))
    c = HotCache(int(2.5 * one))
    rows = add_run(c, P0, 0, 5)  # 0..9
    assert c.bytes <= c.max_bytes
    assert c.bytes == 2 * one
    assert c.get(P0, 0, 1000, 1 << 20) == []  # the oldest went first
    assert c.get(P0, 5, 1000, 1 << 20) == []
    assert [r.header.base_offset for r in c.get(P0, 6, 1000, 1 << 20)] == [6, 8]
    assert [bytes(r.buf) for r in c.get(P0, 6, 1000, 1 << 20)] == [rows[3][3], rows[4][3]]
    assert c.partition_stats(P0)["bytes"] == 2 * one


def test_eviction_takes_the_oldest_batch_of_any_partition():
    one = len(batch(0))
    c = HotCache(3 * one)
    add_run(c, P0, 0, 2)  # oldest
    add_run(c, P1, 0, 1)
    add_run(c, P1, 2, 1)  # evicts P0's first
    assert c.get(P0, 0, 1000, 1 << 20) == []
    assert [r.header.base_offset for r in c.get(P0, 2, 1000, 1 << 20)] == [2]
    assert [r.header.base_offset for r in c.get(P1, 0, 1000, 1 << 20)] == [0, 2]
    assert c.partition_stats(P0)["bytes"] + c.partition_stats(P1)["bytes"] == c.bytes == 3 * one


def test_a_batch_larger_than_the_budget_is_not_kept():
    c = HotCache(100)
    big = batch(0, size=200)
    assert len(big) > 100
    c.add(P0, 0, 2, 0, big)
    assert c.bytes == 0
    assert c.get(P0, 0, 1000, 1 << 20) == []


def test_the_cache_keeps_its_own_copy():
    c = HotCache(1 << 20)
    buf = bytearray(batch(0))
    want = bytes(buf)
    c.add(P0, 0, 2, 0, buf)
    buf[80:90] = b"\xff" * 10  # the caller reuses its buffer
    assert bytes(c.get(P0, 0, 1000, 1 << 20)[0].buf) == want


def test_an_owned_buffer_is_kept_without_a_copy():
    c = HotCache(1 << 20)
    buf = bytearray(batch(0))
    c.add(P0, 0, 2, 0, buf, owned=True)  # the produce's own buffer, never changed again
    assert c.get(P0, 0, 1000, 1 << 20)[0].buf is buf


def test_clear():
    c = HotCache(1 << 20)
    add_run(c, P0, 0, 3)
    p1 = add_run(c, P1, 0, 1)
    c.clear(P0)
    assert c.bytes == len(p1[0][3])
    assert c.get(P0, 0, 1000, 1 << 20) == []
    assert c.partition_stats(P0)["bytes"] == 0
    assert c.get(P1, 0, 1000, 1 << 20) != []
    c.clear(P0)  # twice: fine
    c.clear(("never", 9))
    # after a clear any base starts a new run
    add_run(c, P0, 50, 1)
    assert [r.header.base_offset for r in c.get(P0, 50, 1000, 1 << 20)] == [50]


def test_cleared_runs_do_not_count_against_the_budget():
    one = len(batch(0))
    c = HotCache(3 * one)
    add_run(c, P0, 0, 3)
    c.clear(P0)
    add_run(c, P1, 0, 3)  # fits: P0's bytes were given back
    assert [r.header.base_offset for r in c.get(P1, 0, 1000, 1 << 20)] == [0, 2, 4]
    assert c.bytes == 3 * one


@pytest.mark.parametrize("clear_every", [0, 7])
def test_a_long_run_stays_consistent(clear_every):
    one = len(batch(0, n=1, size=1))
    c = HotCache(10 * one)
    base = 0
    for i in range(3000):
        if clear_every and i % clear_every == 0:
            c.clear(P1)
        c.add(P0, base, base + 1, base * one, batch(base, n=1, size=1))
        c.add(P1, base, base + 1, base * one, batch(base, n=1, size=1))
        base += 1
        assert c.bytes <= c.max_bytes
    refs = c.get(P0, base - 3, base, 1 << 20)
    assert [r.header.base_offset for r in refs] == [base - 3, base - 2, base - 1]
    assert [r.position for r in refs] == [(base - 3) * one, (base - 2) * one, (base - 1) * one]
    assert c.get(P0, 0, base, 1 << 20) == []
    assert c.partition_stats(P0)["bytes"] + c.partition_stats(P1)["bytes"] == c.bytes
