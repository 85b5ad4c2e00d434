"""The per-partition tier manifest ``tier.json``: which offsets live in the cold store, where.

Written whole and atomically, as part of a segment swap (PartitionLog.set_tier), by the one
process holding the partition's ``.tier.lock``; read by anyone without a lock (old file or new,
never a mix). An entry is added only after its cold copy is verified, and a local segment is
deleted only after its entry is in the file: a crash never leaves offsets that are neither
local nor in here.

Nothing read from the file is trusted. Version 2 is sealed with a CRC32C (engine.fs.jsondoc);
version 1 (unsealed, written by older rivvens) is still read. Every entry must name an object
inside the partition's own cold prefix, ``<store>/<topic>-<topic id>/partition-<p>``, for the
configured store or one the sealed file recorded when it was written (``prefixes``: stores the
topic was tiered to before ``remote.storage.uri`` changed): a manifest naming anything else is
DamagedMetadata, so reads, restores, retention and topic deletion never act on it. The check
runs where the file is loaded (once per change of the file), never per read.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import DamagedMetadata, RivvenError
from ..format.crc import crc32c
from ..fs import jsondoc
from . import filenames

MANIFEST = "tier.json"
TIER_LOCK = ".tier.lock"
VERSION = 2
LEGACY_KEYS = ("version", "segments")  # version 1: no checksum, no recorded prefixes
SUFFIXES = filenames.SEGMENT_FILES  # the files every cold segment is copied as
ALL_SUFFIXES = SUFFIXES + filenames.OPTIONAL_FILES  # ... and those some are (ColdSegment.suffixes)
WHAT = "tier manifest"
FIX = "the cold copies are intact: restore the file from a backup"
MAX_PREFIXES = 1000
# an object's name in its prefix: the segment's base offset, 8 random hex digits per upload
NAME = re.compile(r"([0-9]{20})-[0-9a-f]{8}")
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*)://(.*)", re.S)
_UNSAFE = re.compile(r"[%?#\\\x00-\x1f\x7f]")  # escapes, queries: never in a record
_TOPIC_ID = re.compile(r"[0-9a-f]{32}")

CRC_MAX = 0xFFFFFFFF
INTS = ("base_offset", "next_offset", "bytes", "crc32c", "max_timestamp", "index_bytes",
        "index_crc32c", "timeindex_bytes", "timeindex_crc32c", "uploaded_ms")
OPTIONAL_INTS = ("txnindex_bytes", "txnindex_crc32c")  # only an entry with a .txnindex has them


@dataclass(frozen=True)
class ColdSegment:
    base_offset: int
    next_offset: int  # one past the last offset the segment covers
    bytes: int
    crc32c: int
    max_timestamp: int
    index_bytes: int
    index_crc32c: int
    timeindex_bytes: int
    timeindex_crc32c: int
    object: str  # URI of the copy without suffix: object + ".log" / ".index" / ".timeindex"
    uploaded_ms: int
    txnindex_bytes: int = 0  # 0: the segment has no .txnindex (no aborted transaction)
    txnindex_crc32c: int = 0
    # bytes of its data batches per data key version (0: plaintext), ascending by version;
    # empty: all plaintext (every segment tiered before encryption existed)
    key_bytes: tuple[tuple[int, int], ...] = ()

    def key_usage(self) -> dict[int, int]:
        """``{data key version (0: plaintext): bytes}`` of the segment's data batches."""
        return dict(self.key_bytes) if self.key_bytes else {0: self.bytes}

    def url(self, suffix: str) -> str:
        return self.object + suffix

    def suffixes(self) -> tuple[str, ...]:
        """The files this segment's copy is made of: the three, and its ``.txnindex``."""
        return ALL_SUFFIXES if self.txnindex_bytes else SUFFIXES

    def expected(self, suffix: str) -> tuple[int, int]:
        """(bytes, crc32c) the manifest records for one of its files."""
        if suffix == filenames.LOG:
            return self.bytes, self.crc32c
        if suffix == filenames.INDEX:
            return self.index_bytes, self.index_crc32c
        if suffix == filenames.TXNINDEX:
            return self.txnindex_bytes, self.txnindex_crc32c
        return self.timeindex_bytes, self.timeindex_crc32c


@dataclass(frozen=True)
class Home:
    """Where one partition's cold objects may lie. ``prefix`` is the configured one,
    ``<store>/<topic>-<topic id>/partition-<p>``; a prefix recorded in the manifest may have
    another store but must end in the same ``tail``."""

    topic: str
    topic_id: str  # 32 hex digits (topics.json)
    partition: int
    prefix: str

    @property
    def tail(self) -> str:
        return f"/{cold_dir_name(self.topic, self.topic_id)}/partition-{self.partition}"

    @property
    def tails(self) -> tuple[str, ...]:
        """``tail``, and for a topic name too long to keep whole the uncut form too (a
        store without a name-length limit may have been given it before names were cut)."""
        whole = f"/{self.topic}-{self.topic_id}/partition-{self.partition}"
        return (self.tail,) if whole == self.tail else (self.tail, whole)

    def topic_prefix(self, prefix: str) -> str:
        """``<store>/<topic>-<topic id>`` of one of this partition's prefixes."""
        return prefix[:-len(f"/partition-{self.partition}")]

    def owns_prefix(self, prefix: Any) -> bool:
        """The configured prefix, or a canonical ``<store><tail>`` (see ``canonical_store``)."""
        if prefix == self.prefix:
            return True
        return isinstance(prefix, str) and any(
            prefix.endswith(tail) and canonical_store(prefix[:-len(tail)]) for tail in self.tails)


