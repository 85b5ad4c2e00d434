"""Tables as a user sees them: rendered by the real ``rivven`` on a pseudo-terminal of 80 and
120 columns, with long names (a 60-character topic, ``clicks`` beside ``clicks2``) and 19-digit
offsets (a partition whose log starts at 9e18). Names, offsets and counts are never cut (no
"…"; a name may fold onto a second line, never lose a character), every line fits the
terminal, the columns stay aligned, and piped output stays one row per line."""

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from helpers import ROOT, run_rivven
from helpers.cli import run_in_process

from engine import Engine, Record
from rivven_cli import render
from rivven_cli.tier import _range

LONG = "orders-eu-west-1-checkout-service-payment-events-v2-dl-retry"  # 60 characters
GROUP = "analytics-pipeline-consumer-group-for-eu-west-1"
BIG = 9_000_000_000_000_000_000  # partition 0 of LONG starts here: 19-digit offsets
DAY = 86_400_000
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
assert len(LONG) == 60


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tables") / "data")
    with Engine.open(d) as eng:
        eng.create_topic("clicks")
        eng.create_topic("clicks2", 3, {"segment.bytes": "1024"})
        eng.create_topic(LONG, 2, {"segment.bytes": "1024", "remote.storage.enable": "true",
                                   "local.retention.bytes": "3000"})
    p0 = os.path.join(d, "topics", LONG, "partition-0")
    for name in os.listdir(p0):  # an empty log may start anywhere: here at 9e18
        if name.startswith("0" * 20):
            os.rename(os.path.join(p0, name), os.path.join(p0, f"{BIG:020d}" + name[20:]))
    with Engine.open(d) as eng:
        old = eng_now() - 2 * DAY
        eng.produce("clicks", [Record(value=b"click %d" % i) for i in range(300)])
        for i in range(0, 180, 10):
            eng.produce("clicks2", [Record(value=b"c%05d" % j, timestamp=old + j)
                                    for j in range(i, i + 10)], partition=0)
        for p in (0, 1):
            for i in range(0, 200, 10):
                eng.produce(LONG, [Record(key=b"k%d" % j, value=b"order %05d" % j,
                                          timestamp=old + j if i < 100 else None)
                                   for j in range(i, i + 10)], partition=p)
        assert eng.maintenance.tier(LONG)["partitions"]
        with eng.consumer(GROUP, ["clicks", LONG]) as c:
            got = 0
            while got < 30:
                got += len(c.poll(max_records=10))
            c.commit()
    with Engine.open(d) as eng:  # (set now: an engine applies retention to what it opens)
        for t in ("clicks2", LONG):
            eng.alter_topic_config(t, {"retention.ms": str(DAY)})
    return d


def eng_now():
    from engine import clock

    return clock.now_ms()


def env(data_dir):
    e = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT),
             TERM="xterm-256color")
    for k in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        e.pop(k, None)
    return e


def on_terminal(data_dir, args, columns):
    """stdout of ``rivven ARGS`` on a pseudo-terminal ``columns`` wide, escapes removed; and
    its stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "rivven_cli.main", *args], stdin=slave,
                            stdout=slave, stderr=subprocess.PIPE, env=env(data_dir), cwd=ROOT)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read().decode()
    assert proc.wait() == 0, err
    return ANSI.sub("", out.decode().replace("\r\n", "\n")), err


def piped(data_dir, args):
    r = subprocess.run([sys.executable, "-m", "rivven_cli.main", *args], capture_output=True,
                       env=dict(env(data_dir), COLUMNS="80"), cwd=ROOT)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def parse(text, first_header, anchor):
    """The table that starts at the line beginning with ``first_header``: its headers and its
    rows as ``{header: text}``. Columns are told apart by the gutters (positions blank on every
    line); a row's continuation lines (``anchor`` blank) are joined to it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    block = [line for line in lines[start:] if line.strip()]
    width = max(len(line) for line in block)
    block = [line.ljust(width) for line in block]
    blank = [all(line[x] == " " for line in block) for x in range(width)]
    spans, x = [], 0
    while x < width:
        if blank[x]:
            x += 1
            continue
        end = x
        while end < width and not (blank[end] and (end + 1 >= width or blank[end + 1])):
            end += 1
        spans.append((x, end))
        x = end
    headers = [block[0][a:b].strip() for a, b in spans]
    assert headers == block[0].split(), f"columns out of line:\n{text}"
    rows: list[dict[str, str]] = []
    for line in block[1:]:
        cells = {h: line[a:b].strip() for h, (a, b) in zip(headers, spans)}
        if cells[anchor] or not rows:
            rows.append(cells)
        else:
            for h, v in cells.items():
                rows[-1][h] += v
    return headers, rows


