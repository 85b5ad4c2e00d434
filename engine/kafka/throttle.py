"""Rate-limited log lines of ``rivven serve`` (closes, refusals, failures, error answers): a
flood of bad clients does not flood the log, and what was left out is said later."""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("rivven.serve")

class Throttle:
    """Log lines by key, at most ``burst`` at once and then ``rate`` a second (a token
    bucket: a flood of bad clients does not flood the log); ``flush()`` (called every
    second or so) says how many were left out, with the last of them."""

    def __init__(self, burst: int = 20, rate: float = 1.0, every_s: float = 5.0) -> None:
        self.burst = burst
        self.rate = rate
        self.every_s = every_s
        self.tokens: dict[Any, tuple[float, float]] = {}  # key -> (tokens, when)
        self.left_out: dict[Any, tuple[int, int, str, float]] = {}  # n, level, last, since

    def __call__(self, key: Any, level: int, msg: str, *args: Any, exc_info: Any = None
                 ) -> None:
        now = time.monotonic()
        tokens, when = self.tokens.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - when) * self.rate)
        if tokens >= 1:
            if len(self.tokens) > 10_000:  # (keys are few; never let this grow)
                self.tokens.clear()
            self.tokens[key] = (tokens - 1, now)
            log.log(level, msg, *args, exc_info=exc_info)
            return
        self.tokens[key] = (tokens, now)
        n, _, _, since = self.left_out.get(key, (0, level, "", now))
        if len(self.left_out) < 10_000:
            self.left_out[key] = (n + 1, level, msg % args if args else msg, since)

    def flush(self) -> None:
        now = time.monotonic()
        for key, (n, level, last, since) in list(self.left_out.items()):
            if now - since >= self.every_s:
                del self.left_out[key]
                log.log(level, "%d more like this not logged in the last %.0f s; the last: %s",
                        n, now - since, last)

