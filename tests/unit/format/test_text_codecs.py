"""The text codecs of the format layer (engine.format.text, textformat, jsonlines): records
as lines of text and back, in process, without the CLI. ``rivven consume``/``produce`` are
tested over them in tests/cli/test_cli_io.py."""

import json

import pytest

from engine.errors import InvalidArgument
from engine.format.jsonlines import JsonInput, json_lines
from engine.format.records import ColumnBatch
from engine.format.text import MAX_TIMESTAMP, LinesInput, decoder, encoder
from engine.format.textformat import FormatInput, formatter, tokens, unescape

BATCH = ColumnBatch("t", 2, [10, 11], [1_700_000_000_123, 0], [b"key", None],
                    [b"value", None], [[("a", b"1"), ("b", None)], []])


def text_out(fmt, enc="utf8"):
    return formatter(fmt, encoder(enc, False), encoder(enc, False))(BATCH)


# ---------------------------------------------------------------- encodings
@pytest.mark.parametrize("enc", ["utf8", "base64", "hex"])
def test_every_encoding_round_trips_any_bytes(enc):
    data = bytes(range(256)) + "é日本".encode()
    dec = decoder(enc)
    for for_json in (True, False):
        text = encoder(enc, for_json)(data)
        assert isinstance(text, str if for_json else bytes)
        if enc != "utf8":
            assert dec(text) == data
    assert encoder(enc, True)(None) is None and encoder(enc, False)(None) == b""


def test_utf8_for_json_replaces_what_is_not_utf8_and_says_so_once():
    said = []
    enc = encoder("utf8", True, on_replace=lambda: said.append(1))
    assert enc(b"ok") == "ok" and said == []
    assert enc(b"a\xffb") == "a\ufffdb" and enc(b"\xfe") == "\ufffd"
    assert said == [1]
    assert decoder("utf8") is None  # (the text is the bytes)


def test_decoders_refuse_what_is_not_their_encoding():
    with pytest.raises(ValueError):
        decoder("hex")(b"zz")
    with pytest.raises(ValueError):
        decoder("base64")("not base64!")
    with pytest.raises(InvalidArgument, match="unknown encoding 'rot13': use utf8, base64, hex"):
        encoder("rot13", True)
    with pytest.raises(InvalidArgument, match="unknown encoding"):
        decoder("rot13")


# ---------------------------------------------------------------- %-format out
def test_every_output_token():
    assert text_out("%t %p %o|%k|%v|%s|%K %S %V %H|%T %d|%h\\n") == (
        b"t 2 10|key|value|value|3 5 5 2|1700000000123 1700000000123|a=1,b=\n"
        b"t 2 11||||-1 -1 -1 0|0 0|\n")
    assert text_out("%d{strftime[%Y-%m-%d %H:%M:%S]} %T{strftime##[%F]##} 100%%\\n")[:32] == (
        b"2023-11-14 22:13:20 2023-11-14 1")
    assert text_out("%k\\0%v\\x41\\\\n%{%}") == b"key\x00valueA\\n{}\x00A\\n{}"
    assert text_out("%v\\n") == b"value\n\n"  # (the fast path: null prints as nothing)
    assert text_out("%k:%v\\n", "hex") == b"6b6579:76616c7565\n:\n"


def test_escapes_and_literal_bytes():
    assert unescape("a\\tb\\x41\\q") == "a\tbA\\q"  # an unknown escape stays
    assert unescape("\\xff") == "\udcff"  # one byte, as a surrogate escape
    assert text_out("\\xff%o\\n") == b"\xff10\n\xff11\n"


@pytest.mark.parametrize("fmt,message", [
    ("%q", "unknown format token %q: use %t topic"),
    ("%v{hex}", "%v{...}: only %d and %T take a modifier"),
    ("%d{strftime[%F}", "%d{strftime[...]} is not closed (write %{ for a literal brace)"),
    ("\\xZZ", "\\x takes two hex digits, as in \\x1f, not '\\\\xZZ'"),
    ("%v\\x4", "\\x takes two hex digits"),
])
def test_a_bad_output_format_is_an_invalid_argument_that_names_the_problem(fmt, message):
    with pytest.raises(InvalidArgument) as e:
        formatter(fmt, encoder("utf8", False), encoder("utf8", False))
    assert str(e.value).startswith(message), str(e.value)


def test_tokens_splits_a_format_into_tokens_and_literals():
    assert tokens("[%p] %T{strftime[%F]} %k=%v\\n", "pTkv") == [
        ("", "["), ("p", None), ("", "] "), ("T", "%F"), ("", " "), ("k", None), ("", "="),
        ("v", None), ("", "\n")]


# ---------------------------------------------------------------- %-format in
def test_format_input_reads_key_value_partition_timestamp():
    p = FormatInput("[%p] %T %k=%v\\n", None, None, None)
    assert p.terminator == b"\n" and p.fields == {"partition", "timestamp", "key", "value"}
    got = p.parse([b"[1] 42 a=x=y", b"[0] 43 b="], partitions=2)
    assert (got.values, got.keys, got.partitions, got.timestamps, got.error) == (
        [b"x=y", b""], [b"a", b"b"], [1, 0], [42, 43], None)


def test_format_input_ends_a_record_at_the_last_literal_and_ignores_topic_and_offset():
    p = FormatInput("%t:%o:%v\\0", b"k", None, decoder("hex"))
    assert p.terminator == b"\0" and p.fields == {"value"}
    got = p.parse([b"src:5:6869"], partitions=1)
    assert (got.values, got.keys) == ([b"hi"], [b"k"])


