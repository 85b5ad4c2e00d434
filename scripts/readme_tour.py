"""Regenerate the README's command tour with real output: python scripts/readme_tour.py"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    "seq 1 100000 | rivven produce orders -z lz4 -q",
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
    "$(( $(date +%s) * 1000 - (300 - i) * 1000 - (i < 100 ? 172800000 : 0) ))}\"; done | "
    "rivven produce clicks --input json -q  # the first 99 clicks are two days old",
    "rivven topic alter-config clicks --set retention.ms=86400000 --set retention.bytes=4096",
    "rivven retention apply --dry-run",
    "rivven retention apply clicks",
    "rivven offsets clicks",
    "rivven group delete-offsets billing --topic orders",
    "rivven group delete billing --yes",
    "rivven topic create users -p 2 -c cleanup.policy=compact -c segment.bytes=8192",
    "for i in $(seq 1 4000); do echo \"user$((i % 100)):{\\\"visits\\\":$i}\"; done | "
    "rivven produce users -K : -q",
    "echo 'user7:' | rivven produce users -K : --tombstone-empty -q  # a tombstone deletes user7",
    "rivven compaction explain users",
    "rivven spark compact users --dry-run",
    "rivven spark compact users --master 'local[2]'",
    "rivven compaction explain users",
    "rivven consume users -p 0 -n 3 -f '%o %k=%v\\n'",
    "rivven topic create logs -p 2 -c remote.storage.enable=true -c local.retention.bytes=16384 "
    "-c segment.bytes=8192",
    "seq 1 3000 | sed 's/.*/host&:GET \\/item\\/& 200/' | rivven produce logs -K : -q --batch-records 200",
    "rivven spark tier --dry-run",
    "rivven spark tier logs --master 'local[2]'",
    "rivven tier status logs",
    "rivven segment list logs -p 0",
    "rivven consume logs -p 0 -n 2 -f '%o %k %v\\n'  # offsets 0.. are in the cold store now",
    "rivven segment verify logs --cold",
    "rivven tier restore logs -p 0 --from 600 --dry-run",
    "rivven tier restore logs -p 0 --from 600",
    "rivven tier status logs",
    "rivven consume nope",
    "rivven topic delete orders --yes",
    "rivven bench produce --records 200000",
    "rivven bench consume --records 200000",
]


def main() -> None:
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, RIVVEN_DATA_DIR="rivven-data", COLUMNS="100", PYTHONPATH=str(ROOT))
    prelude = (f'rivven() {{ "{sys.executable}" -m rivven_cli "$@"; }}\n'
               f'python() {{ "{sys.executable}" "$@"; }}\n')
    out = []
    for c in COMMANDS:
        r = subprocess.run(["bash", "-c", prelude + c + " 2>&1"], env=env, cwd=tmp,
                           capture_output=True, text=True)
        text = "\n".join(line.rstrip() for line in r.stdout.splitlines())
        out.append(f"$ {c}\n{text}".rstrip())
    block = "```console\n" + "\n".join(out) + "\n```"
    readme = (ROOT / "README.md").read_text()
    readme = re.sub(r"```console\n.*?\n```", lambda m: block, readme, count=1, flags=re.S)
    (ROOT / "README.md").write_text(readme)


if __name__ == "__main__":
    main()
