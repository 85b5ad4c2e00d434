"""CRC32C, the checksum of batches, WAL records, committed offsets and cold copies."""

from __future__ import annotations

from typing import Any

_real: Any = None


def crc32c(data: Any, value: int = 0) -> int:  # noqa: F811
    """CRC32C. The first call loads the library's C function and rebinds this name to it, so
    ``crc.crc32c`` (looked up at call time) is the C function from then on; a caller that
    imported this stub by name pays one Python call per CRC."""
    global crc32c, _real
    if _real is None:
        _real = _load_crc32c()
    crc32c = _real
    return _real(data, value)


def _load_crc32c() -> Any:
    """The crc32c library's C function. Its extension module is loaded by itself when it can
    be: the package's ``__init__`` reads its own version through ``importlib.metadata``, which
    costs 20-40 ms of every command's start-up here. (Not put in ``sys.modules``: the package,
    if something imports it later, loads its own.)"""
    import importlib.machinery
    import importlib.util
    import os

    fn = None
    try:
        spec = importlib.util.find_spec("crc32c")
        for d in (spec.submodule_search_locations or []) if spec else []:
            # the suffixes in the import system's order: this interpreter's own build first
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(d, "_crc32c" + suffix)
                if os.path.isfile(path):
                    name = "crc32c._crc32c"
                    loader = importlib.machinery.ExtensionFileLoader(name, path)
                    spec = importlib.util.spec_from_loader(name, loader)
                    if spec is None:
                        break
                    mod = importlib.util.module_from_spec(spec)
                    loader.exec_module(mod)
                    fn = getattr(mod, "crc32c", None)
                    break
            if fn is not None:
                break
    except Exception:  # noqa: BLE001 - any surprise: the ordinary import below
        fn = None
    if fn is None:
        from crc32c import crc32c as fn  # the ordinary way
    return fn