def as_json(data_dir, args):
    r = subprocess.run([sys.executable, "-m", "rivven_cli.main", *args, "--json"],
                       capture_output=True, env=env(data_dir), cwd=ROOT)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def dash(v):
    return "-" if v is None else str(v)


def segment_file(data_dir):
    p0 = os.path.join(data_dir, "topics", LONG, "partition-0")
    return os.path.join(p0, min(f for f in os.listdir(p0) if f.endswith(".log")))


# command, the first header, the column that is never blank on a row's first line, the JSON
# rows, and what every row must show whole (header: value from the JSON row)
TABLES = {
    "topic list": (["topic", "list"], "TOPIC", "PARTITIONS", lambda j: j, lambda r: {
        "TOPIC": r["topic"], "PARTITIONS": r["partitions"], "RECORDS": r["records"]}),
    "segment list": (["segment", "list", LONG], "PARTITION", "PARTITION", lambda j: j,
                     lambda r: {"PARTITION": r["partition"], "TIER": r["tier"],
                                "FILE": os.path.basename(r["file"]), "BASE": r["base_offset"],
                                "LAST": dash(r["last_offset"]), "RECORDS": dash(r["records"])}),
    "tier status": (["tier", "status"], "TOPIC", "PARTITION", lambda j: j, lambda r: {
        "TOPIC": r["topic"], "PARTITION": r["partition"],
        "COLD": _range(r["cold_start_offset"], r["cold_end_offset"]),
        "LOCAL": _range(r["local_start_offset"], r["local_end_offset"]),
        "COLD-SEGS": r["cold_segments"], "LOCAL-SEGS": r["local_segments"]}),
    "group describe": (["group", "describe", GROUP], "TOPIC", "LAG",
                       lambda j: j["partitions"] + [{"total": j["total_lag"]}],
                       lambda r: {"TOPIC": "TOTAL", "LAG": r["total"]} if "total" in r else {
                           "TOPIC": r["topic"], "PARTITION": r["partition"],
                           "CURRENT-OFFSET": dash(r["current_offset"]),
                           "LOG-START-OFFSET": r["log_start_offset"],
                           "LOG-END-OFFSET": r["log_end_offset"], "LAG": dash(r["lag"])}),
    "group list": (["group", "list"], "GROUP", "MEMBERS", lambda j: j, lambda r: {
        "GROUP": r["group"], "MEMBERS": r["members"], "TOTAL-LAG": r["total_lag"]}),
    "offsets": (["offsets", LONG], "PARTITION", "PARTITION", lambda j: j, lambda r: {
        "PARTITION": r["partition"], "START-OFFSET": r["start_offset"],
        "END-OFFSET": r["end_offset"]}),
    "retention apply --dry-run": (
        ["retention", "apply", "--dry-run"], "TOPIC", "PARTITION", lambda j: j["segments"],
        lambda r: {"TOPIC": r["topic"], "PARTITION": r["partition"], "SEGMENT": r["base_offset"],
                   "OFFSETS": f"{r['base_offset']}..{r['next_offset'] - 1}",
                   "BYTES": r["bytes"], "REASON": r["reason"]}),
    "topic describe": (["topic", "describe", LONG], "PARTITION", "PARTITION",
                       lambda j: j["partition_info"], lambda r: {
                           "PARTITION": r["partition"], "START-OFFSET": r["start_offset"],
                           "END-OFFSET": r["end_offset"], "SEGMENTS": r["segments"]}),
    "group reset-offsets": (["group", "reset-offsets", GROUP, "--all-topics", "--to-earliest"],
                            "TOPIC", "PARTITION", lambda j: j["partitions"], lambda r: {
                                "TOPIC": r["topic"], "PARTITION": r["partition"],
                                "PRIOR": dash(r["prior"]), "NEW": r["new"]}),
    "tier restore --dry-run": (["tier", "restore", LONG, "--from", str(BIG), "--dry-run"],
                               "TOPIC", "PARTITION", lambda j: j["partitions"], lambda r: {
                                   "TOPIC": r["topic"], "PARTITION": r["partition"],
                                   "SEGMENTS": len(r["segments"])}),
    "segment inspect": (["segment", "inspect", "{file}"], "POSITION", "POSITION",
                        lambda j: j, lambda r: {"POSITION": r["position"],
                                                "BASE": r["base_offset"],
                                                "LAST": r["last_offset"], "COUNT": r["count"]}),
}


