"""Topic names: checked at creation (1-249 characters), and the longest ones can be deleted and
created again (their trash entry fits a file name). The real ``rivven`` (names checked: in
process)."""

from __future__ import annotations

import os

import pytest
from helpers import run_rivven
from helpers.crafted import clean
from helpers.fs import consume_all, no_internal_error, produce


# ------------------------------------------------------------------------------ the trash
def test_longest_topic_name_can_be_deleted_and_recreated(data_dir):
    """Names of 236-249 characters were created but could not be deleted: the trash entry
    trash/<name>-<19 digits> exceeded 255 bytes (catalog entry gone, files stayed)."""
    for name in ("x" * 249, "y" * 236, "A-b_c." * 41 + "abc"):
        assert len(name) <= 249
        run_rivven(data_dir, "topic", "create", name, "-p", "2", check=True)
        assert produce(data_dir, name, ["one", "two"]).returncode == 0
        r = run_rivven(data_dir, "topic", "delete", name, "--yes")
        no_internal_error(r)
        assert r.returncode == 0, r.stderr.decode()
        assert not os.path.exists(os.path.join(data_dir, "topics", name))
        assert os.listdir(os.path.join(data_dir, "trash")) == []
        run_rivven(data_dir, "topic", "create", name, check=True)
        assert produce(data_dir, name, ["three"]).returncode == 0
        assert consume_all(data_dir, name) == ["three"]


@pytest.mark.parametrize("name,ok", [("t" * 249, True), ("t" * 250, False),
                                     ("é", False), ("a\nb", False)])
def test_topic_names_are_checked_at_creation(cli, name, ok):
    r = cli("topic", "create", name)
    if ok:
        assert r.returncode == 0, r.stderr
        assert cli("produce", name, input=b"x\n").returncode == 0
    else:
        assert "1-249 characters" in clean(r, 1)
