"""Short-lived OS locks (flock) on exactly what a mutation changes, and bounded waits for them.

flock locks belong to an open file description, so threads of one process must also hold a
``threading.Lock``; the kernel drops the flock when a process dies, so a killed writer never
leaves a lock behind.

A lock held by someone else is waited for at most ``LockWait.timeout_s`` (the engine setting
``lock.timeout.ms``), then ``LockTimeout`` names the lock file, the holder's pid and the
setting. After ``notice_s`` the wait is reported once through ``LockWait.notify`` (the CLI
prints it; by default a ``logging`` warning on ``rivven.locks``), naming the holder: a
stopped process, or any user able to open the file, can hold a flock for ever.

The uncontended case is one ``flock(LOCK_NB)``, as cheap as before. A contended lock is
polled for up to POLL_FIRST_S (most holds are an append or a checkpoint long). After that the
wait blocks in the kernel — so it wakes the moment the holder lets go, as a plain ``flock``
does — but in a helper thread (kept for the next wait), on a second open file description of
the same inode (``/proc/self/fd``), while the caller waits with a deadline; once the helper
has the lock, its description takes the caller's fd number (``dup2``) and the caller holds
the lock. A helper whose caller gave up drops the lock as soon as it gets it.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import LockTimeout
from . import guard

NOTICE_S = 3.0  # a wait this long is reported (sooner when the timeout is short)
# A contended lock is first polled for a moment (a holder's hold is short: an append, a
# checkpoint): a holder that releases and retakes the lock at once then keeps it for a run of
# appends instead of handing it over every time, which costs two context switches a time;
# the helper thread's kernel wait then bounds how long a poller can miss its turn.
POLL_FIRST_S = 0.02
POLL_FIRST_SLEEP_S = (0.00005, 0.001)  # first and longest sleep of that poll
POLL_S = (0.0005, 0.05)  # first and longest sleep of the fallback poll (no /proc)


@dataclass(frozen=True)
class LockWait:
    """How long to wait for a lock (``None``: for ever), and whom to tell after a while."""

    timeout_s: float | None = 30.0
    notify: Callable[[str], None] | None = None  # None: a logging warning on rivven.locks

    @property
    def notice_s(self) -> float:
        return NOTICE_S if self.timeout_s is None else min(NOTICE_S, self.timeout_s / 2)

    def tell(self, message: str) -> None:
        if self.notify is not None:
            self.notify(message)
        else:
            import logging  # (only here: it costs start-up)

            logging.getLogger("rivven.locks").warning(message)


DEFAULT_WAIT = LockWait()


def open_lock_file(path: str) -> int:
    """A lock file, opened (created when missing) for reading and writing; never a link."""
    return guard.open_file(path, os.O_RDWR | os.O_CREAT)


def holder(fd: int) -> int | None:
    """The pid holding a flock on ``fd``'s file (from /proc/locks, which names it even when
    the flock was taken through a read-only fd); None when unknown."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", "rb") as f:
            text = f.read(1 << 20).decode("ascii", "replace")
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    ino = f":{st.st_ino}"
    loose = None
    for line in text.splitlines():
        w = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; waiters have "->" after "1:"
        if len(w) < 6 or w[1] != "FLOCK" or not w[4].isdigit():
            continue
        if w[5] == dev:
            return int(w[4])
        if w[5].endswith(ino) and loose is None:  # (a device numbered differently: overlay)
            loose = int(w[4])
    return loose


def _who(pid: int | None) -> str:
    if pid is None:
        return "an unknown process"
    if pid == os.getpid():
        return f"pid {pid} (this process)"
    return f"pid {pid}"


