"""Fixtures for every test (pytest finds them here); plain helpers are in ``helpers``. Under
pytest-xdist (``make test``) the longest tests start first."""

from pathlib import Path

import pytest
from helpers import new_key, run_rivven, write_keyring
from helpers.cli import run_in_process
from helpers.packaging import build_wheel

from engine import Engine


@pytest.hookimpl(trylast=True)  # (after the folders' conftests have given their markers)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the longest tests first (Spark or kill -9 and slow, then slow, then
    Spark, then kill -9; otherwise in file order): handed out one by one (``--maxschedchunk
    1``), they spread over the workers instead of one left for the end."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item: pytest.Item) -> int:
        marks = {m.name for m in item.iter_markers()}
        heavy = bool(marks & {"spark", "crash"})
        return (0 if "slow" in marks and heavy else 1 if "slow" in marks else
                2 if "spark" in marks else 3 if "crash" in marks else 4)

    items.sort(key=rank)


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data")


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource
    s = (SparkSession.builder.master("local[2]").appName("rivven-tests")
         .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(RivvenDataSource)
    yield s
    s.stop()


@pytest.fixture
def rivven(data_dir: str):
    def call(*args: str, **kw):
        return run_rivven(data_dir, *args, **kw)
    return call


@pytest.fixture
def cli(data_dir: str):
    """``rivven`` in this process (``helpers.cli``): for input errors and the set-up around
    them; ``rivven`` (a real process) where a terminal, signals, pipes or start-up count."""
    def call(*args: str, **kw):
        return run_in_process(data_dir, *args, **kw)
    return call


@pytest.fixture
def keys() -> dict[str, str]:
    return {"k1": new_key(), "k2": new_key()}


@pytest.fixture
def keyring(tmp_path, keys) -> str:
    """A keyring file (master keys k1 and k2) outside the data dir, mode 0600."""
    return write_keyring(str(tmp_path / "keyring.json"), keys)


# fixtures of a layer's tests that its crash tests use too (tests/unit/counters and
# tests/crash/test_counters_crash.py; tests/unit/txn/test_txn_prepare.py and
# tests/crash/test_txn_prepare_crash.py)
@pytest.fixture
def topic_dir(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", partitions=2)
    return data_dir


@pytest.fixture
def topics(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", partitions=2)
    return data_dir


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel .`` builds from a copy of the source tree (as a clone has it), built
    once for tests/project/test_packaging.py and tests/spark/test_wheel_install.py."""
    return build_wheel(tmp_path_factory)
