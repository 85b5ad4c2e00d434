"""One offset grammar everywhere: ``beginning``/``end`` and their synonyms, rpk's ``+N``,
``START:END`` ranges, times, in ``consume``, ``offsets``, ``delete-records``, ``tier restore
--from`` and ``group reset-offsets``, and the engine's positions under them; durations read by
one parser; a time too large for a calendar shown as its number."""

import json

import pytest
from typer.testing import CliRunner

from engine import Engine, Position, Record
from rivven_cli.main import app

runner = CliRunner()
T0 = 1_700_000_000_000  # record i of the topic 'g' has timestamp T0 + i minutes
MIN = 60_000


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


def values(r):
    assert r.exit_code == 0, r.output
    return r.stdout.split()


@pytest.fixture
def g(data_dir):
    """Topic 'g': partition 0 holds 20 records (values 0..19), partition 1 holds 10
    (values 100..109); offset i of each has timestamp T0 + i minutes."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("g", 2, {"retention.ms": "-1"})
        eng.produce("g", [Record(value=b"%d" % i, timestamp=T0 + i * MIN) for i in range(20)], 0)
        eng.produce("g", [Record(value=b"%d" % (100 + i), timestamp=T0 + i * MIN)
                          for i in range(10)], 1)
    return data_dir


def make_group(data_dir):
    """Group 'gg' with a committed offset (a reset of a group yet unknown:
    tests/cli/test_cli_groups.py)."""
    with Engine.open(data_dir) as eng, eng.consumer("gg", "g", enable_auto_commit=False) as c:
        c.commit({("g", 0): 1})


def utc(ms):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the grammar
@pytest.mark.parametrize("word", ["beginning", "earliest", "start", "oldest"])
def test_every_word_for_the_start(g, word):
    assert values(cli(g, "consume", "g", "-p", "0", "-o", word, "-n", "1")) == ["0"]
    assert json.loads(cli(g, "offsets", "g", "--time", word, "--json").stdout)[0]["offset"] == 0


@pytest.mark.parametrize("word", ["end", "latest", "newest"])
def test_every_word_for_the_end(g, word):
    assert values(cli(g, "consume", "g", "-o", word)) == []
    assert json.loads(cli(g, "offsets", "g", "--time", word, "--json").stdout)[0]["offset"] == 20


def test_plus_n_counts_from_the_log_start_as_rpk(g):
    """rpk's +N: N after the current start offset (here after a delete-records)."""
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "+3", "-n", "2")) == ["3", "4"]
    assert cli(g, "delete-records", "g", "--before", "5", "-p", "0", "--yes").exit_code == 0
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "+3", "-n", "2")) == ["8", "9"]
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "-2")) == ["18", "19"]


@pytest.mark.parametrize("spec,p0,p1", [
    ("3:6", ["3", "4", "5"], ["103", "104", "105"]),  # END exclusive
    ("beginning:+2", ["0", "1"], ["100", "101"]),
    ("-2:end", ["18", "19"], ["108", "109"]),
    (":2", ["0", "1"], ["100", "101"]),
    ("18:", ["18", "19"], []),
    (f"@{T0 + 2 * MIN}:{T0 + 4 * MIN}", ["2", "3"], ["102", "103"]),
    (f"@{T0 + 2 * MIN}:@{T0 + 4 * MIN}", ["2", "3"], ["102", "103"]),
    # RFC 3339 times hold colons: the one after a whole time separates
    (f"@{utc(T0 + 8 * MIN)}:@{utc(T0 + 10 * MIN)}", ["8", "9"], ["108", "109"]),
    (f"@{utc(T0 + 8 * MIN)}:{utc(T0 + 10 * MIN)}", ["8", "9"], ["108", "109"]),
    (f"@{utc(T0 + 8 * MIN).replace('Z', '+00:00')}:{utc(T0 + 9 * MIN)}", ["8"], ["108"]),
    (f"@{utc(T0 + 8 * MIN)}:2m", ["8", "9"], ["108", "109"]),  # a duration from START
    (f"@{utc(T0 + 17 * MIN)}:end", ["17", "18", "19"], []),
    (f"@:{T0 + 1 * MIN}", ["0"], ["100"]),  # rpk's @:t
    ("5:@" + str(T0 + 7 * MIN), ["5", "6"], ["105", "106"]),
])
def test_consume_ranges(g, spec, p0, p1):
    r = cli(g, "consume", "g", "-o", spec, "-f", "%p:%v\n")
    got = values(r)
    assert [v[2:] for v in got if v.startswith("0:")] == p0, spec
    assert [v[2:] for v in got if v.startswith("1:")] == p1, spec


def test_a_whole_time_is_never_a_range(g):
    """``@2023-11-14T22:21:00Z`` reads as one time (its colons stay in it)."""
    r = cli(g, "consume", "g", "-p", "0", "-o", f"@{utc(T0 + 18 * MIN)}")
    assert values(r) == ["18", "19"]


