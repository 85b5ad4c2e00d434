"""Encryption at rest: the keyring, wrapped data keys, sealed batches (engine.crypto,
engine.format.sealed) and the header checks on them (engine.format.records)."""

import base64
import json
import os
import pickle
import stat
import struct
import threading

import pytest

from engine.crypto import batch as crypto_batch
from engine.crypto import ciphers, keyops
from engine.crypto.batch import Opener, Sealer
from engine.crypto.ciphers import AES_GCM, CHACHA
from engine.crypto.keyring import ENV, CustomKeyring, FileKeyring, resolve
from engine.crypto.keyset import KeySet
from engine.crypto.topic import StaticKeys, TopicKeys, metadata_context
from engine.errors import CorruptRecordError, KeyringError, KeyUnavailable, WrongKey
from engine.format import codecs, sealed
from engine.format.control import encode_marker
from engine.format.decode import body_of, check_body, decode_records, layout
from engine.format.encode import encode_batch
from engine.format.records import ATTR_ENCRYPTED, HEADER_SIZE, check_crc, read_header

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
TOPIC_ID = bytes.fromhex("00112233445566778899aabbccddeeff")
TOPIC_HEX = TOPIC_ID.hex()
MASTERS = {"m1": os.urandom(32), "m2": os.urandom(32)}
SALT_AT, NONCE_AT, CT_AT = HEADER_SIZE, HEADER_SIZE + 16, HEADER_SIZE + 28
N = 20
KEYS = [b"key-%02d" % i for i in range(N)]
VALUES = [b"secret-value-%02d-" % i + os.urandom(8).hex().encode() for i in range(N)]
STAMPS = [1_700_000_000_000 + 7 * i for i in range(N)]


# ------------------------------------------------------------------ helpers
def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def write(path, data, mode: int = 0o600) -> str:
    """A keyring file holding ``data`` (a dict is JSON-encoded) with ``mode``."""
    if isinstance(data, dict):
        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, mode)
    return str(path)


def refused(path, *words: str) -> str:
    """The one-line KeyringError opening the keyring at ``path`` raises; names the file."""
    with pytest.raises(KeyringError) as e:
        FileKeyring(str(path))
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    for w in words:
        assert w in msg
    return msg


def plain(codec: int = codecs.NONE, base: int = 100) -> bytearray:
    return encode_batch(KEYS, VALUES, STAMPS, codec=codec).assign(base)


def seal(buf, version: int = 1, cipher: str = AES_GCM, key: bytes = KEY, partition: int = 0,
         topic: bytes = TOPIC_ID) -> bytearray:
    return Sealer(version, cipher, key).seal_batch(buf, topic, partition)


def opener(cipher: str = AES_GCM, key: bytes = KEY, topic: bytes = TOPIC_ID) -> Opener:
    return Opener(topic, lambda version: (cipher, key))


def open_sealed(buf, partition: int = 0, op: Opener | None = None) -> bytes:
    h = read_header(buf)
    check_crc(buf, 0, h)
    return bytes((op or opener()).open_batch(buf, 0, h, partition))


def flipped(buf, pos: int, bit: int = 0) -> bytearray:
    """A copy of ``buf`` with one bit flipped and the CRC made right again."""
    out = bytearray(buf)
    out[pos] ^= 1 << bit
    return sealed.finish(out)


def edited(buf, fmt: str, at: int, value: int) -> bytearray:
    """A copy of ``buf`` with the field at ``at`` set to ``value`` and the CRC made right."""
    out = bytearray(buf)
    struct.pack_into(fmt, out, at, value)
    return sealed.finish(out)


def salt_nonce(buf) -> tuple[bytes, int]:
    return bytes(buf[SALT_AT:NONCE_AT]), int.from_bytes(buf[NONCE_AT:CT_AT], "little")


def master(key_id: str) -> bytes:
    return MASTERS[key_id]