def expected(data_dir, name):
    args, first, anchor, rows_of, want = TABLES[name]
    args = [a.replace("{file}", segment_file(data_dir)) for a in args]
    if name == "segment inspect":  # --json prints JSON lines
        r = subprocess.run([sys.executable, "-m", "rivven_cli.main", *args, "--json"],
                           capture_output=True, env=env(data_dir), cwd=ROOT, check=True)
        doc = [json.loads(line) for line in r.stdout.splitlines()]
    else:
        doc = as_json(data_dir, args)
    return args, first, anchor, [{k: str(v) for k, v in want(r).items()} for r in rows_of(doc)]


@pytest.mark.parametrize("name", list(TABLES))
def test_tables_on_a_terminal_cut_nothing(data, name):
    args, first, anchor, rows = expected(data, name)
    assert rows, f"{name}: the fixture shows no rows"
    assert any(len(v) >= 19 and v.isdigit() or v == LONG for r in rows for v in r.values()) \
        or name in ("group list",), f"{name}: no long value to show"
    for columns in (80, 120):
        text, err = on_terminal(data, args, columns)
        assert "…" not in text, f"{name} at {columns} columns cut a value:\n{text}"
        for line in text.splitlines():  # (but a heading line, "topic: NAME  id: ...")
            assert len(line) <= columns or re.match(r"(topic|group): ", line), \
                f"{name}: a line wider than {columns}:\n{text}"
        headers, shown = parse(text, first, anchor)
        assert len(shown) == len(rows), f"{name} at {columns}:\n{text}"
        for want, got in zip(rows, shown):
            for h, v in want.items():
                if h in headers:
                    assert got[h] == v, f"{name} at {columns}: {h} shows {got[h]!r}, not " \
                                        f"{v!r}:\n{text}"
        dropped = [h for h in TABLES_ALL_HEADERS.get(name, ()) if h not in headers]
        if dropped:  # a column left out is said (on stderr), never silently gone
            assert "not shown" in err and all(h in err for h in dropped), err
        essential = {h for r in rows for h in r} - DROPPABLE.get(name, set())
        assert essential <= set(headers), f"{name} at {columns} dropped {essential - set(headers)}"


