"""Tests of ``rivven serve`` with real Kafka clients against a real server process."""

from collections.abc import Iterator

import pytest
from helpers import run_rivven
from helpers.kafka import Served, start_server


@pytest.fixture
def served(tmp_path) -> Iterator[Served]:
    """A data dir with topic ``t`` (2 partitions) served on a free port."""
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)
    s = start_server(d)
    try:
        yield s
    finally:
        s.kill()
