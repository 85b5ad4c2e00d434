"""The cold store: whole files copied to and from any fsspec URI, each with its CRC32C.

``file://`` (the embedded default, ``file://<data dir>/cold``) is served by plain OS calls:
a copy goes to a temporary name, is fdatasynced and renamed, so a crash never leaves a
half-written object under its final name. Other schemes (``s3://``, ``gs://``, ``hdfs://`` ...)
go through fsspec and need its backend installed (``pip install 'rivven[s3]'`` and so on);
an object store's PUT is atomic and durable by itself. Objects are never overwritten: every
upload gets a fresh name (see engine.tiering), so a verified copy never changes under a reader.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import ColdObjectError, InvalidConfig, RivvenError, StorageError
from ..format import crc
from ..fs import durable, guard
from ..segments import tier_manifest
from ..storage.config import validate

CHUNK = 8 << 20

EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "hdfs": "hdfs", "abfs": "azure",
          "az": "azure"}


def default_uri(data_dir: str) -> str:
    return tier_manifest.default_store(data_dir)


def local_path(uri: str) -> str | None:
    """The path of a ``file://`` URI, else None."""
    if uri.startswith("file://"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise RivvenError(f"{uri}: file:// URIs must name a local path (file:///path)")
        if "?" in uri or "#" in uri:  # (the path would end there: another file than named)
            raise RivvenError(f"{uri}: a file:// URI of the cold store cannot hold '?' or '#'")
        return unquote(parts.path)
    if "://" not in uri:
        return uri
    return None


_FS: dict[str, Any] = {}


def _fs(uri: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) of a non-local URI."""
    scheme = uri.split("://", 1)[0]
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError:
        raise RivvenError("the cold store needs fsspec: pip install fsspec") from None
    fs = _FS.get(scheme)
    try:
        if fs is None:
            fs, path = url_to_fs(uri)
            _FS[scheme] = fs
        else:
            path = fs._strip_protocol(uri)
    except (ImportError, ValueError) as e:
        extra = EXTRAS.get(scheme)
        hint = f"pip install 'rivven[{extra}]'" if extra else \
            f"install the fsspec backend for {scheme}://"
        raise RivvenError(f"cannot open the cold store {uri}: {e}; {hint}") from None
    del fsspec
    return fs, path


def check_config_store(config: dict[str, str]) -> None:
    """``check_store`` of the ``remote.storage.uri`` a topic config sets, if it sets one (its
    form checked first: engine.storage.config)."""
    uri = config.get("remote.storage.uri")
    if uri and uri.strip():
        check_store(validate({"remote.storage.uri": uri})["remote.storage.uri"])


def remove_trees(prefixes: Iterable[str]) -> None:
    """Every object under each of ``prefixes``, best effort (a deleted topic's: the
    manifests that named them are gone with it)."""
    for prefix in sorted(prefixes):
        with contextlib.suppress(RivvenError, OSError):
            remove_tree(prefix)


def check_store(uri: str) -> None:
    """A ``remote.storage.uri`` checked when it is set (not when tiering first runs): the
    plain form tiering requires (``tier_manifest.canonical_store``) and a backend installed
    for its scheme, without connecting to it. Raises InvalidConfig naming the fix."""
    if not tier_manifest.canonical_store(uri):
        raise InvalidConfig(
            f"remote.storage.uri {uri!r} is not a plain URI: the cold store takes no '?', '#', "
            "percent escapes, backslashes or empty, '.' or '..' segments, and file:// only "
            "with an absolute path (file:///mnt/cold, s3://bucket/prefix)")
    scheme = uri.split("://", 1)[0]
    if scheme == "file":
        return
    extra = EXTRAS.get(scheme)
    try:
        from fsspec.registry import get_filesystem_class
    except ImportError:
        raise InvalidConfig("the cold store needs fsspec: pip install fsspec") from None
    try:
        get_filesystem_class(scheme)
    except ValueError:
        raise InvalidConfig(
            f"remote.storage.uri {uri!r}: no cold-store backend knows the scheme {scheme}:// "
            f"(fsspec's, e.g. file://, s3://, gs://, abfs://, hdfs://)") from None
    except ImportError as e:
        hint = f"pip install 'rivven[{extra}]'" if extra else \
            f"install the fsspec backend for {scheme}://"
        raise InvalidConfig(f"remote.storage.uri {uri!r}: the backend for {scheme}:// is not "
                            f"installed ({e}): {hint}") from None


def check(uri: str) -> None:
    """Fail now, with the fix, when the store's fsspec backend is not installed."""
    if local_path(uri) is None:
        _fs(uri)


def put(src: str, uri: str) -> tuple[int, int]:
    """Copy the local file ``src`` to ``uri`` durably; returns (bytes, crc32c of the bytes)."""
    dest = local_path(uri)
    try:
        with open(src, "rb", buffering=0) as fin:
            if dest is not None:
                return _put_local(fin, dest)
            fs, path = _fs(uri)
            with fs.open(path, "wb") as out:
                return _copy(fin, out.write)
    except OSError as e:
        raise StorageError(f"copying {src} to the cold store {uri} failed: {e}") from e


def _chunks(f: Any) -> Any:
    if not hasattr(f, "readinto"):  # (some fsspec files only read)
        yield from iter(lambda: f.read(CHUNK), b"")
        return
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = f.readinto(buf)
        if not n:
            return
        yield view[:n]


def _copy(f: Any, write: Any = None) -> tuple[int, int]:
    """Read ``f`` to its end, passing each chunk to ``write``; returns (bytes, crc32c)."""
    size = value = 0
    for chunk in _chunks(f):
        value = crc.crc32c(chunk, value)
        size += len(chunk)
        if write is not None:
            write(chunk)
    return size, value


def _put_local(fin: Any, dest: str) -> tuple[int, int]:
    guard.make_path(os.path.dirname(dest))
    tmp = f"{dest}.part-{uuid.uuid4().hex[:8]}"
    fd = guard.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)

    def write(chunk: Any) -> None:
        while chunk:
            chunk = chunk[os.write(fd, chunk):]

    try:
        size, value = _copy(fin, write)
        os.fdatasync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.rename(tmp, dest)
    durable.fsync_dir(os.path.dirname(dest))
    return size, value


