"""The tick: recover, move approved gates on, claim, run, record.

The tick composes the pure core (what to do) with the adapters (storage,
runner): it gathers facts, asks `decide`, and writes the answer in one short
transaction. No transaction stays open while a worker or verifier runs; each
attempt is opened and committed first, then run, then closed in one
transaction fenced by the task's version and the attempt's lease token. A
result that lost its fence is kept as `late_result` and changes nothing.

Attempts run in a thread pool (`--jobs`); threads only wait on child
processes and do short transactions, so the GIL is no bottleneck. Signals are
the CLI's business: it sets `stop`, and every running attempt sees it within
a poll interval, stops its process group and is recorded `interrupted`.

`Ticker` is the last of a line of classes, one module each, every one adding
one job to the one before (see docs/architecture.md).
"""

from __future__ import annotations

from orchestrator.errors import OrchestratorError
from orchestrator.storage.db import checkpoint, settle_wal
from orchestrator.tick.dry_run import DryRun
from orchestrator.tick.model import TICK_ERROR_STATUS, TickOptions, TickReport


class Ticker(DryRun):
    """Runs ticks: `tick()` once per tick; `finish()` after a signal stopped one."""

    def tick(self, options: TickOptions = TickOptions()) -> TickReport:
        if options.dry_run:
            self._dry_run(options)
            return self.report
        status = TICK_ERROR_STATUS
        fault: OrchestratorError | None = None
        try:
            self._courier.start()
            settle_wal(self.engine)
            self.recover()
            self.advance_approved()
            self._claim_and_run(options)
            fault = self.report.host_fault
            status = self.report.exit_code if fault is None else fault.exit_code
        except OrchestratorError as exc:
            status = exc.exit_code
            raise
        finally:
            # The tick row is closed however the tick ends, with the status
            # the deliveries make too (the courier closes first). When that
            # fails too, the error already on its way out (or said) is the
            # one that explains it.
            self._courier.close()  # waits for no hook past its timeout
            self._delivery.settle(self.report)
            if status == 0 and fault is None:
                status = self.report.exit_code
            try:
                self._close_tick(exit_code=status)
            except Exception:
                if status == 0:
                    raise
        if self._tick_id is not None:
            checkpoint(self.engine)  # a tick that wrote leaves no WAL behind
        if fault is not None:
            raise fault
        return self.report
