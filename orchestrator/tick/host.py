"""The tick's own footing: which host and process it is, its row in `ticks`,
its write transactions (said lines only once committed), the errors it
survives, and the retry of a transaction whose connection was lost."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import Connection, Engine

from orchestrator import runner
from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
from orchestrator.errors import ConnectionLostError, OrchestratorError
from orchestrator.events import outbox
from orchestrator.events.courier import Courier
from orchestrator.guards import watch as guards
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, write_tx
from orchestrator.testing import fault_point
from orchestrator.tick.delivery import DeliveryFailures
from orchestrator.tick.guards import ConfigWatch
from orchestrator.tick.model import (
    _T,
    RECONNECT_FIRST_DELAY,
    RECONNECT_MAX_DELAY,
    TICK_ERROR_STATUS,
    TickError,
    TickReport,
)
from orchestrator.tick.progress import NoProgress, Progress


@dataclass(frozen=True)
class HostIdentity:
    """Who opens an attempt, as stored with it: recovery judges an attempt's
    pids only on the same host, boot and pid namespace, and its tick's pid
    only with the same start time (pids are reused)."""

    host: str
    boot: str
    pid_namespace: str
    pid: int
    start_token: str | None

    @classmethod
    def here(cls) -> HostIdentity:
        pid = os.getpid()
        return cls(
            # ORCHESTRATOR_HOST names this host when the hostname is not stable
            # (containers) or, in tests, to play several hosts on one machine.
            host=os.environ.get("ORCHESTRATOR_HOST") or runner.host_name(),
            boot=runner.boot_id(),
            pid_namespace=runner.pid_namespace(),
            pid=pid,
            start_token=runner.process_start_time(pid),
        )

    @property
    def identity(self) -> str:
        """The boot id, with the pid namespace: pids mean something only within one."""
        return f"{self.boot}/{self.pid_namespace}" if self.pid_namespace else self.boot


class TickRow:
    """The state every room of the tick shares, and the tick row itself."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = lambda line: None,
        warn: Callable[[str], None] = lambda line: None,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.progress = progress or NoProgress()  # live lines on a terminal
        self.engine = engine
        self.stop = stop or threading.Event()
        self.say = say
        # Errors the tick survives: the CLI sends them to stderr, quiet or not.
        self.warn = warn
        me = HostIdentity.here()
        self.host = me.host
        self.boot = me.boot
        self.pid_namespace = me.pid_namespace
        self.identity = me.identity
        self.pid = me.pid
        self.start_token = me.start_token
        self.report = TickReport()
        self._tick_id: int | None = None
        self._tick_lock = threading.Lock()
        self._processes: dict[Path, runner.ProcessIdentity] = {}
        self._watch = guards.WorkspaceWatch()  # the no-change guard's before/after
        # Per attempt folder: a capture file the disk could not take.
        self._capture_notes: dict[Path, str] = {}
        # Keyed by (pipeline, stage): two pipelines may both have `implement`
        # with different `env`, and a secret must reach only the one naming it.
        self._environments: dict[tuple[str, str], dict[str, str]] = {}
        self._config = ConfigWatch(settings.config_path, settings.fingerprint)
        # Lines about what a write transaction did, said once it committed
        # (never while SQLite's write lock is held, never for a rollback).
        self._local = threading.local()
        # Set once the database stayed out of reach past `reconnect_seconds`:
        # every attempt stops, the tick claims nothing more and exits 69.
        self._db_down = threading.Event()
        # Hands events to hooks after their transaction commits (`_write`).
        self._delivery = DeliveryFailures(warn)  # a failed delivery fails the tick (75)
        self._courier = Courier(settings, engine, warn=self._delivery.warn)

    def _error(self, where: str, exc: BaseException) -> None:
        """Note an error the tick survives: on stderr now, in the exit status later."""
        status = exc.exit_code if isinstance(exc, OrchestratorError) else TICK_ERROR_STATUS
        message = f"{where}: {exc}" if str(exc) else f"{where}: {type(exc).__name__}"
        with self._tick_lock:
            self.report.errors.append(TickError(message, status))
        try:
            self.warn(message)
        except Exception:  # stderr closed: the exit status still says it
            return

    def _retrying(self, fn: Callable[[bool], _T]) -> _T:
        """Run one transaction of the tick's, `fn(again)`, and run it again
        while the connection to the database is lost (a restart, a failover,
        a killed session), backing off, for at most `_reconnect_bound()`.

        Safe because every write is a compare-and-set on versions and lease
        tokens; but the first try may have committed before its answer was
        lost, so with `again` the body first looks for its own effect (the
        attempt closed, the claim's token in an open attempt) rather than
        write it twice. Past the bound the database is down for this tick:
        its attempts stop and it exits 69 (`_database_down`)."""
        again = False
        delay = RECONNECT_FIRST_DELAY
        deadline: float | None = None
        while True:
            try:
                return fn(again)
            except ConnectionLostError as exc:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._reconnect_bound()
                if self._db_down.is_set() or now + delay > deadline:
                    self._database_down(exc)
                    raise
            # Every pooled connection may be dead (a restart): start afresh.
            # Connections other threads hold are theirs to lose and retry.
            with contextlib.suppress(Exception):
                self.engine.dispose()
            time.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)
            again = True

    def _reconnect_bound(self) -> float:
        """How long a transaction is retried: never past a lease, after which
        another host may have taken the attempt over anyway."""
        return min(self.settings.reconnect_seconds, self.settings.lease_seconds)

    def _database_down(self, exc: BaseException) -> None:
        """The database stayed out of reach past the bound: stop every
        attempt (`FenceGuard`), claim nothing more, exit with its status."""
        error = (
            exc
            if isinstance(exc, OrchestratorError)
            else ConnectionLostError(f"cannot reach the database: {exc}")
        )
        with self._tick_lock:
            if self.report.host_fault is None:
                self.report.host_fault = error
            if self.report.stopped_claiming is None:
                self.report.stopped_claiming = str(error)
        self._db_down.set()

    def _ensure_tick(self, conn: Connection, now: datetime) -> int:
        with self._tick_lock:
            if self._tick_id is None:
                self._tick_id = repo.open_tick(conn, host=self.host, pid=self.pid, now=now)
            return self._tick_id

    def _close_tick(self, exit_code: int) -> None:
        if self._tick_id is None:
            # A clean idle tick moves this host's idle row forward (one small
            # UPDATE), so `doctor`, `metrics` and the board can tell a quiet
            # cron from a dead one. A failed one writes nothing: its error is
            # in the log already, and a database that just failed (full,
            # damaged, from the future) is not written to on the way out.
            if exit_code == 0:
                self._retrying(lambda _again: self._note_idle_tick(exit_code))
            return
        self._retrying(lambda _again: self._close_tick_tx(exit_code))

    def _note_idle_tick(self, code: int) -> None:
        with self._write() as conn:
            repo.note_idle_tick(conn, host=self.host, pid=self.pid, now=db_now(conn), code=code)

    def _close_tick_tx(self, exit_code: int) -> None:
        assert self._tick_id is not None
        with self._write() as conn:
            repo.close_tick(
                conn,
                self._tick_id,
                now=db_now(conn),
                claimed=self.report.claimed,
                recovered=self.report.recovered,
                advanced=self.report.advanced,
                exit_code=exit_code,
            )
            fault_point("inside_close_tick_tx")

    def finish(self, exit_code: int) -> None:
        """Record the tick's end when it was stopped by a signal."""
        self._close_tick(exit_code)

    def _open_tick(self) -> None:
        with self._write() as conn:
            self._ensure_tick(conn, db_now(conn))

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction of the tick's. A tick row created in one that
        then rolls back is forgotten, so the next claim creates it again
        rather than pointing at nothing."""
        had_tick = self._tick_id is not None
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
                with self._tick_lock:
                    self._tick_id = None
            raise
        finally:
            self._local.lines = outer
        if wrote:  # committed: the courier hands the event to the hooks
            fault_point("after_event_commit")
            self._courier.kick()
        for line in lines:
            try:
                self.say(line)
            except Exception as exc:  # e.g. stdout closed: what committed stands
                self._error("reporting failed", exc)
                break

    def _say_after_commit(self, line: str) -> None:
        """Say `line` once the current write transaction commits; never if
        it (or the savepoint it was said in) rolls back."""
        lines = getattr(self._local, "lines", None)
        if lines is None:
            self.say(line)
        else:
            lines.append(line)

    def _state_dir(self, slug: str, stage: str, number: int) -> Path:
        return self.settings.state_root / slug / f"{stage}-{number:03d}"

    def _count(self, outcome: Outcome) -> None:
        with self._tick_lock:
            self.report.outcomes[outcome.value] = self.report.outcomes.get(outcome.value, 0) + 1
