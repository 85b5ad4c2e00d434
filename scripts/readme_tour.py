"""The README's command tour: the commands, a real run of them, and how a run is compared
with what the README shows.

    python scripts/readme_tour.py      # regenerate the tour block of README.md from a real run

tests/spark/test_readme_tour.py runs the tour again and checks that every command's output matches the
README once what changes from run to run (times, ids, durations, rates, a benchmark's numbers)
is normalized. Inputs come from files, not pipes, so batches, segments and offsets are the
same on every run. Paths are shown as on a reader's machine: the tour runs in ~/demo and rivven
is checked out in ~/rivven."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = "/home/you/demo"  # what the README shows for the directory the tour runs in
CHECKOUT = "/home/you/rivven"  # ... and for this checkout
LOG0 = "rivven-data/topics/orders/partition-0/00000000000000000000.log"
COMMANDS = [
    "rivven topic create orders -p 3 -c retention.ms=604800000",
    "rivven topic list",
    "printf 'alice:{\"item\":\"book\",\"qty\":1}\\nbob:{\"item\":\"pen\",\"qty\":3}\\n' | "
    "rivven produce orders -K : -H source=web --print-offsets",
    "echo '{\"key\":\"carol\",\"value\":\"hello\",\"headers\":{\"trace\":\"abc\"}}' | "
    "rivven produce orders --input json",
    "rivven consume orders -f '%p %o %k %v %h\\n'",
    "rivven consume orders --json -p 0 -n 1",
    "rivven consume orders -o -1 -p 2 -f '%k\\n'",
    "rivven offsets orders",
    "rivven offsets orders --time -1h --json",
    "rivven topic describe orders",
    "rivven topic alter-config orders --set compression.type=zstd --delete retention.ms",
    "rivven topic add-partitions orders --total 4",
    "seq 1 100000 > numbers.txt",
    "rivven produce orders -z lz4 -q --file numbers.txt",
    "rivven consume orders -p 0 -n 2 -f '%v\\n' --value-encoding hex",
    "rivven segment list orders",
    f"rivven segment inspect {LOG0}",
    f"rivven segment inspect {LOG0} --records --max 2",
    "rivven segment verify",
    f"printf 'garbage' >> {LOG0}",
    "rivven segment verify orders",
    "rivven segment recover --dry-run",
    "rivven segment recover",
    f"rivven segment reindex {LOG0}",
    "python -c 'import os; from engine import Engine, Record; e = Engine.open(\"rivven-data\"); "
    "e.produce(\"orders\", [Record(value=b\"unclean\")]); os._exit(0)'  # dies without close()",
    "rivven wal list",
    "rivven wal inspect",
    "rivven wal verify",
    "rivven wal recover --dry-run",
    "rivven wal replay --dry-run",
    "rivven wal checkpoint",
    "rivven consume orders --group billing -n 3 -f '%p %o %v\\n'",
    "rivven consume orders --group billing -n 2 -f '%p %o %v\\n'  # resumes",
    "rivven group list",
    "rivven group describe billing",
    "rivven group describe billing --state",
    "rivven group reset-offsets billing --topic orders --to-earliest",
    "rivven group reset-offsets billing --topic orders:0,1 --to-datetime -1h --execute",
    "rivven group reset-offsets billing --all-topics --shift-by -5 --json | head -12",
    "rivven group reset-offsets billing --all-topics --to-current --export > billing.csv"
    "  # Kafka's reset plan file",
    "rivven group seek billing --to-file billing.csv  # rpk's spelling: applied at once",
    "rivven delete-records orders --before 2 -p 1 --yes",
    "rivven consume orders -p 1 -o 0 -n 1 -f '%o\\n'  # clamped to the new log start",
    "rivven topic create clicks -c segment.bytes=2048",
    "for i in $(seq 1 300); do echo \"{\\\"value\\\":\\\"click $i\\\",\\\"timestamp\\\":"
    "$(( $(date +%s) * 1000 - (300 - i) * 1000 - (i < 100 ? 172800000 : 0) ))}\"; done > clicks.json",
    "rivven produce clicks --input json -q --file clicks.json  # the first 99 clicks are two days old",
    "rivven topic alter-config clicks --set retention.ms=86400000 --set retention.bytes=4096",
    "rivven retention apply --dry-run",
    "rivven retention apply clicks",
    "rivven offsets clicks",
    "rivven group delete-offsets billing --topic orders",
    "rivven group delete billing --yes",
    "rivven topic create users -p 2 -c cleanup.policy=compact -c segment.bytes=8192",
    "for i in $(seq 1 4000); do echo \"user$((i % 100)):{\\\"visits\\\":$i}\"; done > users.txt",
    "rivven produce users -K : -q --file users.txt",
    "echo 'user7:' | rivven produce users -K : --tombstone-empty -q  # a tombstone deletes user7",
    "rivven compaction explain users",
    "rivven spark compact users --dry-run",
    "rivven spark compact users --master 'local[2]'",
    "rivven compaction explain users",
    "rivven consume users -p 0 -n 3 -f '%o %k=%v\\n'",
    "rivven topic create logs -p 2 -c remote.storage.enable=true -c local.retention.bytes=16384 "
    "-c segment.bytes=8192",
    "seq 1 3000 | sed 's/.*/host&:GET \\/item\\/& 200/' > logs.txt",
    "rivven produce logs -K : -q --batch-records 200 --file logs.txt",
    "rivven spark tier --dry-run",
    "rivven spark tier logs --master 'local[2]'",
    "rivven tier status logs",
    "rivven segment list logs -p 0",
    "rivven consume logs -p 0 -n 2 -f '%o %k %v\\n'  # offsets 0.. are in the cold store now",
    "rivven segment verify logs --cold",
    "rivven tier restore logs -p 0 --from 600 --dry-run",
    "rivven tier restore logs -p 0 --from 600",
    "rivven tier status logs",
    "rivven metrics | grep -E '^rivven_(records_appended|tier_uploads)_total|^rivven_log_(end_offset|"
    "cold_segments)' | grep 'topic=\"logs\"'",
    "rivven metrics --textfile rivven.prom  # for node_exporter's textfile collector",
    "grep -c '^# TYPE rivven_' rivven.prom  # every metric, with its HELP and TYPE",
    "head -c 32 /dev/urandom | base64 | sed 's/.*/{\"k1\": \"&\"}/' > keyring.json; "
    "chmod 600 keyring.json  # master keys: outside the data dir",
    "rivven topic create payments -c encryption.enable=true -c encryption.key.id=k1 "
    "--keyring keyring.json",
    "printf 'alice:card 4111-1111\\nbob:card 5500-0000\\n' | rivven produce payments -K : "
    "--keyring keyring.json",
    "grep -rl 'card 4111' rivven-data || echo 'no plaintext in rivven-data (WAL included)'",
    "rivven consume payments -f '%k %v\\n' --keyring keyring.json",
    "rivven consume payments -n 1",
    "rivven key status payments",
    "rivven key rotate payments --keyring keyring.json",
    "echo 'carol:card 3700-0000' | rivven produce payments -K : --keyring keyring.json",
    "python -c 'import base64, json, os; k = json.load(open(\"keyring.json\")); "
    "k[\"k2\"] = base64.b64encode(os.urandom(32)).decode(); "
    "json.dump(k, open(\"keyring.json\", \"w\"))'  # a second master key",
    "rivven key rewrap --to k2 --keyring keyring.json",
    "rivven key status payments",
    "rivven spark reencrypt payments --dry-run --keyring keyring.json",
    "rivven key reencrypt payments --keyring keyring.json",
    "rivven key status payments",
    "rivven segment verify payments --decrypt --keyring keyring.json",
    "python -c 'import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table("
    "{\"key\": [f\"user{i % 50}\" for i in range(100000)], "
    "\"value\": [f\"event {i}\" for i in range(100000)]}), \"events.parquet\")'",
    "rivven topic create events -p 4",
    "rivven produce events --input parquet events.parquet",
    "rivven topic list events",
    "rivven consume events -p 0 -n 2 -f '%k %v\\n'",
    "echo 'correct-horse-battery' | rivven user add alice --password-stdin  # SCRAM: for rivven serve",
    "rivven user list",
    "rivven user describe alice",
    "echo 'another-horse-battery' | rivven user passwd alice --password-stdin",
    "rivven acl add --allow-principal User:alice --consumer --topic events --group billing",
    "rivven acl add --allow-principal User:bob --producer --topic events --idempotent",
    "rivven acl list --topic events",
    "rivven acl remove --allow-principal User:bob --producer --topic events --idempotent --force",
    "rivven user delete alice --yes",
    "rivven consume nope",
    "rivven topic delete orders --yes",
    "rivven bench produce --records 200000",
    "rivven bench consume --records 200000",
]


def run(workdir: str, commands: list[str] = COMMANDS) -> list[tuple[str, str, int]]:
    """Each command run by bash in ``workdir`` (stderr into stdout, as a terminal shows
    them): ``(command, output, exit code)``, the output with the machine's paths as a
    reader's."""
    env = dict(os.environ, RIVVEN_DATA_DIR="rivven-data", COLUMNS="100", PYTHONPATH=str(ROOT))
    prelude = (f'rivven() {{ "{sys.executable}" -m rivven_cli "$@"; }}\n'
               f'python() {{ "{sys.executable}" "$@"; }}\n')
    out = []
    for c in commands:
        r = subprocess.run(["bash", "-c", prelude + c + " 2>&1"], env=env, cwd=workdir,
                           capture_output=True, text=True, timeout=600)
        text = "\n".join(line.rstrip() for line in r.stdout.splitlines())
        out.append((c, as_shown(text, workdir), r.returncode))
    return out


