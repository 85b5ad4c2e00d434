"""Tests that start Spark (a SparkSession or spark-submit): every test in this folder carries
the ``spark`` marker (``make quick`` leaves them out; those that also kill processes carry
``crash`` too)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # (a conftest's pytestmark does not mark its folder's tests; this hook sees every item)
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.spark)
