"""What goes in and out of the CLI: interrupted produces, input options, the consume -> produce
round trip, format tokens, several topics, index dumps. Pipes and signals through real
processes."""

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

import pytest
from helpers import ROOT, produce_into_head, run_rivven
from helpers.cli import run_in_process
from typer.testing import CliRunner

from engine import Engine, Record
from rivven_cli.main import app

runner = CliRunner()
RIVVEN = [sys.executable, "-m", "rivven_cli"]


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


def produce(data_dir, *args, input=b""):
    """rivven produce (in this process: its stdin a real file, whose descriptor it reads)."""
    r = run_in_process(data_dir, "produce", *args, input=input)
    r.stderr = r.stderr.decode()
    r.exit_code = r.returncode
    return r


def env(data_dir):
    return dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))


def end_offsets(data_dir, topic):
    r = run_in_process(data_dir, "offsets", topic, "--json", check=True)
    return {row["partition"]: row["end_offset"] for row in json.loads(r.stdout)}


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ================================================================ engine: several topics, idle
def test_engine_streams_several_topics_and_matches_names_whole(tmp_path):
    with Engine.open(str(tmp_path / "d")) as eng:
        for t in ("orders-eu", "orders-us", "old-orders-eu", "clicks"):
            eng.create_topic(t, 2)
        eng.produce_batch("orders-eu", [b"a", b"b"], keys=[b"1", b"2"])
        eng.produce_batch("clicks", [b"c"])
        assert eng.match_topics(["orders-.*"]) == ["orders-eu", "orders-us"]
        assert eng.match_topics(["orders-.*", "cl.*"]) == ["clicks", "orders-eu", "orders-us"]
        got = sorted((b.topic, v) for b in eng.stream(["orders-eu", "clicks"])
                     for v in b.values)
        assert got == [("clicks", b"c"), ("orders-eu", b"a"), ("orders-eu", b"b")]
        assert sum(len(b.values) for b in eng.stream(["orders-eu", "clicks"],
                                                     max_records=2)) == 2
        # follow with an idle timeout ends by itself once nothing more comes
        assert sum(len(b.values) for b in eng.stream("clicks", follow=True,
                                                     idle_timeout_ms=200)) == 1
        from engine.errors import InvalidArgument
        with pytest.raises(InvalidArgument, match="regular expression"):
            eng.match_topics(["orders-("])


def test_engine_dumps_index_entries_and_checks_them(tmp_path):
    from engine.tools.inspect import inspect_index

    d = str(tmp_path / "d")
    with Engine.open(d) as eng:
        eng.create_topic("x", 1, {"index.interval.bytes": "100"})
        for i in range(5):
            eng.produce_batch("x", [b"v"] * 3, timestamps=[1000 * i + 7] * 3)
    base = os.path.join(d, "topics", "x", "partition-0", "0" * 20)
    rows = list(inspect_index(base + ".index"))
    assert [(r["relative_offset"], r["offset"], r["position"]) for r in rows] == [
        (3, 3, 120), (6, 6, 240), (9, 9, 360), (12, 12, 480)]
    assert all(r["points_at_batch"] for r in rows)
    times = list(inspect_index(base + ".timeindex"))
    assert [(r["timestamp"], r["offset"]) for r in times] == [
        (7, 3), (1007, 6), (2007, 9), (3007, 12)]
    assert all(r["points_at_batch"] and r["timestamp_matches"] for r in times)
    with open(base + ".index", "r+b") as f:  # entry 1 now claims offset 7 at position 240
        f.seek(8)
        f.write(struct.pack("<ii", 7, 240))
    with open(base + ".index", "ab") as f:
        f.write(b"\x01\x02\x03")
    rows = list(inspect_index(base + ".index"))
    assert [r.get("points_at_batch") for r in rows] == [True, False, True, True, None]
    assert "partial entry (3 of 8 bytes)" in rows[-1]["error"]