def unwrapped(ks: KeySet, version: int) -> bytes:
    k = ks.get(version)
    return ciphers.unwrap(MASTERS[k.master_key_id], k.master_key_id, TOPIC_ID, k.version,
                          k.cipher, k.wrapped, "t")


class DictKeyring:
    def __init__(self, keys: dict) -> None:
        self.keys = keys

    def get(self, key_id: str):
        return self.keys[key_id]


class Bad(Exception):
    pass


# ------------------------------------------------------------------ 1. keyring file
@pytest.fixture
def keyring_file(tmp_path) -> str:
    return write(tmp_path / "keyring.json", {"k1": b64(KEY)})


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_keyring_valid_modes(keyring_file, mode):
    os.chmod(keyring_file, mode)
    kr = FileKeyring(keyring_file)
    assert kr.get("k1") == KEY and kr.ids() == ["k1"]


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_keyring_readable_by_others_refused(keyring_file, mode):
    os.chmod(keyring_file, mode)
    refused(keyring_file, f"{mode:04o}", f"chmod 600 {keyring_file}")


def test_keyring_readable_by_others_only(tmp_path):
    path = write(tmp_path / "kr.json", {"k1": b64(KEY)}, mode=0o604)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o604
    refused(path, "0604", "readable by others")


def test_keyring_symlink_refused(keyring_file, tmp_path):
    link = tmp_path / "link.json"
    os.symlink(keyring_file, link)
    refused(link, "symbolic link", keyring_file)


