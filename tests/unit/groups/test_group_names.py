"""Group names and member ids: the longest ones can be created, used, deleted and recreated;
ones too long for a later operation, or with control characters, are refused naming the
limit; odd ones an older rivven made still list and delete; Rich markup is shown as text."""

from __future__ import annotations

import json
import os
import re

import pytest
from helpers.crafted import clean


# ================================================================ names
def names_cycle(rivven, group: str, member: str | None = None) -> None:
    """Create (consume -g, commit), use, reset, delete and recreate a group."""
    extra = ("--member-id", member) if member is not None else ()
    r = rivven("consume", "t", "-g", group, "-n", "1", *extra)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"a\n"
    r = rivven("group", "describe", group, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitions"][0]["current_offset"] == 1
    r = rivven("group", "list", "--json")
    assert group in [g["group"] for g in json.loads(r.stdout)]
    r = rivven("group", "reset-offsets", group, "--topic", "t", "--to-latest", "--execute")
    assert r.returncode == 0, r.stderr
    r = rivven("group", "delete", group, "-y")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(b"group ") and b" deleted (1 committed offset(s))" in r.stdout
    r = rivven("group", "list", "--json")
    assert json.loads(r.stdout) == []
    r = rivven("group", "reset-offsets", group, "--topic", "t", "--to-offset", "2", "--execute")
    assert r.returncode == 0, r.stderr  # recreated by a reset
    r = rivven("consume", "t", "-g", group, "-n", "1", *extra)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"c\n"
    assert rivven("group", "delete", group, "-y").returncode == 0


@pytest.fixture
def topic_t(cli):
    assert cli("topic", "create", "t").returncode == 0
    assert cli("produce", "t", input=b"a\nb\nc\n").returncode == 0


# (the emoji names through real processes, their command lines as a shell passes them; the
# others in process)
@pytest.mark.slow
@pytest.mark.parametrize("group", ["g" * 249, "é" * 42, "\U0001F600" * 21, " " * 85],
                         ids=["ascii-249", "e-acute-42", "emoji-21", "spaces"])
def test_the_longest_group_names_can_be_created_used_deleted_and_recreated(
        rivven, cli, topic_t, group):
    names_cycle(rivven if group.startswith("\U0001F600") else cli, group)


@pytest.mark.slow
@pytest.mark.parametrize("member", ["m" * 200, "é" * 125, "\U0001F600" * 62],
                         ids=["ascii-200", "e-acute-125", "emoji-62"])
def test_the_longest_member_ids_can_be_used_again_and_again(rivven, cli, topic_t, member):
    names_cycle(rivven if member.startswith("\U0001F600") else cli, "g", member)


@pytest.mark.parametrize("group,chars,nbytes", [
    ("g" * 250, 250, 250), ("é" * 43, 43, 258), ("é" * 100, 100, 600),
    ("\U0001F600" * 22, 22, 264), (" " * 86, 86, 258)])
def test_a_group_name_too_long_for_later_operations_is_refused_at_creation(
        cli, data_dir, topic_t, group, chars, nbytes):
    for args in (("consume", "t", "-g", group, "-n", "1"),
                 ("group", "reset-offsets", group, "--topic", "t", "--to-earliest",
                  "--execute")):
        err = clean(cli(*args), 1)
        assert f"{chars} characters, {nbytes} bytes" in err
        assert "at most 249 characters and 255 bytes" in err
    assert not os.path.exists(os.path.join(data_dir, "groups")) or \
        os.listdir(os.path.join(data_dir, "groups")) == []


@pytest.mark.parametrize("member,chars,nbytes", [
    ("m" * 201, 201, 201), ("é" * 126, 126, 252), ("\U0001F600" * 63, 63, 252)])
def test_a_member_id_too_long_is_refused_naming_the_limits(cli, topic_t, member, chars,
                                                          nbytes):
    err = clean(cli("consume", "t", "-g", "g", "--member-id", member, "-n", "1"), 1)
    assert f"{chars} characters, {nbytes} bytes" in err
    assert "at most 200 characters and 250 bytes" in err


@pytest.mark.parametrize("name,where,code", [
    ("a\nb", 2, "U+000A"), ("\tx", 1, "U+0009"), ("ab\x1b[31m", 3, "U+001B"),
    ("x\x7f", 2, "U+007F"), ("x\u2028y", 2, "U+2028"), ("nul\x00", 4, "U+0000")])
def test_control_characters_are_refused_in_group_names_and_member_ids(
        cli, data_dir, topic_t, name, where, code):
    if "\x00" in name:  # (no NUL in a command line: the engine API)
        from engine import Engine
        from engine.errors import InvalidArgument
        with Engine.open(data_dir) as eng:
            says = re.escape(f"character {where} is a control character ({code})")
            with pytest.raises(InvalidArgument, match=says):
                eng.consumer(name, "t")
            with pytest.raises(InvalidArgument, match=says):
                eng.consumer("g", "t", member_id=name)
            with pytest.raises(InvalidArgument, match=f"client id .*character {where}"):
                eng.consumer("g", "t", client_id=name)
        return
    for args in (("consume", "t", "-g", name, "-n", "1"),
                 ("consume", "t", "-g", "g", "--member-id", name, "-n", "1"),
                 ("group", "reset-offsets", name, "--topic", "t", "--to-earliest", "--execute")):
        err = clean(cli(*args), 1)
        assert f"character {where} is a control character ({code})" in err, err
    assert cli("group", "list", "--json").stdout.strip() == b"[]"


def test_a_group_made_with_a_newline_by_an_older_rivven_lists_as_one_line_and_deletes(
        rivven, data_dir, topic_t):
    assert rivven("consume", "t", "-g", "x", "-n", "1").returncode == 0
    root = os.path.join(data_dir, "groups")
    os.rename(os.path.join(root, "x"), os.path.join(root, "a%0Ab"))  # as quote() named it
    r = rivven("group", "list")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.decode().splitlines()
    assert len(rows) == 2 and rows[1].startswith("a\\nb ")  # header + one escaped row
    r = rivven("group", "list", "--json")
    assert [g["group"] for g in json.loads(r.stdout)] == ["a\nb"]
    assert rivven("group", "delete", "a\nb", "-y").returncode == 0
    assert os.listdir(root) == []


def test_a_directory_no_group_maps_to_is_not_listed(rivven, data_dir, topic_t):
    assert rivven("consume", "t", "-g", "real", "-n", "1").returncode == 0
    for stray in ("a b", "x" * 250, "%zz"):
        os.makedirs(os.path.join(data_dir, "groups", stray))
    r = rivven("group", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [g["group"] for g in json.loads(r.stdout)] == ["real"]


def test_a_group_name_that_is_rich_markup_is_shown_as_it_is(rivven, topic_t):
    assert rivven("consume", "t", "-g", "[bold]x[/bold]", "-n", "1").returncode == 0
    r = rivven("group", "list")
    assert b"[bold]x[/bold]" in r.stdout
