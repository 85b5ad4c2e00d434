"""Damage stays where it is (issue 29, item 0), the reproducer with the real ``rivven``: one
flipped byte in batch 1 of 3 (offsets 50..99) no longer takes the partition down — offsets,
reads before and after it, produce and delete-records work, a read that reaches it exits 3
naming its offsets and the ways past, and ``segment recover --truncate-corrupt`` cuts out that
batch alone (``--dry-run`` and ``--yes`` as before), its offsets a known gap to verify."""

import json
import os

from helpers import run_rivven
from helpers.damage import damage_batch, make_topic


def offsets_of(r) -> list[int]:
    return [int(x) for x in r.stdout.split()]


def test_reads_around_a_damaged_batch_work_and_one_that_reaches_it_names_the_way_past(data_dir):
    make_topic(data_dir, 3)
    damage_batch(data_dir, 50)
    r = run_rivven(data_dir, "offsets", "t", "--json")
    assert r.returncode == 0, r.stderr
    assert [(p["start_offset"], p["end_offset"]) for p in json.loads(r.stdout)] == [(0, 150)]
    r = run_rivven(data_dir, "consume", "t", "-o", "10", "-f", "%o\n")
    assert r.returncode == 3 and offsets_of(r) == list(range(10, 50))  # the intact batch
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in ("offsets 50..99 of t-0 cannot be read", "'rivven consume t -p 0 -o 100'",
                 "'rivven delete-records t -p 0 --before 100'",
                 "'rivven segment recover t --truncate-corrupt'"):
        assert part in err, err
    r = run_rivven(data_dir, "consume", "t", "-o", "120", "-n", "3", "-f", "%o\n")
    assert r.returncode == 0 and offsets_of(r) == [120, 121, 122], r.stderr
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    assert r.returncode == 0, r.stderr
    r = run_rivven(data_dir, "delete-records", "t", "--before", "1", "-y")
    assert r.returncode == 0, r.stderr


def test_recover_cuts_out_only_the_damaged_batch(data_dir):
    make_topic(data_dir, 3)
    log, at = damage_batch(data_dir, 50)
    size = os.path.getsize(log)
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 3, r.stdout + r.stderr
    assert b"(offsets 50..99 cannot be read; the intact batch at position " in r.stdout, r.stdout
    assert b"'rivven segment recover --truncate-corrupt --dry-run' shows" in r.stderr, r.stderr
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert f"would cut out the damaged batch at {at}" in out and "offsets 50..99" in out, out
    assert "the intact batches around it stay" in out and "truncate" not in out, out
    assert os.path.getsize(log) == size
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt")
    assert r.returncode == 1 and os.path.getsize(log) == size  # (no terminal to ask on)
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    (cut,) = json.loads(r.stdout)[0]["cut_out"]
    assert (cut["position"], cut["first"], cut["last"], cut["records"]) == (at, 50, 99, 50)
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"known gap: " in r.stdout and b"offsets 50..99 were cut out by a repair" in r.stdout
    r = run_rivven(data_dir, "consume", "t", "-f", "%o\n")
    assert r.returncode == 0 and offsets_of(r) == [*range(50), *range(100, 150)], r.stderr


def test_a_damaged_end_is_refused_to_writers_naming_the_repair_and_leaves_no_wal(data_dir):
    make_topic(data_dir, 3)
    damage_batch(data_dir, 100)  # (the last batch, which the checkpoint vouches for)
    r = run_rivven(data_dir, "offsets", "t", "--json")
    assert r.returncode == 0, r.stderr
    assert [(p["start_offset"], p["end_offset"]) for p in json.loads(r.stdout)] == [(0, 100)]
    r = run_rivven(data_dir, "consume", "t", "-o", "60", "-f", "%o\n")
    assert r.returncode == 3 and offsets_of(r) == list(range(60, 100)), r.stderr
    assert b"offsets from 100 of t-0 cannot be read" in r.stderr, r.stderr
    assert b"'rivven segment recover t --truncate-corrupt' cuts it" in r.stderr, r.stderr
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    err = r.stderr.decode()
    assert r.returncode == 3 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "appends are refused until 'rivven segment recover" in err, err
    r = run_rivven(data_dir, "topic", "create", "u")  # (the failed produce left no WAL)
    assert r.returncode == 0 and b"recovered" not in r.stderr, r.stderr
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes")
    assert r.returncode == 0, r.stderr
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    assert r.returncode == 0, r.stderr
    r = run_rivven(data_dir, "consume", "t", "-f", "%o\n")
    assert r.returncode == 0 and offsets_of(r) == list(range(101)), r.stderr


def test_a_group_consumer_gets_the_records_before_the_damage_and_the_way_past_for_its_group(
        data_dir):
    make_topic(data_dir, 3)
    damage_batch(data_dir, 50)
    r = run_rivven(data_dir, "consume", "t", "-g", "g", "-f", "%o\n")
    assert r.returncode == 3 and offsets_of(r) == list(range(50)), r.stderr
    way = b"'rivven group reset-offsets g --topic t:0 --to-offset 100 --execute'"
    assert way in r.stderr, r.stderr
    r = run_rivven(data_dir, "group", "describe", "g", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["current_offset"] for p in json.loads(r.stdout)["partitions"]] == [50], r.stdout
    r = run_rivven(data_dir, "group", "reset-offsets", "g", "--topic", "t:0", "--to-offset", "100",
                   "--execute")
    assert r.returncode == 0, r.stderr
    r = run_rivven(data_dir, "consume", "t", "-g", "g", "-f", "%o\n")
    assert r.returncode == 0 and offsets_of(r) == list(range(100, 150)), r.stderr