MAX_NAME_BYTES = 255  # one path component, on the local filesystems a file:// store uses


def cold_dir_name(topic: str, topic_id: str) -> str:
    """``<topic>-<topic id>``, a topic's folder in the cold store. Topic names reach 249
    characters, which with the id is more than a local filesystem allows in one name: the
    topic part is cut to fit (the id keeps topics apart; the name is only for people)."""
    return f"{topic[:MAX_NAME_BYTES - 1 - len(topic_id)]}-{topic_id}"


def canonical_store(store: str) -> bool:
    """True for a store URI in plain form: a lower-case scheme, no percent escapes, query,
    fragment, backslash or control character, no empty, ``.`` or ``..`` segment
    (``file://`` only with an absolute local path). Then ``<store>/<name>`` lies in a child
    of the store named ``<name>``, whatever the scheme does with escapes."""
    m = _SCHEME.fullmatch(store)
    if m is None or _UNSAFE.search(store):
        return False
    scheme, rest = m.groups()
    segs = rest.split("/")
    if scheme == "file":
        if segs[0] != "":  # file:///path only: no host
            return False
        segs = segs[1:]
    return all(s not in ("", ".", "..") for s in segs)


def default_store(data_dir: str) -> str:
    """The cold store of a topic without ``remote.storage.uri``: ``file://DATA_DIR/cold``."""
    return "file://" + os.path.join(os.path.abspath(data_dir), "cold")


def home(data_dir: str, topic: str, topic_id: str, partition: int, store: str = "") -> Home:
    """A partition's Home; ``store`` is ``remote.storage.uri`` (empty: the default)."""
    store = store or default_store(data_dir)
    if not _TOPIC_ID.fullmatch(topic_id):
        raise DamagedMetadata(f"topic {topic!r} has the id {topic_id[:80]!r} in the topic "
                              "catalog, not 32 hex digits: the catalog is damaged; restore it "
                              "from a backup")
    if "?" in store or "#" in store:  # (a URI's path would end there, cutting off the topic)
        raise RivvenError(f"remote.storage.uri {store!r} of topic {topic!r} holds '?' or '#': "
                          "set a URI without them with 'rivven topic alter-config'")
    return Home(topic, topic_id, partition,
                f"{store}/{cold_dir_name(topic, topic_id)}/partition-{partition}")


def path(pdir: str) -> str:
    return os.path.join(pdir, MANIFEST)


def stamp(pdir: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path(pdir))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@dataclass(frozen=True)
class Manifest:
    entries: list[ColdSegment]  # oldest first
    prefixes: list[str]  # where entries may lie: recorded (v2) or the configured one


def load(pdir: str, where: Home) -> list[ColdSegment]:
    """The entries, oldest first; [] when there is no manifest. ``where``: the partition's
    Home (``PartitionLog.tier_home()``, or ``engine.storage.catalog.home_of``). Raises
    DamagedMetadata (see ``read``)."""
    return read(pdir, where).entries


def read(pdir: str, where: Home) -> Manifest:
    """The manifest, checked: its seal (version 2), every value, and every object inside one
    of the partition's prefixes. DamagedMetadata naming the file and the entry otherwise."""
    p = path(pdir)
    raw = jsondoc.read(p, WHAT, fix=FIX)
    if raw is None:
        return Manifest([], [])
    return parse(raw, p, where)


