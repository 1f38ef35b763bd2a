"""What a slow step shows while it runs, on stderr only: a spinner on an interactive terminal, else a
plain line once the step has taken `PLAIN_AFTER_S` (so quick steps, and assistants reading the output,
get no noise); under --json only the terminal's spinner."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape

from cuda_agent_mcp.cli.common import err

PLAIN_AFTER_S = 2.0


class Step:
    """The running step's description; `update` names what it is doing now."""

    def __init__(self, console: Console, message: str, *, plain_after_s: float) -> None:
        self._console = console
        self._message = message
        self._shown: str | None = None
        self._lock = threading.Lock()
        self._due = time.monotonic() + plain_after_s
        self._status = console.status(escape(message), spinner="dots") if console.is_interactive else None
        self._timer: threading.Timer | None = None
        if self._status is None:
            self._timer = threading.Timer(plain_after_s, self._show_plain)
            self._timer.daemon = True

    def update(self, message: str) -> None:
        with self._lock:
            self._message = message
        if self._status is not None:
            self._status.update(escape(message))
        elif time.monotonic() >= self._due:
            self._show_plain()

    def _show_plain(self) -> None:
        with self._lock:
            if self._shown == self._message:
                return
            self._shown = self._message
            self._console.print(f"{escape(self._message)} …", highlight=False, soft_wrap=True)

    def __enter__(self) -> Step:
        if self._status is not None:
            self._status.start()
        elif self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()


@contextmanager
def step(
    message: str, *, quiet: bool = False, console: Console | None = None, plain_after_s: float = PLAIN_AFTER_S
) -> Iterator[Step]:
    """Show `message` while the block runs; the block may `update` it. `quiet` (--json) shows it only
    to a person watching stderr on a terminal: stdout carries the JSON alone either way, and a program
    reading both streams gets no spinner lines."""
    shown_on = console or err
    if quiet and not shown_on.is_terminal:
        yield Step(Console(quiet=True), message, plain_after_s=plain_after_s)
        return
    with Step(shown_on, message, plain_after_s=plain_after_s) as shown:
        yield shown