# ================================================================ interrupted produce
def test_produce_into_a_closed_pipe_exits_141_and_says_how_many_were_stored(data_dir):
    """seq | rivven produce --print-offsets | head -2: real processes, a real broken pipe."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    shown, code, err = produce_into_head(data_dir, "t", "--print-offsets")
    assert shown == b"0 0\n0 1\n"
    assert code == 141, err
    assert "broken pipe" in err and "Traceback" not in err and "Exception ignored" not in err
    stored = end_offsets(data_dir, "t")[0]
    assert 0 < stored < 300000
    assert f"{stored:,} records" in err and "stored" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_produce_with_128_plus_its_number_and_the_count(data_dir, sig, code):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    prod = subprocess.Popen([*RIVVEN, "produce", "t"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(data_dir),
                            cwd=ROOT)
    prod.stdin.write(b"a\nb\nc\n")
    prod.stdin.flush()
    # the three lines are stored; the producer now waits for more input
    wait_for(lambda: end_offsets(data_dir, "t") == {0: 3}, "3 records stored")
    prod.send_signal(sig)
    out, err = prod.communicate(timeout=60)
    err = err.decode()
    assert prod.returncode == code, err
    assert f"stopped by {signal.Signals(sig).name}" in err and "3 records" in err, err
    assert "Traceback" not in err and "produced 3" not in err


def test_a_stopped_produce_reports_as_json_with_json(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    prod = subprocess.Popen([*RIVVEN, "produce", "t", "--json", "-q"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(data_dir),
                            cwd=ROOT)
    prod.stdin.write(b"a\n")
    prod.stdin.flush()
    wait_for(lambda: end_offsets(data_dir, "t") == {0: 1}, "1 record stored")
    prod.send_signal(signal.SIGTERM)
    _, err = prod.communicate(timeout=60)
    assert prod.returncode == 143
    doc = json.loads(err)
    assert (doc["records"], doc["stopped"], doc["in_flight"]) == (1, "SIGTERM", False)


def test_a_signal_during_a_store_waits_for_its_acknowledgement():
    """The first signal while a batch is stored is held until the batch is acknowledged; a
    second one raises at once."""
    from rivven_cli.interrupts import Guard, Stopped

    g = Guard()
    stored = []
    with pytest.raises(Stopped) as e:
        with g.storing():
            g._handler(signal.SIGTERM, None)
            stored.append(1)  # the batch is still acknowledged and counted
    assert stored == [1] and e.value.exit_code == 143 and not e.value.in_flight
    g = Guard()
    with pytest.raises(Stopped) as e:
        with g.storing():
            g._handler(signal.SIGINT, None)
            g._handler(signal.SIGINT, None)
    assert e.value.in_flight and e.value.exit_code == 130
    with pytest.raises(Stopped):  # not storing (waiting for input): at once
        Guard()._handler(signal.SIGINT, None)


# ================================================================ options that cannot apply
@pytest.mark.parametrize("args,option,why", [
    (["--input", "json", "-k", "k"], "--key", '"key" field'),
    (["--input", "json", "-K", ":"], "--key-separator", "not KEY<SEP>VALUE"),
    (["--input", "json", "-F", "%k %v\\n"], "--format", "parses text lines"),
    (["-F", "%k %v\\n", "-K", ":"], "--key-separator", "says where the key is"),
    (["-F", "%k %v\\n", "-k", "x"], "--key", "has %k"),
    (["--keep-partition"], "--keep-partition", "applies to --input json"),
    (["--input", "json", "--keep-partition", "-p", "0"], "--keep-partition", "either"),
    (["--key-encoding", "hex"], "--key-encoding", "no keys to decode"),
    (["-F", "%v\\n", "--key-encoding", "base64"], "--key-encoding", "no keys to decode"),
])
def test_produce_refuses_options_that_cannot_apply(data_dir, args, option, why):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    r = produce(data_dir, "t", *args, input=b'{"value": "x"}\n')
    assert r.exit_code == 2, r.stderr
    assert option in r.stderr and why in " ".join(r.stderr.replace("│", " ").split()), r.stderr
    assert end_offsets(data_dir, "t") == {0: 0}


def test_produce_json_skips_blank_lines_and_names_lines_counting_them(data_dir):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    r = produce(data_dir, "t", "--input", "json",
            input=b'\n{"value": "a"}\n\n   \n{"value": "b"}\n\n')
    assert r.exit_code == 0, r.stderr
    assert cli(data_dir, "consume", "t").stdout == "a\nb\n"
    r = produce(data_dir, "t", "--input", "json", input=b'\n\n{"value": "c"}\n{bad\n')
    assert r.exit_code == 1 and "line 4:" in r.stderr, r.stderr
    assert cli(data_dir, "consume", "t").stdout == "a\nb\nc\n"


def test_produce_lines_keeps_an_empty_line_as_an_empty_value(data_dir):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    assert produce(data_dir, "t", input=b"a\n\nb\n").exit_code == 0
    assert cli(data_dir, "consume", "t", "-f", "%o:%v|\\n").stdout == "0:a|\n1:|\n2:b|\n"


# ================================================================ the line, not the record
def test_a_record_too_large_names_its_line_never_the_record_index(data_dir):
    run_in_process(data_dir, "topic", "create", "t", "-c", "max.message.bytes=1000", check=True)
    for extra in ([], ["--batch-records", "1"]):
        r = run_in_process(data_dir, "produce", "t", *extra, input=b"a\n" + b"x" * 2000 + b"\nc\n")
        err = r.stderr.decode()
        assert r.returncode == 1 and "line 2:" in err, err
        assert "record 0" not in err and "record 1" not in err, err
    # lines skipped by --input json count as lines
    r = run_in_process(data_dir, "produce", "t", "--input", "json", "--batch-records", "2",
                       input=b'\n{"value": "a"}\n\n{"value": "' + b"x" * 2000 + b'"}\n')
    err = r.stderr.decode()
    assert r.returncode == 1 and "line 4:" in err and "record 0" not in err, err


# ================================================================ consume | produce
def random_records(rng, n):
    def blob():
        kind = rng.random()
        if kind < 0.1:
            return None
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
        if kind < 0.3:
            return raw + b"\x00\n\r\n\xff\xfe" + raw
        if kind < 0.4:
            return "é\u2028日本\n".encode() + raw
        return raw

    recs = []
    for i in range(n):
        headers = [(f"h{j}", blob()) for j in range(rng.randrange(0, 3))]
        recs.append(Record(key=blob(), value=blob(), headers=headers, timestamp=1_000_000 + i))
    recs.append(Record(key=b"gone", value=None, headers=[("why", None)], timestamp=5))
    return recs


def records_of(data_dir, topic):
    out = []
    with Engine.open(data_dir, read_only=True) as eng:
        for p in range(eng.topic(topic).partitions):
            out += [(p, r.key, r.value, list(r.headers), r.timestamp)
                    for r in eng.read(topic, p, 0, 10_000)]
    return out


def pipe(data_dir, consume_args, produce_args):
    """rivven consume ... | rivven produce ...: two real processes, one real pipe."""
    cons = subprocess.Popen([*RIVVEN, "consume", *consume_args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(data_dir), cwd=ROOT)
    prod = subprocess.Popen([*RIVVEN, "produce", *produce_args], stdin=cons.stdout,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(data_dir),
                            cwd=ROOT)
    cons.stdout.close()
    _, perr = prod.communicate(timeout=120)
    _, cerr = cons.communicate(timeout=120)
    assert cons.returncode == 0, cerr
    assert prod.returncode == 0, perr
    return perr.decode()


@pytest.mark.parametrize("encoding", ["base64", "hex"])
def test_binary_records_round_trip_byte_for_byte_through_consume_and_produce(data_dir,
                                                                             encoding):
    rng = random.Random(14)
    with Engine.open(data_dir) as eng:
        eng.create_topic("src", 3)
        eng.create_topic("mirror", 3)
        eng.create_topic("fewer", 2)
        recs = random_records(rng, 300)
        for p in range(3):
            eng.produce("src", recs[p::3], partition=p)
    enc = ["--key-encoding", encoding, "--value-encoding", encoding]
    pipe(data_dir, ["src", "--json", *enc], ["mirror", "--input", "json", "--keep-partition",
                                              *enc])
    assert records_of(data_dir, "mirror") == records_of(data_dir, "src")
    # without --keep-partition, a topic with fewer partitions takes the same records
    pipe(data_dir, ["src", "--json", *enc], ["fewer", "--input", "json", *enc])
    assert sorted((r[1:] for r in records_of(data_dir, "fewer")), key=repr) == sorted(
        (r[1:] for r in records_of(data_dir, "src")), key=repr)


def test_consume_json_is_taken_back_by_produce_json_as_it_is(data_dir):
    """The issue's command: rivven consume --json | rivven produce other --input json."""
    run_rivven(data_dir, "topic", "create", "t", "-p", "3", check=True)
    run_rivven(data_dir, "topic", "create", "other", check=True)
    run_rivven(data_dir, "produce", "t", "-K", ":", "-H", "src=web",
               input=b"alice:{\"qty\":1}\nbob:caf\xc3\xa9\n", check=True)
    pipe(data_dir, ["t", "--json"], ["other", "--input", "json"])
    src = sorted(r[1:] for r in records_of(data_dir, "t"))
    assert sorted(r[1:] for r in records_of(data_dir, "other")) == src


