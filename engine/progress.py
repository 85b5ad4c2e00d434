"""How long work reports how far it got: ``progress(what, total, done)``, called as it goes.

The engine never draws anything; the CLI turns these calls into a progress bar
(rivven_cli.progress), and an application may log them.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]  # (what, total, done), in bytes or tasks


def counter(progress: Progress | None, what: str, total: int) -> Callable[[int], None]:
    """``advance(n)``: adds ``n`` to what is done and reports it (nothing without progress)."""
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(what, total, done)

    return advance
