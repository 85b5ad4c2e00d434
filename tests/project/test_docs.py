"""The Python API the docs show exists: every ``eng.name(...)`` and ``eng.service.name(...)``
in README.md and docs/*.md resolves on a real Engine to something callable."""

import re

from helpers import ROOT

from engine import Engine


def engine_calls() -> dict[str, str]:
    """``{"groups.describe": "README.md", ...}``: the engine calls the docs show."""
    out = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in re.findall(r"\beng\.((?:[a-z_]+\.)?[a-z_]+)\(", doc.read_text()):
            out.setdefault(name, doc.name)
    return out


def test_every_engine_call_the_docs_show_exists(data_dir):
    calls = engine_calls()
    assert "groups.describe" in calls and "produce" in calls  # (the README's API tour)
    missing = []
    with Engine.open(data_dir) as eng:
        for name, doc in sorted(calls.items()):
            obj = eng
            try:
                for part in name.split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                missing.append(f"eng.{name} ({doc})")
                continue
            if not callable(obj):
                missing.append(f"eng.{name} ({doc}): not callable")
    assert missing == []