@pytest.mark.parametrize("spec,message", [
    ("6:3", "END 3 is not after START 6"),
    ("x:3", "'x' is not a position"),
    (f"@{T0 + 5 * MIN}:{T0 + 2 * MIN}", "is not after START"),
    ("@yesterday:end", "cannot read a time"),
    ("3:-1h", "is not a position"),
])
def test_bad_ranges_are_usage_errors_naming_the_forms(g, spec, message):
    r = cli(g, "consume", "g", "-o", spec)
    assert r.exit_code == 2 and message in r.stderr, r.stderr
    assert "START:END" in r.stderr and "+N" in r.stderr


def test_a_range_and_follow_or_a_group_are_refused(g):
    assert cli(g, "consume", "g", "-o", "0:5", "--follow").exit_code == 2
    assert cli(g, "consume", "g", "-o", "0:5", "-g", "x").exit_code == 2
    # the group's start words take the aliases too
    assert values(cli(g, "consume", "g", "-g", "x", "-o", "earliest", "-n", "1")) != []


def test_past_the_end_is_a_note_on_stderr(g):
    r = cli(g, "consume", "g", "-o", "15")
    assert values(r) == ["15", "16", "17", "18", "19"]
    assert "note: --offset 15 is past the end of g-1 (end offset 10)" in r.stderr
    assert "g-0" not in r.stderr and len(r.stderr.splitlines()) == 1
    r = cli(g, "consume", "g", "-o", "@2999-01-01T00:00:00Z")
    assert r.exit_code == 0 and r.stdout == ""
    assert "g-0 (end offset 20), g-1 (end offset 10)" in r.stderr
    assert "no record is at or after that time" in r.stderr
    r = cli(g, "consume", "g", "-p", "0", "-o", "18:100")
    assert values(r) == ["18", "19"] and "--offset END 100 is past the end of g-0" in r.stderr
    r = cli(g, "offsets", "g", "--time", "@2999-01-01", "--json")
    assert [x["past_end"] for x in json.loads(r.stdout)] == [True, True]
    assert "OFFSET is the end offset" in r.stderr
    r = cli(g, "offsets", "g", "--time", "+12", "--json")
    assert [(x["offset"], x["past_end"]) for x in json.loads(r.stdout)] == [(12, False),
                                                                            (10, True)]
    make_group(g)
    r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "15")
    assert r.exit_code == 0 and "note: --to 15 is past the end of g-1" in r.stderr
    r = cli(g, "tier", "restore", "g", "--from", "@2999-01-01", "--dry-run")
    assert r.exit_code == 0 and "nothing to restore there" in r.stderr
    r = cli(g, "delete-records", "g", "--before", "15", "--yes", "--json")
    assert [x["new_log_start_offset"] for x in json.loads(r.stdout)] == [15, 10]
    assert "note: --before 15 is past the end of g-1" in r.stderr
    r = cli(g, "consume", "g", "-p", "0", "-o", "16")  # in range: no note
    assert values(r) == ["16", "17", "18", "19"] and r.stderr == ""


def test_before_the_log_start_is_a_note_on_stderr(g):
    """kcat reports an offset below the log start out of range: rivven reads from the log
    start, as it did, and a note says so (as past the end), naming each such partition."""
    assert cli(g, "delete-records", "g", "--before", "15", "-p", "0", "--yes").exit_code == 0
    r = cli(g, "consume", "g", "-o", "5", "-p", "0")
    assert values(r) == ["15", "16", "17", "18", "19"]
    assert r.stderr == ("note: --offset 5 is before the log start of g-0 (log start offset "
                        "15): the records before it were deleted; reading from the log start\n")
    r = cli(g, "consume", "g", "-o", "12")  # g-0 starts past it, g-1 ends before it
    assert values(r) == ["15", "16", "17", "18", "19"]
    assert "before the log start of g-0 (log start offset 15)" in r.stderr
    assert "is past the end of g-1" in r.stderr and len(r.stderr.splitlines()) == 2
    for ok in (["-o", "15", "-p", "0"], ["-o", "beginning"], ["-o", "+2"], ["-o", "-1"]):
        r = cli(g, "consume", "g", *ok)  # the log start itself, and positions relative to it
        assert r.exit_code == 0 and r.stderr == "", (ok, r.stderr)


def test_offsets_time_keeps_its_bare_times_and_takes_positions(g):
    def offs(*args):
        r = cli(g, "offsets", "g", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["offset"] for x in json.loads(r.stdout)]

    assert offs("--time", str(T0 + 3 * MIN)) == [3, 3]  # epoch ms, no @ (as before)
    assert offs("--time", f"@{T0 + 3 * MIN}") == [3, 3]
    assert offs("--time", utc(T0 + 4 * MIN)) == [4, 4]
    assert offs("--time", "-1h") == [20, 10]  # relative, no @: all records are older
    assert offs("--time", "-3") == [17, 7]
    assert offs("--time", "+3") == [3, 3]
    assert cli(g, "offsets", "g", "--time", "soon").exit_code == 2


