"""Strict JSON for the data dir's metadata files, optionally sealed with a CRC32C.

Everything read from disk is untrusted: ``loads`` refuses NaN/Infinity, nesting too deep to
parse and bytes that are not UTF-8, and raises ``DamagedMetadata`` naming the file;
the typed getters check a value's type and range before a caller uses it.

A sealed document (``seal``/``unseal``) carries ``"crc32c"``: the CRC32C of the document
without that key in canonical form (sorted keys, no spaces, ASCII). A flipped bit anywhere in
the file either breaks the JSON or fails the CRC. ``unseal(..., legacy=KEYS)`` also accepts a
file written before seals existed: exactly the keys ``KEYS`` and no ``crc32c``/``version``,
which a single flipped bit of a sealed file cannot produce.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from typing import Any

from ..errors import DamagedMetadata
from ..format.crc import crc32c

CRC_KEY = "crc32c"
MAX_INT = (1 << 63) - 1


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # (made once: loads is hot)


def loads(raw: bytes, path: str, what: str = "file", fix: str = "") -> Any:
    """Parse ``raw`` (the bytes of ``path``) strictly; DamagedMetadata on anything odd."""
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except RecursionError:
        raise damaged(path, what, "nested too deeply", fix) from None
    except ValueError as e:  # (UnicodeDecodeError and too many digits are ValueErrors)
        raise damaged(path, what, str(e), fix) from None


def damaged(path: str, what: str, reason: str, fix: str = "") -> DamagedMetadata:
    reason = reason if len(reason) <= 200 else reason[:200] + "..."
    return DamagedMetadata(f"{what} {path} is damaged ({reason})" + (f"; {fix}" if fix else ""),
                           path)


def canonical(doc: Mapping[str, Any]) -> bytes:
    if all(type(v) is int and type(k) is str and k.isidentifier() and k.isascii()
           for k, v in doc.items()):  # (a checkpoint: json.dumps's bytes, 10x faster)
        return ("{" + ",".join([f'"{k}":{doc[k]}' for k in sorted(doc)]) + "}").encode()
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def seal(doc: Mapping[str, Any], indent: int | None = None) -> bytes:
    """``doc`` as JSON bytes with its ``crc32c``."""
    body = {k: v for k, v in doc.items() if k != CRC_KEY}
    sealed = dict(body, **{CRC_KEY: crc32c(canonical(body))})
    return json.dumps(sealed, indent=indent, ensure_ascii=True).encode()


def unseal(raw: bytes, path: str, what: str, fix: str = "",
           legacy: Collection[str] | None = None) -> dict:
    """The document of a sealed file, its CRC checked (DamagedMetadata otherwise)."""
    doc = loads(raw, path, what, fix)
    if not isinstance(doc, dict):
        raise damaged(path, what, f"a JSON {type(doc).__name__} where an object belongs", fix)
    if CRC_KEY not in doc:
        if legacy is not None and set(doc) == set(legacy):
            return doc
        raise damaged(path, what, f"no {CRC_KEY} checksum", fix)
    stored = doc.pop(CRC_KEY)
    if not isinstance(stored, int) or isinstance(stored, bool) or crc32c(canonical(doc)) != stored:
        raise damaged(path, what, "checksum mismatch", fix)
    return doc


def get_int(doc: dict, key: str, path: str, what: str, lo: int = 0, hi: int = MAX_INT,
            fix: str = "") -> int:
    """``doc[key]`` as an int in ``[lo, hi]`` (not a bool, not a float)."""
    v = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise damaged(path, what, f"{key} is {_shown(v)}, not an integer in {lo}..{hi}", fix)
    return v


def get_str(doc: dict, key: str, path: str, what: str, max_len: int = 4096,
            fix: str = "") -> str:
    v = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(v, str) or len(v) > max_len:
        raise damaged(path, what, f"{key} is {_shown(v)}, not a string of at most {max_len} "
                      "characters", fix)
    return v


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:40] + "..."


def read(path: str, what: str, limit: int = 64 << 20, fix: str = "") -> bytes | None:
    """The bytes of a metadata file, None when it does not exist; DamagedMetadata when it is
    larger than ``limit`` (never read whole a file a crafted size could make huge)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        got = 0
        while got <= limit:
            want = min(limit + 1 - got, 1 << 20)
            chunk = os.read(fd, want)
            chunks.append(chunk)
            got += len(chunk)
            if len(chunk) < want:  # (a regular file's short read is its end)
                break
    except IsADirectoryError:
        raise damaged(path, what, "a directory where a file belongs", fix) from None
    finally:
        os.close(fd)
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(raw) > limit:
        raise damaged(path, what, f"larger than {limit} bytes", fix)
    return raw


def shown(v: Any) -> str:
    """``v`` for an error message: its repr, cut to 40 characters."""
    return _shown(v)