# the columns each table may drop on a narrow terminal (the rest must always be there)
DROPPABLE = {
    "segment list": {"FILE", "FIRST-TIME", "LAST-TIME", "SIZE"},
    "tier status": {"COLD-SEGS", "LOCAL-SEGS"},
    "group describe": {"LOG-START-OFFSET"},
    "retention apply --dry-run": {"SEGMENT"},
    "topic describe": {"SEGMENTS"},
}
TABLES_ALL_HEADERS = {
    "topic list": ("TOPIC", "PARTITIONS", "RECORDS", "CONFIG"),
    "segment list": ("PARTITION", "TIER", "FILE", "BASE", "LAST", "RECORDS", "SIZE",
                     "FIRST-TIME", "LAST-TIME"),
    "tier status": ("TOPIC", "PARTITION", "REMOTE", "COLD", "COLD-SEGS", "COLD-BYTES", "LOCAL",
                    "LOCAL-SEGS", "LOCAL-BYTES", "HOT-BYTES", "HOT-HIT", "LAST-UPLOAD"),
    "group describe": ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET",
                       "LOG-END-OFFSET", "LAG", "LAST-COMMIT", "CONSUMER-ID"),
    "retention apply --dry-run": ("TOPIC", "PARTITION", "SEGMENT", "OFFSETS", "BYTES",
                                  "REASON", "DETAIL"),
}


def test_at_120_columns_the_names_stay_on_one_line(data):
    text, _ = on_terminal(data, ["topic", "list"], 120)
    rows = [line.split() for line in text.splitlines()[1:] if not line.startswith(" ")]
    assert [r[:3] for r in rows] == [["clicks", "1", "300"], ["clicks2", "3", "180"],
                                     [LONG, "2", "400"]], text
    text, _ = on_terminal(data, ["offsets", LONG], 80)
    assert text.splitlines()[1].split() == ["0", str(BIG), str(BIG + 200)], text


@pytest.mark.parametrize("name", ["topic list", "segment list", "tier status", "group describe",
                                  "retention apply --dry-run", "segment inspect"])
def test_piped_tables_are_one_row_per_line_and_whole(data, name):
    """Not a terminal (COLUMNS=80 in the environment changes nothing): every row on one line,
    every column there, nothing folded or cut."""
    args, first, anchor, rows = expected(data, name)
    text = piped(data, args)
    headers, shown = parse(text, first, anchor)
    if name in TABLES_ALL_HEADERS:
        assert headers == [h for h in TABLES_ALL_HEADERS[name]
                           if h != "TIER" or "TIER" in rows[0]]
    lines = text.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith(first)) + 1:]
    assert len(body) == len(rows) and "…" not in text
    for want, got in zip(rows, shown):
        assert {h: got[h] for h in want if h in headers} == {h: v for h, v in want.items()
                                                            if h in headers}


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_too_narrow_even_for_the_names_folds_and_never_cuts(monkeypatch):
    """Narrower than the kept columns at their narrowest: lines get longer than the terminal
    (it wraps them) rather than anything being cut."""
    out = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "24")
    monkeypatch.setenv("TERM", "dumb")
    render.print_table(["TOPIC", "END-OFFSET"], [(LONG, BIG), ("clicks", 7)],
                       right=("END-OFFSET",))
    text = out.getvalue()
    assert "…" not in text and str(BIG) in text
    headers, rows = parse(text, "TOPIC", "END-OFFSET")
    assert [r["TOPIC"] for r in rows] == [LONG, "clicks"]
    assert [r["END-OFFSET"] for r in rows] == [str(BIG), "7"]