def test_delete_records_before_takes_the_grammar(g):
    def starts(*args):
        r = cli(g, "delete-records", "g", "--yes", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["new_log_start_offset"] for x in json.loads(r.stdout)]

    assert starts("--before", "+2") == [2, 2]  # the first two go
    assert starts("--before", "-15") == [5, 2]  # keep the last 15
    assert starts("--before", f"@{T0 + 6 * MIN}") == [6, 6]
    assert starts("--before", "beginning") == [6, 6]  # nothing
    assert starts("--before", "end", "-p", "1") == [10]  # every record (Kafka's -1)
    r = cli(g, "delete-records", "g", "--before", "soon", "--yes")
    assert r.exit_code == 2 and "use beginning, end, N, -N, +N or @TIME" in r.stderr


def test_tier_restore_from_takes_the_grammar_but_end(g):
    for spec in ("beginning", "earliest", "-5", "+5", "3", f"@{T0}"):
        r = cli(g, "tier", "restore", "g", "--from", spec, "--dry-run", "--json")
        assert r.exit_code == 0, (spec, r.output)
    r = cli(g, "tier", "restore", "g", "--from", "end", "--dry-run")
    assert r.exit_code == 2
    assert "end makes no sense here; use beginning, N, -N, +N or @TIME" in r.stderr


def test_group_reset_offsets_to_a_position(g):
    make_group(g)
    def new(*args):
        r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["new"] for x in json.loads(r.stdout)["partitions"]]

    assert new("--to", "-3") == [17, 7]
    assert new("--to", "+4") == [4, 4]
    assert new("--to", "beginning") == [0, 0]
    assert new("--to", "latest") == [20, 10]
    assert new("--to", "12") == [12, 10]
    assert new("--to", f"@{utc(T0 + 5 * MIN)}") == [5, 5]
    r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "-3", "--json")
    out = json.loads(r.stdout)
    assert out["mode"] == "from-end" and out["position"] == "-3"
    # the older flags keep working
    assert new("--to-offset", "6") == [6, 6] and new("--to-earliest") == [0, 0]
    assert new("--to-datetime", str(T0 + 5 * MIN)) == [5, 5]
    assert cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "-3",
               "--to-earliest").exit_code == 2


def test_engine_positions(g):
    with Engine.open(g, read_only=True) as eng:
        rows = eng.list_offsets("g", Position("from_start", 12))
        assert [(r["offset"], r["past_end"]) for r in rows] == [(12, False), (10, True)]
        assert eng.resolve_offset("g", 0, Position("from_start", 3)) == 3
        got = [(b.partition, list(b.offsets)) for b in eng.stream(
            "g", None, Position("offset", 4), end=Position("from_start", 6), follow=True)]
        assert got == [(0, [4, 5]), (1, [4, 5])]  # (a stop ends even a follow)
        rows = eng.groups.reset_offsets("gg", {"g": None}, Position("from_end", 3))["partitions"]
        assert [r["new"] for r in rows] == [17, 7]
        rows = eng.groups.reset_offsets("gg", {"g": [1]}, "from-start", 30)["partitions"]
        assert (rows[0]["new"], rows[0]["clamped"]) == (10, True)
        plan = eng.maintenance.delete_records_before("g", Position("from_end", 4), dry_run=True)
        assert [r["new_log_start_offset"] for r in plan] == [16, 6]


def test_a_time_past_any_calendar_is_shown_as_its_number():
    """An offset of 19 digits is never rendered as a time (it crashed 'tier restore --from'),
    and a time past year 9999 shows as milliseconds rather than an internal error."""
    from engine import Position
    from rivven_cli.positions import shown
    from rivven_cli.render import utc

    assert shown(Position("offset", 9_000_000_000_000_000_000)) == "9000000000000000000"
    assert utc(9_000_000_000_000_000_000) == "9000000000000000000 ms"
    assert utc(0) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize("text,ms", [("90s", 90_000), ("500ms", 500), ("1.5m", 90_000),
                                     ("1h30m", 5_400_000), ("2d", 172_800_000),
                                     ("PT2H", 7_200_000), ("P1DT30M", 88_200_000),
                                     ("pt0.5s", 500)])
def test_one_duration_grammar(text, ms):
    """--idle-timeout and --by-duration read durations alike (one parser)."""
    from rivven_cli.positions import parse_duration

    assert parse_duration(text, "--x") == ms


@pytest.mark.parametrize("text", ["xyz", "P", "PT", "5", "-5s", "1x"])
def test_a_bad_duration_is_a_usage_error(text):
    import typer

    from rivven_cli.positions import parse_duration

    with pytest.raises(typer.BadParameter, match="cannot read duration"):
        parse_duration(text, "--x")
