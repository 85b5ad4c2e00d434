"""``rivven produce --input json``: a line with what a record cannot hold (Infinity, NaN,
numbers out of range, deep nesting, lone surrogates, a bad partition, timestamp or headers) is
a clean error naming the line, never an internal one (the CLI in process: ``cli``)."""

from __future__ import annotations

import pytest
from helpers.crafted import clean

# ================================================================ produce --input json
BAD_LINES = {
    "infinity": (b'{"value": Infinity}', "Infinity"),
    "nan": (b'{"value": {"a": NaN}}', "NaN"),
    "huge-float": (b'{"value": 1e400}', "out of range"),
    "huge-negative-float": (b'{"key": [-1e999]}', "out of range"),
    "deep": (b'{"value": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nested too deeply"),
    "int-digits": (b'{"value": ' + b"1" * 5000 + b"}", "digits"),
    "not-utf8": (b'{"value": "\xff"}', "malformed JSON"),
    "surrogate-key": (b'{"key": "\\ud800"}', "surrogate"),
    "surrogate-value": (b'{"value": "a\\udfff"}', "surrogate"),
    "surrogate-header-key": (b'{"headers": [["\\ud800", "v"]]}', "surrogate"),
    "surrogate-header-value": (b'{"headers": {"k": "\\ud800"}}', "surrogate"),
    "partition-too-large": (b'{"partition": 2}', "partition must be an integer from 0 to 1"),
    "partition-huge": (b'{"partition": 99999999999999999999}', "partition must be"),
    "partition-bool": (b'{"partition": true}', "partition must be"),
    "partition-float": (b'{"partition": 1.0}', "partition must be"),
    "timestamp-huge": (b'{"timestamp": 99999999999999999999}', "timestamp must be"),
    "timestamp-bool": (b'{"timestamp": false}', "timestamp must be"),
    "headers-pairs": (b'{"headers": [["only-a-key"]]}', "[key, value] pairs"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_json_input_line_is_a_clean_error_naming_the_line(cli, case):
    assert cli("topic", "create", "t", "-p", "2").returncode == 0
    line, says = BAD_LINES[case]
    r = cli("produce", "t", "--input", "json", input=b'{"value": "first"}\n' + line + b"\n"
            + b'{"value": "never"}\n')
    err = clean(r, 1)
    assert "line 2:" in err and says in err, err
    r = cli("consume", "t", "-f", "%v\n")
    assert r.stdout == b"first\n"  # the line before is stored, nothing after