@pytest.mark.parametrize("text,width,lines", [
    ("segment.bytes=1024,retention.ms=86400000", 20,
     ["segment.bytes=1024,", "retention.ms=", "86400000"]),
    ("retention.ms=86400000,segment.bytes=1024", 36, ["retention.ms=86400000,",
                                                     "segment.bytes=1024"]),
    ("a b-c.d", 4, ["a", "b-", "c.d"]),
    (LONG, 40, ["orders-eu-west-1-checkout-service-", "payment-events-v2-dl-retry"]),
    ("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),
    ("short", 10, ["short"]),
])
def test_fold_breaks_after_separators(text, width, lines):
    assert render._fold(text, width).split("\n") == lines


# ------------------------------------------------------------------ the Quick start (item 2)
def test_the_quick_start_ends_with_a_command_that_works_as_written(tmp_path):
    """The Quick start's last block, run as written by bash in a repo root after the setup:
    ``.venv`` holds the installed ``rivven`` (the venv the suite runs in, which ``make``
    built) and ``./rivven-data`` what ``make demo`` left; ``rivven`` is on no PATH before."""
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```sh\n(.*?)```", quick, re.S)[-1]
    commands = [line.split("  #")[0].strip() for line in block.splitlines()]
    assert quick.rstrip().endswith("```") and commands[-1].startswith("rivven "), \
        "the Quick start should end with a rivven command"
    venv = ROOT / ".venv" if (ROOT / ".venv" / "bin" / "rivven").exists() else \
        Path(sys.prefix)
    if not (venv / "bin" / "rivven").exists() or not (venv / "bin" / "activate").exists():
        pytest.skip("the suite does not run in a venv made by the setup")
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".venv").symlink_to(venv)
    with Engine.open(str(root / "rivven-data")) as eng:
        eng.create_topic("orders")
    e = {k: v for k, v in env("").items() if k not in ("RIVVEN_DATA_DIR", "VIRTUAL_ENV")}
    e["PATH"] = os.pathsep.join(d for d in e["PATH"].split(os.pathsep)
                                if not os.path.exists(os.path.join(d, "rivven")))
    r = subprocess.run(["bash", "-e", "-c", block], cwd=root, env=e, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert "orders" in r.stdout.decode().split()


# ------------------------------------------------------------------ wording (item 19)
def cli(data_dir, *args, input=None):
    from typer.testing import CliRunner

    from rivven_cli.main import app

    return CliRunner().invoke(app, ["--data-dir", data_dir, *args], input=input)


def one_line(err):
    assert len(err.strip().splitlines()) == 1 and "╭" not in err and "Traceback" not in err, err
    return err.strip()


def test_plural_agrees():
    from engine.errors import plural

    assert [plural(n, "record") for n in (0, 1, 2)] == ["0 records", "1 record", "2 records"]
    assert plural(1, "batch", "batches") == "1 batch" and plural(3, "batch", "batches") == \
        "3 batches"
    assert plural(100_000, "record", thousands=True) == "100,000 records"


def test_counts_of_one_are_singular(data_dir):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    r = run_in_process(data_dir, "produce", "t", input=b"one\n")
    assert r.returncode == 0 and b"produced 1 record (" in r.stderr, r.stderr
    r = cli(data_dir, "segment", "verify")
    assert r.exit_code == 0 and "1 batch, 1 record," in r.stderr, r.stderr
    r = cli(data_dir, "topic", "add-partitions", "t", "--total", "1")
    assert r.exit_code == 1 and "has 1 partition;" in one_line(r.stderr)
    r = run_in_process(data_dir, "produce", "t", "--input", "json", "--batch-records", "1",
                       input=b'{"value":"a"}\nnot json\n')
    assert r.returncode == 1 and "the 1 record before it is stored" in one_line(r.stderr.decode())


# every "{count} noun" in a message goes through engine.errors.plural; these few are always
# more than one (limits, over-long names) or a "key: value" pair
PLURAL_OK = ("{total} bytes is larger", "than {limit} bytes", "{size} bytes as",
             "{MAX_NAME_BYTES} bytes", "records/s", "{r['count']} bytes:",
             "partition: {r['partition']} offsets:")


def test_no_count_in_a_message_with_a_plural_noun():
    pattern = re.compile(r"\{[^{}]+\} ?(records|batches|segments|partitions|bytes|objects|"
                         r"files|offsets|entries|topics|groups|members|streams|lines|keys|"
                         r"tombstones|problems)\b")
    slips = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for top in ("engine", "rivven_cli") for p in sorted((ROOT / top).rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line) and not line.strip().startswith("#")
             and not any(ok in line for ok in PLURAL_OK)]
    assert not slips, "use engine.errors.plural(n, noun) for:\n" + "\n".join(slips)