def test_keyring_directory_refused(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    refused(d, "not a regular file")


def test_keyring_fifo_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    caught: list[BaseException] = []

    def run() -> None:
        try:
            FileKeyring(str(fifo))
        except BaseException as e:  # noqa: BLE001 - checked below
            caught.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "opening a FIFO as the keyring hung"
    assert len(caught) == 1 and isinstance(caught[0], KeyringError)
    assert "not a regular file" in str(caught[0]) and str(fifo) in str(caught[0])


def test_keyring_missing(tmp_path):
    refused(tmp_path / "nope.json", "does not exist")


@pytest.mark.parametrize("content, words", [
    ("{not json", ["is not valid JSON"]),
    ('["k1"]', ["holds a JSON list, not an object"]),
    ('{"k1": 5}', ["holds a JSON int for key 'k1'"]),
    ('{"k1": "not*base64!"}', ["key 'k1' that is not valid base64"]),
    (json.dumps({"k1": b64(bytes(31))}), ["key 'k1' of 31 bytes, not 32"]),
    (json.dumps({"k1": b64(bytes(33))}), ["key 'k1' of 33 bytes, not 32"]),
    (json.dumps({"bad id": b64(KEY)}), ["invalid key id 'bad id'"]),
    (json.dumps({"k" * 201: b64(KEY)}), ["invalid key id"]),
    ('{"k1": NaN}', ["is not valid JSON", "NaN"]),
], ids=["json", "list", "int", "base64", "31", "33", "space", "long", "nan"])
def test_keyring_bad_content(tmp_path, content, words):
    refused(write(tmp_path / "kr.json", content), *words)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_keyring_owned_by_another_uid(keyring_file):
    os.chown(keyring_file, 12345, -1)
    refused(keyring_file, "owned by uid 12345")


def test_keyring_get_missing_and_added_later(keyring_file):
    kr = FileKeyring(keyring_file)
    with pytest.raises(KeyUnavailable) as e:
        kr.get("k2")
    assert "'k2'" in str(e.value) and keyring_file in str(e.value)
    write(keyring_file, {"k1": b64(KEY), "k2": b64(OTHER_KEY)})
    assert kr.get("k2") == OTHER_KEY and kr.ids() == ["k1", "k2"]


def test_resolve_env(keyring_file, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert resolve(None) is None
    monkeypatch.setenv(ENV, "")
    assert resolve(None) is None
    monkeypatch.setenv(ENV, keyring_file)
    kr = resolve(None)
    assert isinstance(kr, FileKeyring) and kr.path == keyring_file and kr.get("k1") == KEY
    assert isinstance(resolve(keyring_file), FileKeyring)


def test_resolve_custom_keyring():
    class Failing:
        def get(self, key_id):
            raise RuntimeError("kms is down")

    kr = resolve(DictKeyring({"m1": bytearray(KEY), "short": bytes(16), "text": "x" * 32,
                              "none": None}))
    assert isinstance(kr, CustomKeyring)
    assert kr.get("m1") == KEY and type(kr.get("m1")) is bytes
    for kid, exc in (("missing", KeyUnavailable), ("none", KeyUnavailable),
                     ("short", KeyringError), ("text", KeyringError)):
        with pytest.raises(exc) as e:
            kr.get(kid)
        assert f"'{kid}'" in str(e.value)
        assert type(e.value) is exc  # (a KeyringError is not a KeyUnavailable)
    with pytest.raises(KeyUnavailable, match="'m9'.*RuntimeError: kms is down"):
        resolve(Failing()).get("m9")
    with pytest.raises(KeyringError, match="neither a file path nor an object"):
        resolve(42)


# ------------------------------------------------------------------ 2. wrapping
def test_wrap_round_trip():
    dk = os.urandom(32)
    w1 = ciphers.wrap(MASTERS["m1"], "m1", TOPIC_ID, 1, AES_GCM, dk)
    w2 = ciphers.wrap(MASTERS["m1"], "m1", TOPIC_ID, 1, AES_GCM, dk)
    assert len(w1) == len(w2) == ciphers.WRAPPED_BYTES == 60
    assert w1 != w2 and w1[:12] != w2[:12]  # a random nonce each time
    assert dk not in w1
    for w in (w1, w2):
        assert ciphers.unwrap(MASTERS["m1"], "m1", TOPIC_ID, 1, AES_GCM, w, "orders") == dk


@pytest.mark.parametrize("change", [{"master": MASTERS["m2"]}, {"topic_id": bytes(16)},
                                    {"version": 4}, {"cipher": CHACHA}, {"master_id": "m2"}],
                         ids=["master", "topic", "version", "cipher", "master_id"])
def test_unwrap_wrong_key_or_place(change):
    w = ciphers.wrap(MASTERS["m1"], "m1", TOPIC_ID, 3, AES_GCM, os.urandom(32))
    args = {"master": MASTERS["m1"], "master_id": "m1", "topic_id": TOPIC_ID, "version": 3,
            "cipher": AES_GCM, **change}
    with pytest.raises(WrongKey) as e:
        ciphers.unwrap(**args, wrapped=w, topic="orders")
    assert isinstance(e.value, KeyUnavailable)
    assert f"master key {args['master_id']!r}" in str(e.value) and "'orders'" in str(e.value)


# ------------------------------------------------------------------ 3. sealing batches
@pytest.mark.parametrize("cipher", [AES_GCM, CHACHA])
@pytest.mark.parametrize("codec", list(codecs.NAMES))
def test_seal_and_open(codec, cipher):
    pbuf = plain(codecs.NAMES[codec])
    ph = read_header(pbuf)
    stored = bytes(pbuf[HEADER_SIZE:HEADER_SIZE + ph.stored_length])
    if codec == "none":
        assert all(v in pbuf for v in VALUES)  # (so the check below means something)
    sbuf = seal(pbuf, version=7, cipher=cipher, key=KEY, partition=2)
    h = read_header(sbuf)
    check_crc(sbuf, 0, h)
    assert h.is_encrypted and h.key_version == 7 and ph.key_version == 0
    assert h.attributes == ph.attributes | ATTR_ENCRYPTED
    assert h.stored_length == ph.stored_length + sealed.SEAL_OVERHEAD == ph.stored_length + 44
    assert h.size == len(sbuf) and len(sbuf) % 8 == 0
    assert (h.base_offset, h.last_offset_delta, h.record_count, h.first_timestamp,
            h.max_timestamp, h.body_length, h.codec) == (
        ph.base_offset, ph.last_offset_delta, ph.record_count, ph.first_timestamp,
        ph.max_timestamp, ph.body_length, ph.codec)
    assert not any(v in sbuf for v in VALUES) and stored not in sbuf
    op = opener(cipher)
    opened = op.open_batch(sbuf, 0, h, 2)
    assert opened == stored
    assert sealed.plain_batch(sbuf, 0, opened) == pbuf
    body = body_of(sbuf, 0, h, "", lambda buf, pos, hh, where: op.open_batch(buf, pos, hh, 2, where))
    recs = decode_records(body, h, layout(body, h), partition=2)
    assert [(r.key, r.value, r.timestamp, r.offset, r.partition) for r in recs] == [
        (k, v, t, 100 + i, 2) for i, (k, v, t) in enumerate(zip(KEYS, VALUES, STAMPS))]
    check_body(sbuf, 0, h, "", lambda buf, pos, hh, where: op.open_batch(buf, pos, hh, 2, where))


def test_body_of_encrypted_without_opener():
    sbuf = seal(plain(), version=5)
    with pytest.raises(KeyUnavailable, match="encrypted .data key version 5.*--keyring"):
        body_of(sbuf, 0, read_header(sbuf))


def test_sealed_batch_at_a_position_in_a_segment():
    first, second = seal(plain(base=0)), seal(plain(base=N))
    seg = bytes(first + second)
    h = read_header(seg, len(first))
    check_crc(seg, len(first), h)
    stored = opener().open_batch(seg, len(first), h, 0)
    assert stored == plain(base=N)[HEADER_SIZE:HEADER_SIZE + h.stored_length - 44]


# ------------------------------------------------------------------ 4. tamper and relocation
@pytest.fixture(scope="module")
def sealed_batch() -> bytearray:
    return seal(plain(codecs.ZSTD), version=1)


def test_untampered_batch_opens(sealed_batch):
    pbuf = plain(codecs.ZSTD)
    assert open_sealed(sealed_batch) == pbuf[HEADER_SIZE:HEADER_SIZE + read_header(pbuf).stored_length]


FLIPS = {"salt": (SALT_AT + 3, 0), "nonce": (NONCE_AT, 0), "ciphertext": (CT_AT + 5, 2),
         "tag": (-1, 7), "base_offset": (0, 0), "reserved": (13, 0), "attributes": (21, 3),
         "key_version": (22, 1), "first_timestamp": (32, 0), "max_timestamp": (40, 0),
         "producer_id": (48, 0), "body_length": (64, 3)}


@pytest.mark.parametrize("where", list(FLIPS))
def test_tampered_batch_does_not_decrypt(sealed_batch, where):
    pos, bit = FLIPS[where]
    if where == "tag":  # the envelope's last byte
        pos = HEADER_SIZE + read_header(sealed_batch).stored_length - 1
    bad = flipped(sealed_batch, pos, bit)
    read_header(bad)  # (still a valid header: only the AEAD notices)
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(bad)


def test_changed_counts_do_not_decrypt(sealed_batch):
    bad = edited(edited(sealed_batch, "<i", 24, N - 2), "<i", 28, N - 1)  # one record fewer
    assert read_header(bad).record_count == N - 1
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(bad)


def test_opened_elsewhere_fails(sealed_batch):
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(sealed_batch, partition=1)
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(sealed_batch, op=opener(topic=bytes(16)))
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(sealed_batch, op=opener(key=OTHER_KEY))
    with pytest.raises(CorruptRecordError, match="does not decrypt"):
        open_sealed(sealed_batch, op=opener(cipher=CHACHA))


def test_moved_batch_fails(sealed_batch):
    moved = bytearray(sealed_batch)
    struct.pack_into("<q", moved, 0, 5000)
    sealed.finish(moved)
    h = read_header(moved)
    assert h.base_offset == 5000
    with pytest.raises(CorruptRecordError, match=r"offsets 5000\.\.5019 does not decrypt"):
        open_sealed(moved)


# ------------------------------------------------------------------ 5. read_header checks
def test_header_encrypted_with_key_version_0(sealed_batch):
    with pytest.raises(CorruptRecordError, match="encrypted batch with key version 0"):
        read_header(edited(sealed_batch, "<H", 22, 0))


def test_header_key_version_without_encrypted():
    with pytest.raises(CorruptRecordError, match="key version 3 in a batch that is not encrypted"):
        read_header(edited(plain(), "<H", 22, 3))
    with pytest.raises(CorruptRecordError, match="key version 1 in a batch that is not encrypted"):
        read_header(edited(seal(plain()), "<H", 20, read_header(plain()).attributes))


def test_header_encrypted_control_batch():
    marker = encode_marker(7, 0, True, 1000).assign(5)
    assert read_header(marker).is_control
    with pytest.raises(CorruptRecordError, match="encrypted control batch"):
        read_header(seal(marker))


def test_header_encrypted_stored_too_short():
    tiny = encode_batch([b""], [b""], 1000).assign(0)
    h = read_header(tiny)
    assert h.stored_length < sealed.SEAL_OVERHEAD
    bad = edited(edited(tiny, "<H", 20, h.attributes | ATTR_ENCRYPTED), "<H", 22, 1)
    with pytest.raises(CorruptRecordError, match="too short for an encrypted batch"):
        read_header(bad)


def test_header_sealed_transactional_batch_accepted():
    txn = encode_batch(KEYS, VALUES, 1000, producer_id=3, producer_epoch=1, base_sequence=0,
                       flags=0x10).assign(0)
    h = read_header(seal(txn, version=2))
    assert h.is_transactional and h.is_encrypted and h.key_version == 2 and h.producer_id == 3


# ------------------------------------------------------------------ 6. nonces never repeat
def test_nonces_distinct_across_threads():
    s = Sealer(1, AES_GCM, KEY)
    pbuf = bytes(plain())
    out: list[list[bytearray]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        out[i].extend(s.seal_batch(pbuf, TOPIC_ID, 0) for _ in range(250))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bufs = [b for part in out for b in part]
    pairs = [salt_nonce(b) for b in bufs]
    assert len(set(pairs)) == 1000
    assert {n for _, n in pairs} == set(range(1000))  # one session, counted 0..999
    op = opener()
    stored = pbuf[HEADER_SIZE:HEADER_SIZE + read_header(pbuf).stored_length]
    assert all(open_sealed(b, op=op) == stored for b in bufs)


def test_pickled_sealer_starts_its_own_session():
    s = Sealer(1, CHACHA, KEY)
    pbuf = plain()
    salt, n = salt_nonce(s.seal_batch(pbuf, TOPIC_ID, 0))
    copy = pickle.loads(pickle.dumps(s))
    assert (copy.version, copy.cipher) == (1, CHACHA)
    a, b = copy.seal_batch(pbuf, TOPIC_ID, 0), s.seal_batch(pbuf, TOPIC_ID, 0)
    assert salt_nonce(a)[0] != salt and salt_nonce(a)[1] == 0
    assert salt_nonce(b) == (salt, n + 1)
    op = opener(CHACHA)
    assert open_sealed(a, op=op) == open_sealed(b, op=op)


def test_forked_child_uses_a_new_salt():
    s = Sealer(1, AES_GCM, KEY)
    pbuf = plain()
    parent_salt = salt_nonce(s.seal_batch(pbuf, TOPIC_ID, 0))[0]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its sealed batch, and go
        code = 1
        try:
            os.close(r)
            data = bytes(s.seal_batch(pbuf, TOPIC_ID, 0))
            while data:
                data = data[os.write(w, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        child = bytearray(f.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child_salt, child_n = salt_nonce(child)
    assert child_salt != parent_salt and child_n == 0
    assert salt_nonce(s.seal_batch(pbuf, TOPIC_ID, 0)) == (parent_salt, 1)
    assert open_sealed(child) == open_sealed(seal(pbuf))


def test_session_ends_after_session_seals(monkeypatch):
    monkeypatch.setattr(crypto_batch, "SESSION_SEALS", 3)
    s = Sealer(1, AES_GCM, KEY)
    bufs = [s.seal_batch(plain(), TOPIC_ID, 0) for _ in range(7)]
    pairs = [salt_nonce(b) for b in bufs]
    salts = [p[0] for p in pairs]
    assert [p[1] for p in pairs] == [0, 1, 2, 0, 1, 2, 0]
    assert salts[0] == salts[2] != salts[3] == salts[5] != salts[6] and salts[0] != salts[6]
    op = opener()
    assert len({open_sealed(b, op=op) for b in bufs}) == 1


def test_session_ends_after_session_bytes(monkeypatch):
    monkeypatch.setattr(crypto_batch, "SESSION_BYTES", 1)
    s = Sealer(1, AES_GCM, KEY)
    pairs = [salt_nonce(s.seal_batch(plain(), TOPIC_ID, 0)) for _ in range(3)]
    assert len({p[0] for p in pairs}) == 3 and {p[1] for p in pairs} == {0}


def test_opener_session_cache_is_least_recently_used(monkeypatch):
    monkeypatch.setattr(crypto_batch, "MAX_OPEN_SESSIONS", 2)
    calls: list[int] = []
    op = Opener(TOPIC_ID, lambda v: calls.append(v) or (AES_GCM, KEY))
    a, b, c = (seal(plain()) for _ in range(3))  # three sessions (three sealers)
    for buf in (a, b, a, c, a):  # a is used last before c comes in: b goes, a stays
        open_sealed(buf, op=op)
    assert len(calls) == 3


# ------------------------------------------------------------------ 7. KeySet JSON
@pytest.fixture(scope="module")
def keyset() -> KeySet:
    ks = keyops.rotated(None, master, "m1", TOPIC_HEX, AES_GCM)
    return keyops.rotated(ks, master, "m2", TOPIC_HEX, CHACHA)


def test_keyset_json_round_trip(keyset):
    doc = json.loads(json.dumps(keyset.to_json()))
    assert doc["current"] == 2 and [v["version"] for v in doc["versions"]] == [1, 2]
    back = KeySet.from_json(doc, Bad)
    assert back == keyset and back.get(1) == keyset.get(1) and back.current_key.cipher == CHACHA
    assert back.to_json() == keyset.to_json()


def _drop(d: dict, name: str) -> None:
    del d[name]


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["versions"].reverse(), "ascending version order"),
    (lambda d: d["versions"][1].update(version=1), "ascending version order"),
    (lambda d: d["versions"][0].update(version=0), "version 0 is not an integer in 1..65535"),
    (lambda d: d["versions"][1].update(version=65536), "version 65536 is not an integer"),
    (lambda d: d["versions"][1].update(version=True), "version True is not an integer"),
    (lambda d: d.update(current=3), "keys.current 3 is not one of its versions"),
    (lambda d: d.update(current="2"), "keys.current '2' is not one of its versions"),
    (lambda d: d["versions"][0].update(cipher="aes-128-cbc"), "cipher 'aes-128-cbc' is not one"),
    (lambda d: d["versions"][0].update(wrapped=b64(bytes(59))), "wrapped is not base64 of 60"),
    (lambda d: d["versions"][0].update(wrapped=b64(bytes(61))), "wrapped is not base64 of 60"),
    (lambda d: d["versions"][0].update(wrapped="@" * 80), "wrapped is not base64 of 60"),
    (lambda d: d["versions"][0].update(wrapped=60), "wrapped is not base64 of 60"),
    (lambda d: d["versions"][0].update(master_key_id="a b"), "invalid master_key_id"),
    (lambda d: d["versions"][0].update(created_ms=-1), "created_ms -1 is not a time"),
    (lambda d: d["versions"][0].update(extra=1), "a data key is not an object of"),
    (lambda d: _drop(d["versions"][0], "created_ms"), "a data key is not an object of"),
    (lambda d: d.update(extra=1), "keys is not an object of current and versions"),
    (lambda d: _drop(d, "current"), "keys is not an object of current and versions"),
    (lambda d: d.update(versions=[]), "keys.versions is not a list of 1 to 65535"),
], ids=lambda p: p if isinstance(p, str) else "")
def test_keyset_json_rejects(keyset, edit, words):
    doc = json.loads(json.dumps(keyset.to_json()))
    edit(doc)
    with pytest.raises(Bad) as e:
        KeySet.from_json(doc, Bad)
    assert words in str(e.value)


# ------------------------------------------------------------------ 8. keyops
def test_rotated(keyset):
    first = keyops.rotated(None, master, "m1", TOPIC_HEX, AES_GCM)
    assert first.current == 1 and [(k.version, k.cipher, k.master_key_id) for k in first.versions
                                   ] == [(1, AES_GCM, "m1")]
    assert first.get(1).wrapped != keyset.get(1).wrapped  # (a fresh data key each time)
    assert keyset.current == 2 and keyset.current_key is keyset.get(2)
    assert [(k.version, k.cipher, k.master_key_id) for k in keyset.versions] == [
        (1, AES_GCM, "m1"), (2, CHACHA, "m2")]
    assert len({unwrapped(keyset, 1), unwrapped(keyset, 2)}) == 2
    third = keyops.rotated(keyset, master, "m1", TOPIC_HEX, AES_GCM)
    assert third.current == 3 and third.versions[:2] == keyset.versions


def test_rewrapped_keeps_data_keys(keyset):
    moved = keyops.rewrapped(keyset, master, "m2", "t", TOPIC_HEX)
    assert moved.current == keyset.current
    assert [(k.version, k.cipher, k.created_ms) for k in moved.versions] == [
        (k.version, k.cipher, k.created_ms) for k in keyset.versions]
    assert {k.master_key_id for k in moved.versions} == {"m2"}
    assert moved.get(1).wrapped != keyset.get(1).wrapped and moved.get(2) == keyset.get(2)
    for v in (1, 2):
        assert unwrapped(moved, v) == unwrapped(keyset, v)
    with pytest.raises(WrongKey):  # the old wrap is gone: m2 opens it, m1 does not
        ciphers.unwrap(MASTERS["m1"], "m2", TOPIC_ID, 1, AES_GCM, moved.get(1).wrapped, "t")


def test_for_config(keyset):
    def cfg(keys, enabled=True, master_id="m2", cipher=CHACHA):
        return keyops.for_config(keys, enabled, master_id, cipher, master, "t", TOPIC_HEX)

    assert cfg(None, enabled=False) is None
    assert cfg(None, master_id="m1", cipher=AES_GCM).current == 1
    base = keyops.rewrapped(keyset, master, "m2", "t", TOPIC_HEX)
    assert cfg(base) == base  # nothing changed: the same key set
    assert cfg(base, enabled=False) == base
    rotated = cfg(base, cipher=AES_GCM)
    assert rotated.current == 3 and rotated.current_key.cipher == AES_GCM
    assert rotated.versions[:2] == base.versions and rotated.current_key.master_key_id == "m2"
    rewrapped = cfg(base, master_id="m1")
    assert rewrapped.current == 2 and {k.master_key_id for k in rewrapped.versions} == {"m1"}
    assert [unwrapped(rewrapped, v) for v in (1, 2)] == [unwrapped(base, v) for v in (1, 2)]


# ------------------------------------------------------------------ 9. TopicKeys
def topic_keys(keyring, ks: KeySet, name: str = "orders") -> TopicKeys:
    return TopicKeys(name, TOPIC_HEX, ks, keyring)


def test_topic_keys_seal_and_open(keyset):
    tk = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset)
    sbuf = tk.seal_batch(plain(), 4)
    h = read_header(sbuf)
    assert h.key_version == 2
    op = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset).opener_for(4)
    body = body_of(sbuf, 0, h, "", op)
    assert [r.value for r in decode_records(body, h, layout(body, h))] == VALUES
    with pytest.raises(CorruptRecordError):
        tk.open_batch(sbuf, 0, h, partition=3)


def test_topic_keys_without_keyring(keyset):
    sbuf = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset).seal_batch(plain(), 0)
    with pytest.raises(KeyUnavailable) as e:
        topic_keys(None, keyset).open_batch(sbuf, 0, read_header(sbuf))
    assert "'m2'" in str(e.value) and "--keyring" in str(e.value) and "'orders'" in str(e.value)


