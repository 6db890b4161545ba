"""One tick's shared state: its report, the lock guarding it, the stop the
CLI sets, its row's id, whether the database is down, and where its lines go.

Every job of the tick is handed the same `TickRun`; it is the one thing they
share by reference, so what a job may change of the tick is what this class
lets it: count an outcome, note a survived error or a host fault."""

from __future__ import annotations

import threading
from collections.abc import Callable

from orchestrator.domain.decide import Outcome
from orchestrator.errors import ConnectionLostError, OrchestratorError
from orchestrator.ext.model import TICK_ERROR_STATUS, AttemptRun, TickError, TickReport


class TickRun:
    """The state of one tick, shared by its jobs (threads: take `lock`)."""

    def __init__(
        self,
        *,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = lambda line: None,
        warn: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.stop = stop or threading.Event()
        self.say = say
        # Errors the tick survives: the CLI sends them to stderr, quiet or not.
        self.warn = warn
        self.report = TickReport()
        self.lock = threading.Lock()
        # The tick's row in `ticks`, made by its first write (`Transactions`).
        self.tick_id: int | None = None
        # Set once the database stayed out of reach past `reconnect_seconds`:
        # every attempt stops, the tick claims nothing more and exits 69.
        self.db_down = threading.Event()

    def error(self, where: str, exc: BaseException) -> None:
        """Note an error the tick survives: on stderr now, in the exit status later."""
        status = exc.exit_code if isinstance(exc, OrchestratorError) else TICK_ERROR_STATUS
        message = f"{where}: {exc}" if str(exc) else f"{where}: {type(exc).__name__}"
        with self.lock:
            self.report.errors.append(TickError(message, status))
        try:
            self.warn(message)
        except Exception:  # stderr closed: the exit status still says it
            return

    def database_down(self, exc: BaseException) -> None:
        """The database stayed out of reach past the bound: stop every
        attempt (`FenceGuard`), claim nothing more, exit with its status."""
        error = (
            exc
            if isinstance(exc, OrchestratorError)
            else ConnectionLostError(f"cannot reach the database: {exc}")
        )
        with self.lock:
            if self.report.host_fault is None:
                self.report.host_fault = error
            if self.report.stopped_claiming is None:
                self.report.stopped_claiming = str(error)
        self.db_down.set()

    def host_fault(self, error: OrchestratorError) -> AttemptRun:
        """A folder of the host's failed under the attempt: the attempt counts
        toward nothing, the tick claims no more (the next claim would fail the
        same way) and ends with the fault's exit status, naming the folder."""
        with self.lock:
            if self.report.host_fault is None:
                self.report.host_fault = error
                self.report.stopped_claiming = str(error)
        return AttemptRun(Outcome.HOST_ERROR, error=str(error))

    def count(self, outcome: Outcome) -> None:
        with self.lock:
            self.report.outcomes[outcome.value] = self.report.outcomes.get(outcome.value, 0) + 1

    def halted(self) -> None:
        with self.lock:
            self.report.halted += 1