def as_shown(text: str, workdir: str) -> str:
    """``text`` with this machine's paths replaced by a reader's: the run's directory, the
    venv (the checkout's own ``.venv`` after ``make``; a git worktree may use another), the
    checkout."""
    for real, shown in ((os.path.realpath(workdir), DEMO_DIR), (workdir, DEMO_DIR),
                        (sys.prefix, CHECKOUT + "/.venv"), (str(ROOT), CHECKOUT)):
        text = text.replace(real, shown)
    return text


def block(results: list[tuple[str, str, int]]) -> str:
    return "```console\n" + "\n".join(f"$ {c}\n{text}".rstrip() for c, text, _ in results) \
        + "\n```"


def shown_steps(readme: str) -> list[tuple[str, str]]:
    """The README tour's ``(command, output)`` pairs."""
    lines = readme.split("```console", 1)[1].split("```", 1)[0].strip("\n").splitlines()
    steps: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return [(c, "\n".join(out)) for c, out in steps]


# what changes from run to run, in the order applied
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"\b1\d{12}\b"), "<ms>"),  # epoch milliseconds
    (re.compile(r"<ms>-\d+"), "<ms>-<pid>"),  # a Spark job's work directory
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),  # a topic id
    (re.compile(r"\b\d+-[0-9a-f]{8}\b"), "<n>-<hex>"),  # a WAL stream, a cold object
    (re.compile(r"\b0x[0-9a-f]{8}\b"), "<crc>"),
    (re.compile(r"[\d,]+(\.\d+)? (records|B|KiB|MiB|GiB)/s\b"), "<rate>"),
    (re.compile(r"\b\d+(\.\d+)? s\b"), "<s>"),  # a duration
]


def normalize(command: str, text: str) -> str:
    """``text`` with what changes from run to run replaced, and runs of blanks as one (a
    column is as wide as its widest value). A benchmark's output is compared by its shape: its
    numbers are left out."""
    for pattern, stand_in in VOLATILE:
        text = pattern.sub(stand_in, text)
    if command.startswith("rivven bench"):
        text = re.sub(r"\d[\d,.]*", "N", text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def exit_code(output: str) -> int:
    """The exit code a shown output implies: 1 for an error, 3 for damage found, else 0."""
    if output.startswith("error:"):
        return 1
    return 3 if "problem(s) found" in output else 0


def main() -> None:
    workdir = tempfile.mkdtemp()
    readme = (ROOT / "README.md").read_text()
    new = block(run(workdir))
    readme = re.sub(r"```console\n.*?\n```", lambda m: new, readme, count=1, flags=re.S)
    (ROOT / "README.md").write_text(readme)


if __name__ == "__main__":
    main()
