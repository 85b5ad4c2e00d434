"""Copies between a data dir and a Kafka-protocol cluster: the cluster is a real broker in
another process — ``rivven serve`` on another data dir (it does transactions,
send_offsets_to_transaction and read_committed as Kafka does) or tansu."""

from collections.abc import Iterator

import pytest
from helpers.kafka import Served, start_server

import engine


@pytest.fixture
def served(tmp_path) -> Iterator[Served]:
    """A ``rivven serve`` on an empty data dir, on a free port."""
    s = start_server(str(tmp_path / "cluster"))
    try:
        yield s
    finally:
        s.kill()


@pytest.fixture
def source(tmp_path) -> Iterator[engine.Engine]:
    eng = engine.Engine.open(str(tmp_path / "src"))
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def sink(tmp_path) -> Iterator[engine.Engine]:
    eng = engine.Engine.open(str(tmp_path / "sink"))
    try:
        yield eng
    finally:
        eng.close()