@pytest.mark.parametrize("args,shown", [
    (["offsets", "t", "--time", "[bold]x"], "'[bold]x'"),
    (["segment", "reindex", "[red]x.log"], "[red]x.log is not a .log segment file"),
    (["consume", "t", "-o", "[a] b"], "'[a] b'"),
])
def test_an_error_shows_its_text_as_it_is(data_dir, args, shown):
    """Brackets in a message are text, not Rich markup (which ate "[key, value]" and left
    "a list of  pairs")."""
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    r = cli(data_dir, *args)
    assert r.exit_code in (1, 2) and shown in one_line(r.stderr)


def test_bad_headers_name_the_pairs(data_dir):
    assert cli(data_dir, "topic", "create", "t").exit_code == 0
    r = run_in_process(data_dir, "produce", "t", "--input", "json",
                       input=b'{"value":"x","headers":[1]}\n')
    err = one_line(r.stderr.decode())
    assert r.returncode == 1 and "a list of [key, value] pairs" in err and "  " not in err


def test_a_record_too_large_names_its_topic(data_dir):
    assert cli(data_dir, "topic", "create", "clicks", "-c", "max.message.bytes=1024").exit_code == 0
    r = run_in_process(data_dir, "produce", "clicks", input=b"x" * 2000 + b"\n")
    err = one_line(r.stderr.decode())
    assert r.returncode == 1 and "'rivven topic alter-config clicks --set max.message.bytes=" \
        in err and "TOPIC" not in err


def test_a_missing_topic_is_said_and_listing_named(data_dir):
    assert cli(data_dir, "topic", "create", "clicks").exit_code == 0
    for args in (["topic", "delete", "nope", "--yes"], ["topic", "describe", "nope"],
                 ["consume", "nope"], ["topic", "alter-config", "nope", "--set", "retention.ms=1"]):
        r = cli(data_dir, *args)
        err = one_line(r.stderr)
        assert r.exit_code == 1 and "topic 'nope' does not exist" in err, err
        assert "'rivven topic list'" in err and "topic create" not in err, err
    r = cli(data_dir, "topic", "delete", "clicsk", "--yes")
    assert "did you mean 'clicks'?" in one_line(r.stderr)
    r = run_in_process(data_dir, "produce", "nope", input=b"x\n")  # a writer: how to create it
    assert "create it with 'rivven topic create nope'" in one_line(r.stderr.decode())


def leaf_commands():
    import typer.main

    from rivven_cli.main import app

    group = typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():
        out += [(name, sub) for sub in cmd.commands] if hasattr(cmd, "commands") else [(name,)]
    return out


@pytest.mark.parametrize("words", leaf_commands(), ids=" ".join)
def test_a_usage_error_is_one_line_naming_the_help(data_dir, words):
    r = cli(data_dir, *words, "--no-such-flag")
    err = one_line(r.stderr)
    assert r.exit_code == 2
    assert err.startswith("error: No such option: --no-such-flag") and \
        f"{' '.join(words)} --help'" in err, err


USAGE_ERRORS = [
    (["topic", "create"], "Missing argument 'NAME'"),  # (as --help's usage line names it)
    (["consume", "t", "--key-encoding", "rot13"],
     "Invalid value for '--key-encoding': 'rot13' is not one of 'utf8', 'base64', 'hex'"),
    (["topic", "alter-config", "t"], "give at least one --set key=value or --delete key"),
    (["--no-such-flag", "topic", "list"], "No such option: --no-such-flag"),
    (["nosuch"], "No such command 'nosuch'"),
    (["group", "reset-offsets", "g", "--all-topics", "--by-duration", "xyz"],
     "cannot read duration 'xyz': use 90s"),
]