def test_topic_keys_keyring_lacks_master(keyset, keyring_file):
    with pytest.raises(KeyUnavailable) as e:
        topic_keys(FileKeyring(keyring_file), keyset).sealer()
    assert "'m2'" in str(e.value) and keyring_file in str(e.value)
    assert type(e.value) is KeyUnavailable


def test_topic_keys_wrong_master(keyset):
    wrong = CustomKeyring(DictKeyring({"m1": MASTERS["m1"], "m2": MASTERS["m1"]}))
    with pytest.raises(WrongKey, match="master key 'm2'.*topic 'orders'"):
        topic_keys(wrong, keyset).sealer()


def test_static_keys_survive_pickling(keyset):
    tk = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset)
    static = pickle.loads(pickle.dumps(tk.portable()))
    assert isinstance(static, StaticKeys) and static.current == 2 and sorted(static.keys) == [1, 2]
    by_tk, by_static = tk.seal_batch(plain(), 1), static.seal_batch(plain(), 1)
    assert salt_nonce(by_tk)[0] != salt_nonce(by_static)[0]
    for buf in (by_tk, by_static):
        h = read_header(buf)
        assert h.key_version == 2
        assert static.opener_for(1)(buf, 0, h, "") == tk.opener_for(1)(buf, 0, h, "")
    v1 = StaticKeys(tk.id, {1: tk.key_of(1)}, 1)  # (handed version 1 only)
    with pytest.raises(KeyUnavailable, match="version 2"):
        v1.opener_for(1)(by_tk, 0, read_header(by_tk), "")


def test_seal_text_round_trip(keyset):
    tk = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset)
    ctx = metadata_context("g1", 3, 42)
    doc = tk.seal_text("checkpoint ünïcode", ctx)
    assert set(doc) == {"v", "s"} and doc["v"] == 2
    assert b"checkpoint" not in base64.b64decode(doc["s"])
    assert tk.open_text(doc, ctx, "the metadata") == "checkpoint ünïcode"
    for other in (metadata_context("g2", 3, 42), metadata_context("g1", 4, 42),
                  metadata_context("g1", 3, 43)):
        with pytest.raises(CorruptRecordError, match="the metadata does not decrypt"):
            tk.open_text(doc, other, "the metadata")
    with pytest.raises(CorruptRecordError, match="too short"):
        tk.open_text({"v": 2, "s": b64(bytes(10))}, ctx, "the metadata")


def test_open_text_damaged_base64_is_corrupt(keyset):
    tk = topic_keys(CustomKeyring(DictKeyring(MASTERS)), keyset)
    with pytest.raises(CorruptRecordError):
        tk.open_text({"v": 2, "s": "abc"}, metadata_context("g1", 0, 0), "the metadata")
