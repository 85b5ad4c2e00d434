"""The README's tour run for real (Spark included): every command exits with the code and
prints the output the README shows (scripts/readme_tour.py; the normalization it uses can fail:
tests/cli/test_cli.py)."""

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_readme_tour_shows_a_real_run(tmp_path):
    """Every command of the README's tour runs with the exit code and the output it shows
    (once what changes from run to run is normalized: scripts/readme_tour.py)."""
    tour = _tour_module()
    shown = tour.shown_steps((ROOT / "README.md").read_text())
    assert [c for c, _ in shown] == tour.COMMANDS, \
        "the README tour is stale: regenerate it with python scripts/readme_tour.py"
    for (command, want), (_, got, code) in zip(shown, tour.run(str(tmp_path))):
        assert code == tour.exit_code(want), f"{command}: exit {code}\n{got}"
        assert tour.normalize(command, got) == tour.normalize(command, want), \
            f"{command}: the README shows\n{want}\nbut a run prints\n{got}"


def _tour_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_tour", ROOT / "scripts" /
                                                  "readme_tour.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
