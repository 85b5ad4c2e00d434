"""The shape of the code: lower layers never import upper ones, no module touches another
module's ``_private`` names, and ``import engine`` stays light (docs/ARCHITECTURE.md).

The checks read the sources with ``ast`` (imports inside functions and under TYPE_CHECKING
count too) and are themselves tested on a bad import and a bad access added to the tree.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

# A module may import its own package and packages of a lower rank, nothing else.
RANKS = {
    "engine.errors": 0, "engine.clock": 0, "engine.failpoint": 0, "engine.progress": 0,  # base
    "engine.format": 1,  # bytes in, bytes out
    "engine.fs": 2,  # the file-system rules: guards, durable writes, sealed JSON, locks
    "engine.crypto": 3, "engine.counters": 3,  # keys and ciphers | this process's counters
    "engine.security": 3,  # SCRAM users, ACLs
    "engine.segments": 4,  # a partition directory's files, each on its own
    "engine.storage": 5,  # the data dir's metadata and the partition object
    "engine.wal": 6, "engine.groups": 6,
    "engine.txn": 7,  # producer state, transactions
    "engine.tiering": 8, "engine.fetch": 8, "engine.produce": 8,
    "engine.maintenance": 9, "engine.tools": 9,
    "engine.schemas": 9,  # the schema registry, the schema types, Confluent's wire format
    "engine.metrics": 10,  # the exposition: counters of every process + the data dir's state
    "engine": 11,  # the façade: engine/__init__.py, engine/engine.py, engine/settings.py
    "engine.spark": 12,
    "engine.kafka": 13,  # Kafka's wire protocol (rivven serve): a front end, as the CLI
    "engine.bridge": 13,  # copies to and from a Kafka cluster (rivven kafka export|import)
    "rivven_cli": 14,
}
# narrower than its rank allows: the format is bytes in, bytes out
ONLY = {"engine.format": {"engine.errors"}}
# namedtuple's public API (underscored so that fields cannot clash with it)
NAMEDTUPLE_API = {"_make", "_asdict", "_replace", "_fields", "_field_defaults"}
# private names of other libraries, used on purpose (the name, where, why)
FOREIGN_PRIVATE = {
    ("_lock", "engine/wal/stream.py"),  # threading.Condition's lock, shared by two conditions
    ("_strip_protocol", "engine/tiering/cold.py"),  # fsspec: a URI to the path inside its fs
    ("_jdf", "engine/spark/job.py"), ("_jc", "engine/spark/job.py"),  # pyspark, no pandas
    ("_create_udf", "engine/spark/job.py"),
    # click's per-parameter completion hook, set on the built commands (typer's autocompletion=
    # would need every module's topic and group parameters edited)
    ("_custom_shell_complete", "rivven_cli/completion.py"),
    # os._exit (public, despite its name): rivven serve stopped at once by a second signal
    # while engine calls still run (the thread pool's threads would hold a normal exit)
    ("_exit", "rivven_cli/serve.py"),
}


def sources(root: Path = ROOT) -> dict[str, str]:
    """``{relative path: source}`` of every module of the engine and the CLI."""
    return {str(p.relative_to(root)): p.read_text()
            for top in ("engine", "rivven_cli") for p in sorted((root / top).rglob("*.py"))}


def module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def unit(module: str) -> str:
    """The layer a module belongs to: the longest prefix in RANKS."""
    if module == "engine.engine":
        return "engine"
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in RANKS:
            return ".".join(parts[:i])
    raise KeyError(f"{module} is in no layer: add its folder to RANKS and ARCHITECTURE.md")


def imports(path: str, source: str) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every engine or CLI module that ``path`` imports."""
    mod = module_name(path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return [(ln, t) for ln, t in out if t.split(".")[0] in ("engine", "rivven_cli")]


def import_violations(tree: dict[str, str]) -> list[str]:
    known = {module_name(p) for p in tree}
    found = []
    for path, source in tree.items():
        src = unit(module_name(path))
        for line, target in imports(path, source):
            while target not in known and "." in target:  # a name imported from a module
                target = target.rpartition(".")[0]
            dst = unit(target)
            allowed = ONLY.get(src)
            if src == dst or (RANKS[dst] < RANKS[src] and (allowed is None or dst in allowed)):
                continue
            found.append(f"{path}:{line}: {src} (layer {RANKS[src]}) imports {target} "
                         f"(layer {RANKS[dst]})")
    return found


def private_names(source: str) -> set[str]:
    """The ``_private`` names a module defines: functions, classes, attributes, globals."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return {n for n in out if n.startswith("_") and not n.startswith("__")}


def private_violations(tree: dict[str, str]) -> list[str]:
    """Uses of a ``_name`` that another engine or CLI module defines and this one does not."""
    defined = {path: private_names(source) for path, source in tree.items()}
    anywhere: dict[str, set[str]] = {}
    for path, names in defined.items():
        for n in names:
            anywhere.setdefault(n, set()).add(path)
    found = []
    for path, source in tree.items():
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                names.append(node.attr)
            elif isinstance(node, ast.ImportFrom):
                names += [a.name for a in node.names]
            for n in names:
                if (not n.startswith("_") or n.startswith("__") or n in defined[path]
                        or n in NAMEDTUPLE_API):
                    continue
                if (n, path) in FOREIGN_PRIVATE:
                    continue
                owners = anywhere.get(n, set()) - {path}
                found.append(f"{path}:{node.lineno}: uses {n}"
                             + (f", private to {', '.join(sorted(owners))}" if owners else
                                ", a private name of another library (FOREIGN_PRIVATE says why)"))
    return found


def test_lower_layers_never_import_upper_ones():
    assert import_violations(sources()) == []


def test_no_module_touches_another_modules_private_names():
    assert private_violations(sources()) == []


@pytest.mark.parametrize("path,line,expect", [
    ("engine/storage/log.py", "from ..maintenance import compaction", "imports engine.maintenance"),
    ("engine/format/encode.py", "from .. import clock", "imports engine.clock"),
    ("engine/wal/owner.py", "from ..groups import membership", "imports engine.groups"),
    ("engine/tiering/tier_pass.py", "from ..engine import Engine", "imports engine.engine"),
    ("engine/groups/consumer.py", "import rivven_cli.common", "imports rivven_cli.common"),
])
def test_an_upward_import_is_caught(path, line, expect):
    tree = sources()
    tree[path] += f"\n{line}\n"
    (found,) = import_violations(tree)
    assert found.startswith(path) and expect in found


@pytest.mark.parametrize("path,line,expect", [
    ("engine/maintenance/compaction.py", "log.segs._prefix", "private to engine/segments/"),
    ("rivven_cli/topic.py", "eng._find.partition(name, 0)", "private to engine/engine.py"),
    ("engine/tools/verify.py", "from ..fs.durable import _nope", "another library"),
])
def test_a_private_access_is_caught(path, line, expect):
    tree = sources()
    tree[path] += f"\n{line}\n"
    (found,) = private_violations(tree)
    assert found.startswith(path) and expect in found


BASE = {u for u, rank in RANKS.items() if rank == 0}


def folder_imports(tree: dict[str, str]) -> dict[str, set[str]]:
    """The layers (RANKS' units) each unit's modules import, other than its own."""
    known = {module_name(p) for p in tree}
    out: dict[str, set[str]] = {}
    for path, source in tree.items():
        src = unit(module_name(path))
        for _, target in imports(path, source):
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if unit(target) != src:
                out.setdefault(src, set()).add(unit(target))
    return out


def declared_imports(doc: str) -> tuple[set[str], bool]:
    """The layers a folder's docstring says it may import (the ``engine.x`` names of its
    "May import:" paragraph), and whether that names the base modules."""
    found = re.search(r"May import:(.*?)(?:\n\s*\n|$)", doc, re.S)
    text = found.group(1) if found else ""
    names = set(re.findall(r"``(engine(?:\.\w+)?)``", text))
    return names - BASE, "base" in text or bool(names & BASE)


def import_claims(tree: dict[str, str], docs: dict[str, str]) -> list[str]:
    """Each folder whose "May import:" line is not what its modules really import."""
    actual = folder_imports(tree)
    found = []
    for folder, doc in sorted(docs.items()):
        names, base = declared_imports(doc)
        real = actual.get(folder, set())
        if names != real - BASE or base != bool(real & BASE):
            found.append(f"{folder}: says it may import {sorted(names)}"
                         f"{' and the base modules' if base else ''}, imports "
                         f"{sorted(real - BASE)}{' and the base modules' if real & BASE else ''}")
    return found


def folder_docs() -> dict[str, str]:
    return {f"engine.{d.name}": ast.get_docstring(ast.parse((d / "__init__.py").read_text()))
            or "" for d in sorted((ROOT / "engine").iterdir())
            if d.is_dir() and d.name != "__pycache__"}


def test_every_folder_says_its_layer_and_truly_what_it_may_import():
    docs = folder_docs()
    for folder, doc in docs.items():
        assert re.match(rf"Layer {RANKS[folder]} — ", doc), f"{folder}: 'Layer {RANKS[folder]} — '"
    assert import_claims(sources(), docs) == []


def test_a_wrong_import_claim_is_caught():
    tree, docs = sources(), folder_docs()
    tree["engine/wal/owner.py"] += "\nfrom ..tiering import cold\n"  # (upward, and unclaimed)
    (found,) = import_claims(tree, docs)
    assert found.startswith("engine.wal:") and "engine.tiering" in found
    docs["engine.fs"] = docs["engine.fs"].replace("``engine.format``", "``engine.crypto``")
    assert any(f.startswith("engine.fs:") for f in import_claims(sources(), docs))


def test_import_engine_is_light():
    """``import engine`` (and opening, producing and reading records) never imports pyspark,
    nor pyarrow until a read asks for Arrow (or columns: ``stream``, consumer groups)."""
    code = ("import sys, tempfile; from engine import Engine, Record\n"
            "with Engine.open(tempfile.mkdtemp()) as e:\n"
            "    e.create_topic('t'); e.produce('t', [Record(value=b'v')])\n"
            "    e.read('t', 0, 0)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pyarrow', "
            "'rivven_cli'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"  # (read(): Records made in C, engine.format.native)
    code = "import sys, engine; print(sorted(m for m in sys.modules if 'py' in m[:2]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert "pyspark" not in out and "pyarrow" not in out


def test_the_architecture_map_names_every_module():
    """docs/ARCHITECTURE.md's module map lists every module of the engine and the CLI (by its
    file name within its folder's table, or its path)."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = []
    for path in sources():
        name = path.rsplit("/", 1)[-1]
        if name == "__init__.py":
            continue
        short = path.split("/", 1)[1] if path.startswith("engine/") else path
        if f"`{path}`" in doc or f"`{short}`" in doc or f"`{name}`" in doc:
            continue
        missing.append(path)
    assert missing == [], "add them to docs/ARCHITECTURE.md's module map"


def import_circles(tree: dict[str, str]) -> list[list[str]]:
    """The circles of imports between modules (strongly connected groups of more than one
    module), imports inside functions and under TYPE_CHECKING included."""
    known = {module_name(p) for p in tree} | {"engine.format.fastcodec"}  # (the C extension)
    graph: dict[str, set[str]] = {}
    for path, source in tree.items():
        mod = module_name(path)
        for _, target in imports(path, source):
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target != mod:
                graph.setdefault(mod, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(known):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_anywhere():
    assert import_circles(sources()) == []


def test_an_import_circle_is_caught():
    tree = sources()
    tree["engine/fs/guard.py"] += "\nfrom . import durable\n"  # (durable and reserve import guard)
    assert import_circles(tree) == [["engine.fs.durable", "engine.fs.guard", "engine.fs.reserve"]]