def checksum(uri: str) -> tuple[int, int]:
    """(bytes, crc32c) of the object at ``uri``, read back whole."""
    path = local_path(uri)
    try:
        if path is not None:
            with open(path, "rb", buffering=0) as f:
                return _copy(f)
        fs, p = _fs(uri)
        with fs.open(p, "rb") as f:
            return _copy(f)
    except FileNotFoundError:
        raise ColdObjectError(f"cold object {uri} is missing") from None
    except OSError as e:
        raise ColdObjectError(f"cold object {uri} cannot be read: {e}") from e


def fetch(uri: str, dest: str) -> tuple[int, int]:
    """Download ``uri`` to the local file ``dest``; returns (bytes, crc32c)."""
    path = local_path(uri)
    try:
        if path is not None:
            src = open(path, "rb", buffering=0)
        else:
            fs, p = _fs(uri)
            src = fs.open(p, "rb")
    except FileNotFoundError:
        raise ColdObjectError(f"cold object {uri} is missing") from None
    except OSError as e:
        raise ColdObjectError(f"cold object {uri} cannot be read: {e}") from e
    try:
        with src, open(dest, "wb", buffering=0, opener=guard.opener) as out:
            return _copy(src, out.write)
    except OSError as e:
        raise StorageError(f"downloading cold object {uri} to {dest} failed: {e}") from e


def remove(uri: str) -> None:
    """Delete an object; a missing one is fine."""
    path = local_path(uri)
    try:
        if path is not None:
            # (<topic>-<id>/partition-N are rivven's own: never removed through a link)
            guard.check_own_dir(os.path.dirname(path), 2)
            os.unlink(path)
        else:
            fs, p = _fs(uri)
            fs.rm(p)
    except FileNotFoundError:
        pass


def listdir(prefix: str) -> list[str]:
    """URIs of the objects directly under ``prefix`` (a missing prefix has none)."""
    path = local_path(prefix)
    if path is not None:
        try:
            return [f"{prefix}/{n}" for n in sorted(os.listdir(path))]
        except FileNotFoundError:
            return []
    fs, p = _fs(prefix)
    try:
        names = fs.ls(p, detail=False)
    except FileNotFoundError:
        return []
    scheme = prefix.split("://", 1)[0]
    return sorted(f"{scheme}://{n.lstrip('/')}" if "://" not in n else n for n in names)


def remove_tree(prefix: str) -> None:
    """Delete everything under ``prefix`` (topic deletion)."""
    path = local_path(prefix)
    if path is not None:
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        return
    fs, p = _fs(prefix)
    try:
        fs.rm(p, recursive=True)
    except FileNotFoundError:
        pass
