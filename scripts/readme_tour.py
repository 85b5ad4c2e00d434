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
