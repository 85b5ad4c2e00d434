"""Compression codecs behind one small interface: ``compress(data)`` and bounded ``decompress``.

Codec ids are stored in the low three bits of a batch's attributes (see docs/FORMAT.md).
Every ``decompress`` is told the exact uncompressed size written in the batch header and refuses
to produce more, so a damaged or hostile batch cannot make the reader allocate without bound.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from ..errors import CorruptRecordError, InvalidArgument, plural

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
IDS = {v: k for k, v in NAMES.items()}

# The codec libraries are imported on first use: ``rivven topic list`` never pays for them.


def _lz4() -> Any:
    import lz4.frame

    return lz4.frame


def _snappy() -> Any:
    import snappy

    return snappy


def _zstd() -> Any:
    import zstandard

    return zstandard


def codec_id(name: str | None) -> int:
    """Map a codec name (``none gzip snappy lz4 zstd``, any case) to its id."""
    if name is None:
        return NONE
    try:
        return NAMES[name.strip().lower()]
    except KeyError:
        raise InvalidArgument(
            f"unknown compression {name!r}: use one of {', '.join(NAMES)}"
        ) from None


def _gzip_c(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_d(data: bytes, size: int) -> bytes:
    d = zlib.decompressobj(31)
    out = d.decompress(data, size + 1)
    return out


def _snappy_d(data: bytes, size: int) -> bytes:
    # The snappy preamble states the uncompressed length; check it before allocating.
    declared = snappy_declared_len(data)
    if declared != size:
        raise ValueError(f"snappy stream declares {plural(declared, 'byte')}, header says {size}")
    return _snappy().uncompress(data)


def snappy_declared_len(data: bytes) -> int:
    result = shift = 0
    for i in range(min(5, len(data))):
        b = data[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise ValueError("bad snappy preamble")


def _lz4_d(data: bytes, size: int) -> bytes:
    d = _lz4().LZ4FrameDecompressor()
    return d.decompress(data, max_length=size + 1)


def _zstd_d_bounded(data: bytes, size: int) -> bytes:
    zstd = _zstd()
    declared = zstd.frame_content_size(data)
    if declared != size:
        raise ValueError(f"zstd frame declares {plural(declared, 'byte')}, header says {size}")
    return zstd.ZstdDecompressor().decompress(data)


_COMPRESS: dict[int, Callable[[bytes], bytes]] = {
    GZIP: _gzip_c,
    SNAPPY: lambda b: _snappy().compress(b),
    LZ4: lambda b: _lz4().compress(b, store_size=True),
    ZSTD: lambda b: _zstd().ZstdCompressor(level=3).compress(b),
}
_DECOMPRESS: dict[int, Callable[[bytes, int], bytes]] = {
    GZIP: _gzip_d,
    SNAPPY: _snappy_d,
    LZ4: _lz4_d,
    ZSTD: _zstd_d_bounded,
}


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    return _COMPRESS[codec](data)


def decompress(codec: int, data: bytes, size: int, where: str = "") -> bytes:
    """Decompress ``data`` that must expand to exactly ``size`` bytes."""
    if codec == NONE:
        return data
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise CorruptRecordError(f"unknown codec id {codec}{where}")
    try:
        out = fn(bytes(data), size)
    except CorruptRecordError:
        raise
    except Exception as e:  # every codec library has its own error types
        raise CorruptRecordError(f"cannot decompress {IDS[codec]} body{where}: {e}") from None
    if len(out) != size:
        raise CorruptRecordError(
            f"{IDS[codec]} body expands to {plural(len(out), 'byte')}, header says {size}{where}"
        )
    return out
