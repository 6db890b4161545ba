"""The tick's transactions: each write said only once committed, its events
handed to the hooks, retried while the connection is lost; and the tick's
row in `ticks`, made by its first write and closed at its end."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Connection, Engine

from orchestrator.config import Settings
from orchestrator.errors import ConnectionLostError
from orchestrator.events import outbox
from orchestrator.events.courier import Courier
from orchestrator.ext.model import _T, RECONNECT_FIRST_DELAY, RECONNECT_MAX_DELAY
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, write_tx
from orchestrator.testing import fault_point
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.tick_run import TickRun


class Transactions:
    """How every job of the tick reaches the database to write: `write()`
    for one transaction, `retrying()` around it. It touches the `ticks`
    table itself (the tick's row) and `tick.tick_id`; the rest is the
    caller's, inside the transaction it is handed."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        tick: TickRun,
        me: HostIdentity,
        courier: Courier,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.tick = tick
        self.me = me
        # Hands events to hooks after their transaction commits (`write`).
        self.courier = courier
        # Lines about what a write transaction did, said once it committed
        # (never while SQLite's write lock is held, never for a rollback).
        self._local = threading.local()

    def retrying(self, fn: Callable[[bool], _T]) -> _T:
        """Run one transaction of the tick's, `fn(again)`, and run it again
        while the connection to the database is lost (a restart, a failover,
        a killed session), backing off, for at most `reconnect_bound()`.

        Safe because every write is a compare-and-set on versions and lease
        tokens; but the first try may have committed before its answer was
        lost, so with `again` the body first looks for its own effect (the
        attempt closed, the claim's token in an open attempt) rather than
        write it twice. Past the bound the database is down for this tick:
        its attempts stop and it exits 69 (`TickRun.database_down`)."""
        again = False
        delay = RECONNECT_FIRST_DELAY
        deadline: float | None = None
        while True:
            try:
                return fn(again)
            except ConnectionLostError as exc:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.reconnect_bound()
                if self.tick.db_down.is_set() or now + delay > deadline:
                    self.tick.database_down(exc)
                    raise
            # Every pooled connection may be dead (a restart): start afresh.
            # Connections other threads hold are theirs to lose and retry.
            with contextlib.suppress(Exception):
                self.engine.dispose()
            time.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)
            again = True

    def reconnect_bound(self) -> float:
        """How long a transaction is retried: never past a lease, after which
        another host may have taken the attempt over anyway."""
        return min(self.settings.reconnect_seconds, self.settings.lease_seconds)

    def ensure_tick(self, conn: Connection, now: datetime) -> int:
        with self.tick.lock:
            if self.tick.tick_id is None:
                self.tick.tick_id = repo.open_tick(
                    conn, host=self.me.host, pid=self.me.pid, now=now
                )
            return self.tick.tick_id

    def close_tick(self, exit_code: int) -> None:
        if self.tick.tick_id is None:
            # A clean idle tick moves this host's idle row forward (one small
            # UPDATE), so `doctor`, `metrics` and the board can tell a quiet
            # cron from a dead one. A failed one writes nothing: its error is
            # in the log already, and a database that just failed (full,
            # damaged, from the future) is not written to on the way out.
            if exit_code == 0:
                self.retrying(lambda _again: self._note_idle_tick(exit_code))
            return
        self.retrying(lambda _again: self._close_tick_tx(exit_code))

    def _note_idle_tick(self, code: int) -> None:
        with self.write() as conn:
            repo.note_idle_tick(
                conn, host=self.me.host, pid=self.me.pid, now=db_now(conn), code=code
            )

    def _close_tick_tx(self, exit_code: int) -> None:
        assert self.tick.tick_id is not None
        report = self.tick.report
        with self.write() as conn:
            repo.close_tick(
                conn,
                self.tick.tick_id,
                now=db_now(conn),
                claimed=report.claimed,
                recovered=report.recovered,
                advanced=report.advanced,
                exit_code=exit_code,
            )
            fault_point("inside_close_tick_tx")

    def open_tick(self) -> None:
        with self.write() as conn:
            self.ensure_tick(conn, db_now(conn))

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction of the tick's. A tick row created in one that
        then rolls back is forgotten, so the next claim creates it again
        rather than pointing at nothing."""
        had_tick = self.tick.tick_id is not None
        outer = getattr(self._local, "lines", None)
        lines: list[str] = []
        self._local.lines = lines
        wrote = False
        try:
            with write_tx(self.engine) as conn:
                outbox.take_written(conn)
                yield conn
                wrote = outbox.take_written(conn)
        except BaseException:
            if not had_tick:
                with self.tick.lock:
                    self.tick.tick_id = None
            raise
        finally:
            self._local.lines = outer
        if wrote:  # committed: the courier hands the event to the hooks
            fault_point("after_event_commit")
            self.courier.kick()
        for line in lines:
            try:
                self.tick.say(line)
            except Exception as exc:  # e.g. stdout closed: what committed stands
                self.tick.error("reporting failed", exc)
                break

    def say_after_commit(self, line: str) -> None:
        """Say `line` once the current write transaction commits; never if
        it (or the savepoint it was said in) rolls back."""
        lines = getattr(self._local, "lines", None)
        if lines is None:
            self.tick.say(line)
        else:
            lines.append(line)

    def pending_lines(self) -> list[str]:
        """The lines the current transaction will say, as they stand now."""
        return list(getattr(self._local, "lines", None) or [])

    def forget_lines(self, kept: list[str]) -> None:
        """A savepoint rolled back: say only the lines said before it (`kept`)."""
        self._local.lines[:] = kept