def test_values_with_newlines_round_trip_with_a_nul_terminated_format(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("src", 1)
        eng.create_topic("dst", 1)
        eng.produce("src", [Record(key=b"k1", value=b"two\nlines"), Record(key=b"k\t2", value=b"")])
    pipe(data_dir, ["src", "-f", "%T %k\\t%v\\0", "--key-encoding", "hex"],
         ["dst", "-F", "%T %k\\t%v\\0", "--key-encoding", "hex"])
    assert records_of(data_dir, "dst") == records_of(data_dir, "src")


# ================================================================ format tokens
def test_consume_format_tokens_of_kcat_and_rpk(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(key=b"key", value=b"value", headers=[("a", b"1"), ("b", None)],
                                 timestamp=1_700_000_000_123),
                          Record(key=None, value=None, timestamp=0)])
    r = cli(data_dir, "consume", "t", "-f", "%s|%v|%K|%S|%V|%H|%T|%d\\n")
    assert r.stdout == "value|value|3|5|5|2|1700000000123|1700000000123\n||-1|-1|-1|0|0|0\n"
    r = cli(data_dir, "consume", "t", "-n", "1", "-f",
            "%d{strftime[%Y-%m-%d %H:%M:%S]} %T{strftime##[%F]##} 100%%\\n")
    assert r.stdout == "2023-11-14 22:13:20 2023-11-14 100%\n"
    r = cli(data_dir, "consume", "t", "-f", "%k\\0%v\\x41\\\\n%{%}")
    assert r.stdout_bytes == b"key\x00valueA\\n{}\x00A\\n{}"
    for bad in ("%q", "%v{hex}", "%d{strftime[%F}", "\\xZZ"):
        r = cli(data_dir, "consume", "t", "-f", bad)
        assert r.exit_code == 2 and "--format" in r.stderr, (bad, r.stderr)