@pytest.mark.parametrize("args,message", USAGE_ERRORS)
def test_usage_errors_are_one_line_exit_2(data_dir, args, message):
    r = run_in_process(data_dir, *args)
    err = one_line(r.stderr.decode())
    assert r.returncode == 2 and err.startswith("error: ") and message in err, err
    assert "--help'" in err


@pytest.mark.parametrize("args,message", [USAGE_ERRORS[1], USAGE_ERRORS[3]],
                         ids=["of-a-command", "of-the-root"])
def test_usage_errors_in_a_real_process(data_dir, args, message):
    """Exit 2 and the one line as a shell sees them (a command's option, the root's)."""
    r = run_rivven(data_dir, *args)
    err = one_line(r.stderr.decode())
    assert r.returncode == 2 and err.startswith("error: ") and message in err, err
    assert "--help'" in err


def test_a_group_without_its_command_still_shows_the_help(data_dir):
    r = cli(data_dir, "topic")
    assert r.exit_code == 2 and "alter-config" in r.output


def test_piped_plain_tables_print_exactly_what_rich_prints(monkeypatch):
    """Piped, an ASCII table skips Rich (its cost showed in a 10,000-partition topic list):
    the lines must be Rich's own, byte for byte, over many shapes of table; a cell Rich would
    treat differently (edge spaces, non-ASCII) goes to Rich."""
    import random

    rng = random.Random(7)
    alpha = "abcXYZ019 -_.,=:/[]*é"

    def out(plain: bool, cols, rows, right) -> str:
        buf = io.StringIO()
        monkeypatch.setattr(sys, "stdout", buf)
        if not plain:
            monkeypatch.setattr(render, "_plain", lambda *a: False)
        render.print_table(cols, rows, right=right)
        monkeypatch.undo()
        return buf.getvalue()

    took_plain = 0
    for _ in range(600):
        nc = rng.randint(1, 6)
        cols = ["".join(rng.choice("ABCDEF-") for _ in range(rng.randint(1, 10)))
                for _ in range(nc)]
        rows = [[rng.choice([None, rng.randint(-5, 10 ** rng.randint(0, 12)), 1.5, "",
                             "".join(rng.choice(alpha) for _ in range(rng.randint(0, 30)))])
                 for _ in range(nc)] for _ in range(rng.randint(0, 8))]
        right = [c for c in cols if rng.random() < 0.5]
        want = out(False, cols, rows, right)
        assert out(True, cols, rows, right) == want, (cols, rows, right)
        cells = [["-" if v is None else str(v) for v in r] for r in rows]
        took_plain += all(c.isascii() and c == c.strip(" ") for r in cells for c in r)
    assert took_plain > 100  # (the plain path was exercised, not only the fallback)


def test_piped_tables_have_no_trailing_blanks(data_dir, monkeypatch):
    """A piped table's lines end at their last character (a `diff` or `grep 'x$'` in a
    script would trip on Rich's padding): by the plain path and by Rich's (non-ASCII text)."""
    run_rivven(data_dir, "topic", "create", "a-long-topic-name", "-p", "2", "-c",
               "retention.ms=1000", check=True)
    run_rivven(data_dir, "topic", "create", "b", check=True)
    for args in (["topic", "list"], ["topic", "describe", "b"], ["offsets", "b"]):
        out = run_rivven(data_dir, *args, check=True).stdout.decode()
        assert out.count("\n") >= 2 and all(line == line.rstrip() for line in out.splitlines()), \
            (args, out)
    for cells in ([["x", 1], ["a-much-longer-value", 22]], [["é", 1], ["a-much-longer-value", 2]]):
        buf = io.StringIO()
        monkeypatch.setattr(sys, "stdout", buf)
        render.print_table(["NAME", "N"], cells, right=())
        monkeypatch.undo()
        lines = buf.getvalue().splitlines()
        assert lines[1] in ("x                    1", "é                    1"), lines
        assert all(line == line.rstrip() for line in lines), lines
