"""protoc (grpc_tools' bundled compiler, run in this process): .proto text to descriptors.

protoc reports a bad file only on the process's fd 2, so a compile points fd 2 at a file in
its private temp dir for the ~1 ms it runs (one compile at a time, under ``_LOCK``) and reads
the report back. What another thread writes to fd 2 in that window lands there too: every line
that is not protoc's (``path:line:col: ...``, ``path: ...`` or absl's log lines) is written
back to fd 2 afterwards, late but not lost.
A subprocess (`python -m grpc_tools.protoc`) would avoid that, but it costs ~65 ms per compile
against ~1 ms here (measured on this machine).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from .errors import InvalidSchema

_LOCK = threading.Lock()
# google/protobuf/*.proto, as protoc itself ships them
WELL_KNOWN = str(resources.files("grpc_tools") / "_proto")
MAX_MESSAGE = 600  # characters of protoc's report kept in the error
# absl's log lines (``W0000 00:00:1795955625.574701   28272 parser.cc:659] ...``, and the one
# announcing them); protoc's own: a path (no spaces), maybe ``:line:col``, then ": "
# (the seconds are since the epoch when absl's clock is not set up: 00:00:1795955625.574701)
_ABSL = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] |WARNING: All log messages before absl")
_PROTOC_LINE = re.compile(rf"[^\s:]+(:\d+:\d+)?: |{_ABSL.pattern}")


def compile_files(sources: Mapping[str, str], inputs: Sequence[str],
                  known: Sequence[descriptor_pb2.FileDescriptorProto] = ()
                  ) -> list[descriptor_pb2.FileDescriptorProto]:
    """``inputs`` (paths among ``sources``: {import path: .proto text}) compiled, with every
    file they import, dependencies first. An import resolves to ``sources``, then ``known``
    (files already compiled), then protoc's own google/protobuf/*. InvalidSchema with protoc's
    report (one line) when a file does not compile."""
    tmp = Path(tempfile.mkdtemp(prefix="rivven-protoc-"))
    try:
        src = tmp / "src"
        for name, text in sources.items():
            path = src / safe_path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.write_bytes(text.encode("utf-8"))
            except UnicodeEncodeError as e:
                raise InvalidSchema(f"{name}: not UTF-8 text ({e.reason} at {e.start})") from e
        src.mkdir(exist_ok=True)
        out = tmp / "out.pb"
        args = ["protoc", f"-I{src}", f"-I{WELL_KNOWN}", "--include_imports",
                f"--descriptor_set_out={out}"]
        if known:
            given = tmp / "known.pb"
            given.write_bytes(descriptor_pb2.FileDescriptorSet(file=list(known)).SerializeToString())
            args.append(f"--descriptor_set_in={given}")
        rc, report = _run(args + list(inputs), tmp / "stderr.txt")
        ours, others = _split(report.replace(f"{src}/", ""))
        if others:
            os.write(2, "".join(f"{ln}\n" for ln in others).encode())
        if rc != 0 or not out.exists():
            raise InvalidSchema(_one_line(ours) or f"protoc failed (exit code {rc})")
        return list(descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def safe_path(name: str) -> str:
    """``name`` as a relative path that stays inside the compile's directory (an import path
    as protoc accepts one); InvalidSchema otherwise."""
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name
            or any(p in ("", ".", "..") for p in parts)):
        raise InvalidSchema(f"Invalid reference name {name!r}: use a relative import path "
                            "such as 'common/address.proto'")
    return name


def _run(args: list[str], report: Path) -> tuple[int, str]:
    """protoc's exit code and what it wrote to fd 2."""
    with _LOCK, open(report, "w+b") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(err.fileno(), 2)
            rc = protoc.main(args)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return int(rc), err.read().decode("utf-8", "replace")


def _split(report: str) -> tuple[list[str], list[str]]:
    """protoc's lines of a report, and the lines someone else wrote to fd 2 meanwhile."""
    ours: list[str] = []
    others: list[str] = []
    for line in report.splitlines():
        if line.strip():
            (ours if _PROTOC_LINE.match(line) else others).append(line)
    return ours, others


def _one_line(lines: list[str]) -> str:
    """protoc's errors (its warnings and log lines left out) as one line."""
    errors = [ln.strip() for ln in lines if "warning:" not in ln and not _ABSL.match(ln)]
    text = "; ".join(errors)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
