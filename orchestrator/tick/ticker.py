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

`Ticker` builds the tick's jobs, each from the few collaborators it needs,
and runs them in order; they share one `TickRun` (see docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.events.courier import Courier
from orchestrator.ext.hooks import Feature
from orchestrator.ext.model import TICK_ERROR_STATUS, Command, TickOptions, TickReport
from orchestrator.ext.registry import Registry
from orchestrator.guards import watch as guards
from orchestrator.storage.db import checkpoint, settle_wal
from orchestrator.tick.applier import Applier
from orchestrator.tick.attempt import AttemptRunner
from orchestrator.tick.briefing import Briefer
from orchestrator.tick.claim_limits import ConfigWatch
from orchestrator.tick.claims import Claimer
from orchestrator.tick.commands import CommandRunner
from orchestrator.tick.delivery import DeliveryFailures
from orchestrator.tick.dry_run import DryRun
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.kernel import TickKernel
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.progress import NoProgress, Progress
from orchestrator.tick.recording import Recorder
from orchestrator.tick.recovery import Recovery
from orchestrator.tick.runaway import RunawayGuards
from orchestrator.tick.scheduler import Scheduler
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions
from orchestrator.tick.workspaces import WorkspacePreparer


class Ticker:
    """Runs ticks: `tick()` once per tick; `finish()` after a signal stopped one.

    The one place the tick's jobs are put together: what each may reach is
    what it is handed here. `features` (from `orchestrator.compose`) add
    their hooks; without them the tick runs the engine alone."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = lambda line: None,
        warn: Callable[[str], None] = lambda line: None,
        progress: Progress | None = None,
        features: Sequence[Feature] = (),
    ) -> None:
        self.engine = engine
        me = HostIdentity.here()
        self.state = TickRun(stop=stop, say=say, warn=warn)
        # Hands events to hooks after their transaction commits.
        self._delivery = DeliveryFailures(warn)  # a failed delivery fails the tick (75)
        self._courier = Courier(settings, engine, warn=self._delivery.warn)
        tx = Transactions(settings, engine, self.state, me, self._courier)
        self.tx = tx
        notes = AttemptNotes()
        applier = Applier(tx, self.state)

        def wrap(command: Command) -> tuple[str, ...]:
            # Late: the registry is built from this kernel, just below.
            return self.registry.wrap_command(command)

        # The features' hooks, built once: the engine calls them by point.
        self.kernel = TickKernel(settings, tx, self.state, me, applier, wrap)
        self.registry = Registry(features, self.kernel)
        config = ConfigWatch(settings.config_path, settings.fingerprint)
        self.claimer = Claimer(settings, tx, self.state, me, applier, config, self.registry)
        recorder = Recorder(settings, tx, self.state, self.claimer, applier, notes, self.registry)
        shown = progress or NoProgress()  # live lines on a terminal
        commands = CommandRunner(
            settings,
            self.state,
            notes,
            shown,
            self.registry.wrap_command,
            ended=self.registry.command_ended,
        )
        attempts = AttemptRunner(
            settings,
            tx,
            self.state,
            notes,
            commands,
            WorkspacePreparer(
                settings,
                tx,
                commands,
                before_workspace=self.registry.before_workspace,
                around_workspace=self.registry.around_workspace,
            ),
            Briefer(settings, tx, self.state, notes),
            RunawayGuards(settings, tx, guards.WorkspaceWatch()),
            recorder,
            shown,
            self.registry,
        )
        self.recovery = Recovery(settings, tx, self.state, me, recorder, applier, self.registry)
        self.scheduler = Scheduler(settings, tx, self.state, self.claimer, attempts, recorder)
        self.dry_run = DryRun(settings, engine, self.state, me, self.recovery, self.registry)

    @property
    def report(self) -> TickReport:
        return self.state.report

    def tick(self, options: TickOptions = TickOptions()) -> TickReport:
        if options.dry_run:
            self.dry_run.show(options)
            return self.report
        status = TICK_ERROR_STATUS
        fault: OrchestratorError | None = None
        self.registry.tick_started(options)
        try:
            self._courier.start()
            settle_wal(self.engine)
            self.recovery.recover()
            self.claimer.advance_approved()
            self.registry.before_claims(options)  # e.g. what earlier ticks left to land
            self.scheduler.claim_and_run(options)
            # e.g. what this tick's attempts finished lands, then `best` restores
            self.registry.after_claims(options)
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
                self.tx.close_tick(exit_code=status)
            except Exception:
                if status == 0:
                    raise
            self.registry.tick_ended(options, self.report, status)
        if self.state.tick_id is not None:
            checkpoint(self.engine)  # a tick that wrote leaves no WAL behind
        if fault is not None:
            raise fault
        return self.report

    def finish(self, exit_code: int) -> None:
        """Record the tick's end when it was stopped by a signal."""
        self.tx.close_tick(exit_code)
