"""Tests that kill real processes (kill -9, failpoints) and check what they left: every test
in this folder carries the ``crash`` marker (``make quick`` leaves them out)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # (a conftest's pytestmark does not mark its folder's tests; this hook sees every item)
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.crash)