def test_produce_format_parses_lines_as_rpk_produce_f_does(data_dir):
    assert cli(data_dir, "topic", "create", "t", "-p", "2").exit_code == 0
    r = produce(data_dir, "t", "-F", "%k %v\\n", input=b"k1 hello world\nk2 bye\n")
    assert r.exit_code == 0, r.stderr
    got = sorted(r[1:3] for r in records_of(data_dir, "t"))
    assert got == [(b"k1", b"hello world"), (b"k2", b"bye")]
    r = produce(data_dir, "t", "-F", "[%p] %T %k=%v\\n",
            input=b"[1] 42 a=x\n[0] 43 b=y\n")
    assert r.exit_code == 0, r.stderr
    rows = {r[1]: (r[0], r[4]) for r in records_of(data_dir, "t")}
    assert rows[b"a"] == (1, 42) and rows[b"b"] == (0, 43)
    r = produce(data_dir, "t", "-F", "%k %v\\n", input=b"k3 ok\nno-space\n")
    assert r.exit_code == 1 and "line 2:" in r.stderr and "' '" in r.stderr, r.stderr
    for bad in ("%k%v\\n", "%h %v\\n", "%S %v\\n", "%T{strftime[%F]} %v\\n"):
        r = produce(data_dir, "t", "-F", bad, input=b"x\n")
        assert r.exit_code == 2 and "--format" in r.stderr, (bad, r.stderr)


def test_produce_f_is_still_the_input_file(data_dir, tmp_path):
    f = tmp_path / "in.txt"
    f.write_bytes(b"from-file\n")
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    assert produce(data_dir, "t", "-f", str(f)).exit_code == 0
    assert cli(data_dir, "consume", "t").stdout == "from-file\n"


# ================================================================ several topics
def test_consume_several_topics_and_a_regex(data_dir):
    with Engine.open(data_dir) as eng:
        for t in ("orders-eu", "orders-us", "old-orders", "clicks"):
            eng.create_topic(t, 1)
            eng.produce(t, [Record(value=t.encode())])
    r = cli(data_dir, "consume", "orders-eu", "clicks", "-f", "%t:%v\\n")
    assert sorted(r.stdout.splitlines()) == ["clicks:clicks", "orders-eu:orders-eu"]
    r = cli(data_dir, "consume", "-r", "orders-.*", "--json")
    assert sorted(json.loads(x)["topic"] for x in r.stdout.splitlines()) == [
        "orders-eu", "orders-us"]
    r = cli(data_dir, "consume", "-r", "nothing-.*")
    assert r.exit_code == 1 and "no topic matches" in r.stderr
    r = cli(data_dir, "consume", "orders-eu", "clicks", "-g", "g", "-f", "%t\\n")
    assert sorted(r.stdout.splitlines()) == ["clicks", "orders-eu"]
    r = cli(data_dir, "group", "describe", "g", "--json")
    assert {p["topic"] for p in json.loads(r.stdout)["partitions"]} == {"orders-eu", "clicks"}


