"""`orchestrator run` between its ticks: wait out the interval, or wake as
soon as a person makes work claimable.

PostgreSQL: the loop LISTENs on a connection of its own; `approve`,
`reject`, `add` and `resume` NOTIFY in their own transaction
(`storage.repo.wake`), so the wake comes with their commit, from any host.

SQLite: the loop polls `PRAGMA data_version` (`POLL_SECONDS`), which moves
when another connection commits; only then does it read which gates and
ready tasks a tick would take now (`tick.idle.sql.WAKE_DUE`) and wake
when one is new. New against what, decides what wakes:
- an approved gate not approved when the tick began: a tick always moves
  every approved gate on, so one still there was approved while (or after)
  it ran;
- a ready task (with its version) neither there when the tick began nor
  when it ended: what the tick itself left ready (`--max-tasks`, another
  host's task) keeps its interval, so `run --max-tasks 1` still paces.
A task added, resumed or rejected while the tick ran, after its last claim,
waits for the interval: the one race this leaves, and only for those.

A waker that fails (the database away, a file replaced) sleeps out the
interval as `run` always did; the next round opens it again.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from orchestrator.storage.db import sqlite_path
from orchestrator.storage.repo.wake import CHANNEL
from orchestrator.tick.idle.sql import WAKE_DUE

POLL_SECONDS = 0.1  # SQLite: how often data_version is read between ticks
SLICE_SECONDS = 0.25  # PostgreSQL: the longest wait before a stop is looked at


class _Waiter(Protocol):
    def arm(self) -> None: ...
    def settled(self) -> None: ...
    def wait(self, stop: threading.Event, seconds: float) -> bool: ...
    def close(self) -> None: ...


class Wake:
    """One per `run`: `follow(url)` each round (the config may move the
    database), `arm()` before the tick, `settled()` after it, then
    `wait(stop, interval)`, True when woken early."""

    def __init__(self, warn: Callable[[str], None] = lambda line: None) -> None:
        self._url: str | None = None
        self._waiter: _Waiter | None = None
        self._warn = warn

    def follow(self, url: str) -> None:
        if url == self._url and self._waiter is not None:
            return
        self.close()
        self._url = url
        try:
            self._waiter = _open(url)
        except Exception as exc:  # no wake this round: the interval, as before
            self._warn(f"run: no wake on approval this round ({exc})")
            self._waiter = None

    def arm(self) -> None:
        self._guard(lambda w: w.arm())

    def settled(self) -> None:
        self._guard(lambda w: w.settled())

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        started = time.monotonic()
        waiter = self._waiter
        if waiter is not None:
            try:
                return waiter.wait(stop, seconds)
            except Exception:
                self.close()
        stop.wait(max(0.0, seconds - (time.monotonic() - started)))
        return False

    def close(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            try:
                waiter.close()
            except Exception:
                return

    def _guard(self, step: Callable[[_Waiter], None]) -> None:
        if self._waiter is None:
            return
        try:
            step(self._waiter)
        except Exception:
            self.close()  # the next `follow` opens it again


def _open(url: str) -> _Waiter | None:
    if url.startswith("postgresql"):
        return _Listen(url)
    path = sqlite_path(url)
    return None if path is None else _DataVersion(path)


class _DataVersion:
    """SQLite: data_version polls, then the candidates (see the module)."""

    def __init__(self, path: Path) -> None:
        # mode=rw: a database that is not there is not made by waiting on it.
        self._conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=1.0
        )
        self._before: set[tuple[int, int, str]] = set()
        self._after: set[tuple[int, int, str]] = set()

    def _due(self) -> set[tuple[int, int, str]]:
        return {(int(i), int(v), str(s)) for i, v, s in self._conn.execute(WAKE_DUE)}

    def _version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def arm(self) -> None:
        self._before = self._due()
        self._after = set()

    def settled(self) -> None:
        self._after = self._due()

    def _new(self) -> bool:
        for row in self._due():
            if row in self._before:
                continue
            if row[2] == "approved" or row not in self._after:
                return True
        return False

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        version = self._version()
        if self._new():  # approved while the tick ran
            return True
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or stop.wait(min(POLL_SECONDS, left)):
                return False
            now = self._version()
            if now != version:
                version = now
                if self._new():
                    return True

    def close(self) -> None:
        self._conn.close()


class _Listen:
    """PostgreSQL: LISTEN on a connection of its own, in autocommit."""

    def __init__(self, url: str) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
        self._conn.execute(f"LISTEN {CHANNEL}")

    def arm(self) -> None:
        """What was notified before the tick, the tick takes: forget it."""
        for _ in self._conn.notifies(timeout=0):
            pass

    def settled(self) -> None:
        return None

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for _ in self._conn.notifies(timeout=min(SLICE_SECONDS, left), stop_after=1):
                return True
        return False

    def close(self) -> None:
        self._conn.close()