def test_format_input_stops_at_the_first_bad_line_with_the_records_before_it():
    p = FormatInput("%k %v\\n", None, None, None)
    got = p.parse([b"k1 ok", b"no-space", b"k3 ok"], partitions=1)
    assert got.values == [b"ok"] and got.error.index == 1
    assert str(got.error) == "no ' ' after %k"
    for line, message in ((b"x 1", "timestamp must be an integer from 0 to"),
                          (b"%d 1" % (MAX_TIMESTAMP + 1), "timestamp must be an integer"),
                          (b"9 1", None)):
        got = FormatInput("%T %v\\n", None, None, None).parse([line], partitions=1)
        assert (got.error is None) if message is None else str(got.error).startswith(message)
    got = FormatInput("%p %v\\n", None, None, None).parse([b"2 x"], partitions=2)
    assert str(got.error) == "partition must be an integer from 0 to 1, not '2'"
    got = FormatInput("<%v>|\\n", None, None, None).parse([b"<a", b"a"], partitions=1)
    assert got.values == [b"a"] and str(got.error) == "expected '<' at byte 1"
    got = FormatInput("-\\n", None, None, None).parse([b"", b"x"], partitions=1)
    assert got.values == [b""] and str(got.error) == "unexpected text at byte 1"
    got = FormatInput("%k %v\\n", None, decoder("hex"), None).parse([b"zz v"], partitions=1)
    assert str(got.error).startswith("key: non-hexadecimal")


@pytest.mark.parametrize("fmt,key,message", [
    ("%k%v\\n", None, "%k%v: put a separator between two tokens (where %k ends)"),
    ("%h %v\\n", None, "%h is printed by consume but not read by produce"),
    ("%S %v\\n", None, "%S is printed by consume but not read by produce"),
    ("%T{strftime[%F]} %v\\n", None, "%T{...}: produce reads timestamps as epoch ms"),
    ("%q", None, "unknown format token %q"),
    ("%k %v\\n", b"k", "a key for every record cannot be given with a format that has %k"),
])
def test_a_format_input_cannot_use_is_an_invalid_argument(fmt, key, message):
    with pytest.raises(InvalidArgument) as e:
        FormatInput(fmt, key, None, None)
    assert str(e.value).startswith(message), str(e.value)


# ---------------------------------------------------------------- plain lines
def test_lines_input_one_value_per_line_a_key_or_a_separator():
    assert LinesInput(None, None, None, None).parse([b"a", b""], 1).values == [b"a", b""]
    got = LinesInput(b"k", None, None, None).parse([b"a", b"b"], 1)
    assert got.keys == [b"k", b"k"]
    got = LinesInput(None, b":", decoder("hex"), None).parse([b"6b:v:w", b"nosep"], 1)
    assert (got.keys, got.values, got.error.index) == ([b"k"], [b"v:w"], 1)
    assert str(got.error) == "no key separator ':' in the line"
    with pytest.raises(InvalidArgument, match="either a key or a key separator"):
        LinesInput(b"k", b":", None, None)
    with pytest.raises(InvalidArgument, match="must not be empty"):
        LinesInput(None, b"", None, None)


# ---------------------------------------------------------------- JSON lines
def test_json_lines_out_and_back_in():
    out = json_lines(encoder("base64", True), encoder("base64", True))(BATCH)
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0] == {"topic": "t", "partition": 2, "offset": 10,
                       "timestamp": 1_700_000_000_123, "key": "a2V5", "value": "dmFsdWU=",
                       "headers": [["a", "MQ=="], ["b", None]]}
    got = JsonInput(True, decoder("base64"), decoder("base64")).parse(out.splitlines(), 3)
    assert got.error is None
    assert (got.keys, got.values, got.headers, got.partitions, got.timestamps) == (
        list(BATCH.keys), list(BATCH.values), [[("a", b"1"), ("b", None)], []], [2, 2],
        list(BATCH.timestamps))
    # without keep_partition, a consumed record (one with an offset) goes where the
    # partitioner puts it
    assert JsonInput(False, decoder("base64"), decoder("base64")).parse(
        out.splitlines(), 3).partitions == [None, None]


def test_json_input_skips_blank_lines_and_maps_records_to_lines():
    got = JsonInput(False, None, None).parse(
        [b"", b'{"value": "a", "headers": {"h": "x"}}', b"  ", b'{"value": {"n": 1}}'], 1)
    assert got.values == [b"a", b'{"n":1}'] and got.lines == [1, 3]
    assert got.headers == [[("h", b"x")], []]


@pytest.mark.parametrize("line,message", [
    (b"{bad", "malformed JSON (Expecting property name enclosed in double quotes at column 2)"),
    (b"[1]", "expected a JSON object"),
    (b'{"value": "a", "extra": 1}', "unknown field(s) extra"),
    (b'{"value": NaN}', "malformed JSON (NaN is not a JSON number)"),
    (b'{"value": 1e999}', "malformed JSON (number 1e999 is out of range)"),
    (b'{"partition": 5}', "partition must be an integer from 0 to 1 (the topic has 2), not 5"),
    (b'{"partition": true}', "partition must be an integer"),
    (b'{"timestamp": -1}', "timestamp must be milliseconds since the epoch"),
    (b'{"headers": 5}', "headers must be an object or a list of [key, value] pairs"),
    (b'{"value": "\\ud800"}', "value holds '\\ud800' at character 1, half of a UTF-16"),
    (b"[" * 100_000, "malformed JSON (nested too deeply)"),
])
def test_json_input_names_what_is_wrong_with_a_line(line, message):
    got = JsonInput(False, None, None).parse([b'{"value": "ok"}', line], 2)
    assert got.values == [b"ok"] and got.error.index == 1
    assert str(got.error).startswith(message), str(got.error)
    got = JsonInput(False, None, decoder("hex")).parse([b'{"value": 5}'], 1)
    assert str(got.error) == "value must be a string (or null) in the encoding given"