def test_consume_e_is_kcats_exit_at_the_end(data_dir):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    assert produce(data_dir, "t", input=b"a\nb\n").exit_code == 0
    assert cli(data_dir, "consume", "t", "-e").stdout == "a\nb\n"
    assert cli(data_dir, "consume", "t", "--exit", "--follow").exit_code == 2


def test_follow_with_an_idle_timeout_stops_by_itself(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    follower = subprocess.Popen([*RIVVEN, "consume", "t", "--idle-timeout", "2s"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env(data_dir), cwd=ROOT)
    run_rivven(data_dir, "produce", "t", input=b"x\n", check=True)
    out, err = follower.communicate(timeout=60)  # (it would follow for ever without one)
    assert follower.returncode == 0, err
    assert out == b"x\n"
    r = cli(data_dir, "consume", "t", "--idle-timeout", "5")
    assert r.exit_code == 2 and "--idle-timeout" in r.stderr


# ================================================================ segment inspect
def sealed(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("x", 1, {"index.interval.bytes": "100"})
        for i in range(4):
            eng.produce("x", [Record(key=b"k\x1b[31m", value=b"caf\xc3\xa9 \xff\x07",
                                     headers=[("h", "日本".encode()), ("n", None)],
                                     timestamp=1000 + i)])
    return os.path.join(data_dir, "topics", "x", "partition-0", "0" * 20)


def test_segment_inspect_dumps_index_and_timeindex_files(data_dir):
    base = sealed(data_dir)
    r = cli(data_dir, "segment", "inspect", base + ".index", "--json")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["entry"], x["relative_offset"], x["offset"], x["points_at_batch"])
            for x in rows] == [(0, 1, 1, True), (1, 2, 2, True), (2, 3, 3, True)]
    r = cli(data_dir, "segment", "inspect", base + ".timeindex", "--max", "1")
    assert r.exit_code == 0
    assert "TIMESTAMP" in r.stdout and "1000" in r.stdout and "1970-01-01T00:00:01.000Z" in r.stdout
    with open(base + ".index", "r+b") as f:
        f.seek(0)
        f.write(struct.pack("<ii", 1, 7))
    r = cli(data_dir, "segment", "inspect", base + ".index")
    assert "NO" in r.stdout and "reindex" in r.stderr
    assert cli(data_dir, "segment", "inspect", base + ".index", "--records").exit_code == 2


def test_segment_inspect_shows_a_tombstone_as_null_never_none(data_dir):
    """A null key or value prints as kafka-dump-log and consume --json show it (null, as the
    null header values beside it), not Python's None; an empty value stays empty."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("x", 1)
        eng.produce("x", [Record(key=b"k", value=None), Record(key=None, value=b""),
                          Record(key=b"k2", value=b"v", headers=[("n", None)])])
    log = os.path.join(data_dir, "topics", "x", "partition-0", "0" * 20 + ".log")
    r = cli(data_dir, "segment", "inspect", log, "--records")
    assert r.exit_code == 0, r.output
    lines = [line.split(" timestamp: ")[1].split(" ", 1)[1] for line in r.stdout.splitlines()
             if line.startswith("| ")]
    assert lines == ["key: k value: null", "key: null value: ", "key: k2 value: v headers=n=null"]
    assert "None" not in r.stdout


def test_segment_inspect_never_prints_raw_control_bytes_and_keeps_utf8_in_json(data_dir):
    base = sealed(data_dir)
    r = cli(data_dir, "segment", "inspect", base + ".log", "--records", "--max", "1")
    assert r.exit_code == 0
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "k\\x1b[31m" in r.stdout and "café" in r.stdout and "\\xff" in r.stdout
    r = cli(data_dir, "segment", "inspect", base + ".log", "--records", "--max", "1", "--json")
    lines = r.stdout_bytes.splitlines()
    rec = json.loads(lines[1])
    assert "café".encode() in lines[1] and "日本".encode() in lines[1]  # UTF-8, not \u escapes
    assert rec["value"] == "café \\xff\x07" and rec["headers"] == [["h", "日本"], ["n", None]]
    r = cli(data_dir, "segment", "inspect", base + ".log", "--records", "--max", "1", "--json",
            "--value-encoding", "base64", "--key-encoding", "hex")
    rec = json.loads(r.stdout.splitlines()[1])
    assert rec["key"] == b"k\x1b[31m".hex()
    import base64
    assert base64.b64decode(rec["value"]) == b"caf\xc3\xa9 \xff\x07"