def acquire(fd: int, path: str, wait: LockWait = DEFAULT_WAIT) -> None:
    """Take an exclusive flock on ``fd`` (the file ``path``), waiting as ``wait`` says."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    end = time.monotonic() + POLL_FIRST_S
    sleep = POLL_FIRST_SLEEP_S[0]
    while time.monotonic() < end:
        time.sleep(sleep)
        sleep = min(sleep * 2, POLL_FIRST_SLEEP_S[1])
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
    _Wait(fd, path, wait).run()


class _Wait:
    """One contended wait (see the module docstring)."""

    def __init__(self, fd: int, path: str, wait: LockWait) -> None:
        self.fd = fd
        self.path = path
        self.wait = wait
        self.mutex = threading.Lock()
        self.done = threading.Lock()  # released by the helper when it is done
        self.done.acquire()
        self.got = False
        self.abandoned = False
        self.error: OSError | None = None
        self.helper_fd = -1

    def run(self) -> None:
        start = time.monotonic()
        try:
            self.helper_fd = os.open(f"/proc/self/fd/{self.fd}", os.O_RDWR)
        except OSError:
            self._poll(start)
            return
        _HELPERS.run(self._block)
        try:
            self._await(start)
        except BaseException:  # timed out, or interrupted: the lock must not stay taken
            with self.mutex:
                if self.got:
                    os.close(self.helper_fd)  # (drops the lock)
                elif self.error is None:
                    self.abandoned = True  # the helper drops it when it comes
                else:
                    os.close(self.helper_fd)
            raise
        if self.error is not None:
            os.close(self.helper_fd)
            raise self.error
        # the helper's description holds the lock: it becomes ours under our fd number (ours
        # held no lock: nothing is dropped by closing it)
        os.dup2(self.helper_fd, self.fd, inheritable=False)
        os.close(self.helper_fd)

    def _await(self, start: float) -> None:
        noticed = False
        timeout = self.wait.timeout_s
        while True:
            now = time.monotonic()
            until = [start + self.wait.notice_s] if not noticed else []
            if timeout is not None:
                until.append(start + timeout)
            if self.done.acquire(timeout=max(0.0, min(until) - now) if until else -1):
                return
            now = time.monotonic()
            if not noticed and now - start >= self.wait.notice_s:
                noticed = True
                self._notice(now - start)
            if timeout is not None and now - start >= timeout:
                with self.mutex:
                    if self.got or self.error is not None:
                        return  # (it came just now)
                raise self._timeout()

    def _block(self) -> None:
        try:
            fcntl.flock(self.helper_fd, fcntl.LOCK_EX)
        except OSError as e:
            with self.mutex:
                self.error = e
                if self.abandoned:
                    os.close(self.helper_fd)
            self.done.release()
            return
        with self.mutex:
            if self.abandoned:
                os.close(self.helper_fd)  # (drops the lock)
                return
            self.got = True
        self.done.release()

    def _poll(self, start: float) -> None:
        """Without /proc: LOCK_NB with a growing sleep (wakes up to POLL_S[1] late)."""
        noticed = False
        sleep = POLL_S[0]
        while True:
            time.sleep(sleep)
            sleep = min(sleep * 2, POLL_S[1])
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            waited = time.monotonic() - start
            if not noticed and waited >= self.wait.notice_s:
                noticed = True
                self._notice(waited)
            if self.wait.timeout_s is not None and waited >= self.wait.timeout_s:
                raise self._timeout()

    def _notice(self, waited: float) -> None:
        self.wait.tell(f"waiting {waited:.0f} s for the lock {self.path}, held by "
                       f"{_who(holder(self.fd))}; giving up after "
                       + (f"{self.wait.timeout_s:g} s (lock.timeout.ms)" if self.wait.timeout_s
                          is not None else "never (lock.timeout.ms is -1)"))

    def _timeout(self) -> LockTimeout:
        pid = holder(self.fd)
        hint = (" (a stopped process? 'kill -CONT' or end it)" if pid is not None
                else "")
        return LockTimeout(
            f"gave up after {self.wait.timeout_s:g} s waiting for the lock {self.path}, held by "
            f"{_who(pid)}{hint}; retry once it is released, or wait longer with the engine "
            "setting lock.timeout.ms (rivven --lock-timeout-ms)")


class _Helper(threading.Thread):
    """A thread that blocks in ``flock`` for contended waits, one at a time, kept for the next
    (starting a thread costs more than most waits it serves); it ends after IDLE_S unused."""

    IDLE_S = 30.0

    def __init__(self, job: Callable[[], None]) -> None:
        super().__init__(daemon=True, name="rivven-lock-wait")
        self.job: Callable[[], None] | None = job
        self.wake = threading.Lock()
        self.wake.acquire()

    def run(self) -> None:
        while True:
            job, self.job = self.job, None
            if job is not None:
                job()
            with _HELPERS.mutex:
                _HELPERS.idle.append(self)
            if not self.wake.acquire(timeout=self.IDLE_S):
                with _HELPERS.mutex:
                    if self in _HELPERS.idle:
                        _HELPERS.idle.remove(self)
                        return
                self.wake.acquire()  # (taken for a job meanwhile: it is on its way)


class _Helpers:
    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.idle: list[_Helper] = []

    def run(self, job: Callable[[], None]) -> None:
        with self.mutex:
            helper = self.idle.pop() if self.idle else None
        if helper is None:
            _Helper(job).start()
        else:
            helper.job = job
            helper.wake.release()

    def forget(self) -> None:
        """(In a forked child: the parent's helper threads do not exist here.)"""
        self.mutex = threading.Lock()
        self.idle = []


_HELPERS = _Helpers()
os.register_at_fork(after_in_child=_HELPERS.forget)


@contextmanager
def flocked(fd: int, path: str, wait: LockWait = DEFAULT_WAIT) -> Iterator[None]:
    acquire(fd, path, wait)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def lock_path(path: str, wait: LockWait = DEFAULT_WAIT) -> Iterator[int]:
    """Take an exclusive lock on ``path`` (created if missing) for the duration of the block."""
    fd = open_lock_file(path)
    try:
        with flocked(fd, path, wait):
            yield fd
    finally:
        os.close(fd)


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
