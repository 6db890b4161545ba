"""Live progress on a terminal: one line per running attempt (task, stage,
attempt, elapsed, the last line it printed), redrawn in place by rich.

Only for a person watching: `tick`/`run` use it when stdout is a TTY and
`-q` is not given; under cron the output stays the plain lines it always
was. The engine says when an attempt starts and ends, and the runner hands
over each chunk of output as it reads it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

TAIL_BYTES = 4096
REFRESH_PER_SECOND = 4


class Progress(Protocol):
    def running(self, slug: str, stage: str, number: int, folder: Path) -> Any: ...
    def output(self, folder: Path) -> Callable[[bytes], None] | None: ...


class NoProgress:
    """The plain path: nothing drawn, `say` untouched."""

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def running(self, slug: str, stage: str, number: int, folder: Path) -> Any:
        return contextlib.nullcontext()

    def output(self, folder: Path) -> Callable[[bytes], None] | None:
        return None  # the runner then pays nothing per chunk

    def say(self, fallback: Callable[[str], None]) -> Callable[[str], None]:
        return fallback


@dataclass
class _Running:
    slug: str
    stage: str
    number: int
    folder: Path
    started: float = field(default_factory=time.monotonic)
    tail: bytes = b""  # the newest output bytes, worker's or verifier's


class LiveProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._next = 0
        self.console = Console(highlight=False)
        self._live = Live(
            self,
            console=self.console,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=True,
            redirect_stdout=True,
            redirect_stderr=True,
        )

    def __enter__(self) -> LiveProgress:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    @contextmanager
    def running(self, slug: str, stage: str, number: int, folder: Path) -> Iterator[None]:
        with self._lock:
            key = self._next
            self._next += 1
            self._running[key] = _Running(slug, stage, number, folder)
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(key, None)

    def output(self, folder: Path) -> Callable[[bytes], None] | None:
        def seen(data: bytes) -> None:
            with self._lock:
                for item in self._running.values():
                    if item.folder == folder:
                        item.tail = (item.tail + data)[-TAIL_BYTES:]

        return seen

    def say(self, _fallback: Callable[[str], None]) -> Callable[[str], None]:
        """Lines printed above the live lines (never torn by a redraw)."""

        def say(line: str) -> None:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

        return say

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        with self._lock:
            running = list(self._running.values())
        now = time.monotonic()
        for item in running:
            table.add_row(
                item.slug,
                item.stage,
                f"attempt {item.number}",
                elapsed_text(now - item.started),
                last_line(item.tail),
            )
        return table


def elapsed_text(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def last_line(tail: bytes) -> str:
    """The last non-blank line printed, without control characters (an
    agent's output must not drive the terminal)."""
    for line in reversed(tail.decode(errors="replace").splitlines()):
        clean = "".join(ch if ch.isprintable() else " " for ch in line).strip()
        if clean:
            return clean
    return ""


def live_progress(*, enabled: bool) -> LiveProgress | NoProgress:
    """A live display when asked for and stdout is a terminal; else nothing."""
    if enabled and sys.stdout is not None and sys.stdout.isatty():
        return LiveProgress()
    return NoProgress()