def parse(raw: bytes, p: str, where: Home) -> Manifest:
    doc = jsondoc.loads(raw, p, WHAT, FIX)
    sealed = not isinstance(doc, dict) or jsondoc.CRC_KEY in doc
    if sealed:  # version 2 (a version 1 file never has a checksum)
        doc = jsondoc.unseal(raw, p, WHAT, FIX)
    else:  # an older rivven's version 1 (or damage: then its keys differ)
        doc = jsondoc.unseal(raw, p, WHAT, FIX, legacy=LEGACY_KEYS)
    version = jsondoc.get_int(doc, "version", p, WHAT, fix=FIX)
    if version != (VERSION if sealed else 1):
        raise jsondoc.damaged(p, WHAT, f"version {version} "
                              f"{'with' if sealed else 'without'} a checksum", FIX)
    if sealed and set(doc) != {"version", "prefixes", "segments"}:
        raise jsondoc.damaged(p, WHAT, f"unexpected keys {sorted(doc)}", FIX)
    segments = doc["segments"]
    if not isinstance(segments, list):
        raise jsondoc.damaged(p, WHAT, "segments is not a list", FIX)
    entries = [_entry(e, p) for e in segments]
    for a, b in zip(entries, entries[1:]):
        if b.base_offset < a.next_offset:
            raise jsondoc.damaged(p, WHAT, f"segments at {a.base_offset} and {b.base_offset} "
                                  "overlap", FIX)
    recorded = doc.get("prefixes", [])
    if not isinstance(recorded, list) or len(recorded) > MAX_PREFIXES or \
            not all(isinstance(pre, str) for pre in recorded):
        raise jsondoc.damaged(p, WHAT, f"prefixes is not a list of at most {MAX_PREFIXES} "
                              "strings", FIX)
    # version 1 recorded nothing: the prefixes its entries use are checked the same way
    allowed = set(recorded) if sealed else {e.object.rpartition("/")[0] for e in entries}
    allowed.add(where.prefix)
    for e in entries:
        if not (_inside(e, allowed) and where.owns_prefix(e.object.rpartition("/")[0])):
            raise outside(p, where, f"names the object {_shown(e.object)} for the segment at "
                          f"{e.base_offset}")
    for pre in recorded:
        if not where.owns_prefix(pre):
            raise outside(p, where, f"records the prefix {_shown(pre)}")
    return Manifest(entries, sorted(allowed))


def outside(p: str, where: Home, what: str) -> DamagedMetadata:
    return DamagedMetadata(
        f"tier manifest {p} is damaged: it {what}, outside {where.topic}-{where.partition}'s "
        f"cold prefix {where.prefix}/; nothing it names was read or deleted: restore the file "
        "from a backup, or check what it names by hand", p)


def _inside(e: ColdSegment, allowed: set[str]) -> bool:
    parent, _, name = e.object.rpartition("/")
    m = NAME.fullmatch(name)
    return parent in allowed and m is not None and int(m.group(1)) == e.base_offset


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 300 else text[:300] + "..."


def _entry(e: Any, p: str) -> ColdSegment:
    if not isinstance(e, dict):
        raise jsondoc.damaged(p, WHAT, "a segment entry is not an object", FIX)
    ints = {k: jsondoc.get_int(e, k, p, WHAT, lo=-1 if k == "max_timestamp" else 0,
                               hi=CRC_MAX if k.endswith("crc32c") else jsondoc.MAX_INT, fix=FIX)
            for k in INTS + tuple(k for k in OPTIONAL_INTS if k in e)}
    obj = jsondoc.get_str(e, "object", p, WHAT, fix=FIX)
    if ints["next_offset"] <= ints["base_offset"]:
        raise jsondoc.damaged(p, WHAT, f"bad entry at base offset {ints['base_offset']}", FIX)
    return ColdSegment(object=obj, key_bytes=_key_bytes(e.get("key_bytes", []), p), **ints)


def _key_bytes(v: Any, p: str) -> tuple[tuple[int, int], ...]:
    """An entry's ``key_bytes``: ``[[version, bytes], ...]``, versions 0-65535 ascending."""
    ok = isinstance(v, list) and len(v) <= 1 << 16 and all(
        isinstance(x, list) and len(x) == 2 and all(type(n) is int for n in x)
        and 0 <= x[0] <= 0xFFFF and 0 <= x[1] <= jsondoc.MAX_INT for x in v)
    if not ok or any(b[0] <= a[0] for a, b in zip(v, v[1:])):
        raise jsondoc.damaged(p, WHAT, "key_bytes is not a list of [key version, bytes] in "
                              "ascending version order", FIX)
    return tuple((a, b) for a, b in v)


def _recorded(e: ColdSegment) -> dict[str, Any]:
    """An entry as the file records it: the optional fields only when it has them."""
    d = asdict(e)
    if not e.txnindex_bytes:
        for k in OPTIONAL_INTS:
            del d[k]
    if e.key_bytes:
        d["key_bytes"] = [list(x) for x in e.key_bytes]
    else:
        del d["key_bytes"]
    return d


def document(entries: list[ColdSegment], where: Home) -> dict:
    """The file's sealed JSON document for ``entries`` (written by PartitionLog.set_tier and
    restore): version 2, the prefixes in use (the configured one and those of the entries),
    the segments, the CRC32C of all that."""
    entries = sorted(entries, key=lambda e: e.base_offset)
    prefixes = sorted({where.prefix} | {e.object.rpartition("/")[0] for e in entries})
    for pre in prefixes:  # (the entries come from a checked manifest or this partition's plan)
        if not where.owns_prefix(pre):
            raise RivvenError(f"refusing to record the cold prefix {pre!r} for "
                              f"{where.topic}-{where.partition}: it is not {where.prefix}")
    for e in entries:
        if not _inside(e, set(prefixes)):
            raise RivvenError(f"refusing to record the cold object {e.object!r} for the "
                              f"segment at {e.base_offset}: not a name rivven gives")
    doc: dict[str, Any] = {"version": VERSION, "prefixes": prefixes,
                           "segments": [_recorded(e) for e in entries]}
    doc[jsondoc.CRC_KEY] = crc32c(jsondoc.canonical(doc))
    return doc
