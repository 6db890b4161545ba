"""What an attempt is told before it runs (`context.json`), read from the
database and written into its state folder."""

from __future__ import annotations

from pathlib import Path

from orchestrator.agents import context_file
from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
from orchestrator.errors import host_error
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.tick.kept import database_fault
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class Briefer:
    """The context file of one attempt.

    Reads `tasks` and `attempts` (the run's history); writes `context.json`
    in the attempt's state folder. Of the tick: its host fault, and a note
    on the attempt when the disk refused the file."""

    def __init__(
        self, settings: Settings, tx: Transactions, tick: TickRun, notes: AttemptNotes
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.notes = notes

    def context(self, claim: Claim) -> context_file.ContextFile | AttemptRun:
        """What the attempt is told, read before anything runs; a database
        that stays away makes it a `database_error` (counting toward
        nothing), as it would later in the attempt."""
        try:
            return self.tx.retrying(
                lambda _again: context_file.build_context(
                    self.tx.engine,
                    claim.task,
                    claim.pipeline,
                    claim.stage,
                    claim.attempt_id,
                    claim.number,
                    claim.hint,
                )
            )
        except Exception as exc:
            if not database_fault(exc):
                raise
            return AttemptRun(Outcome.DATABASE_ERROR, error=f"cannot read the context: {exc}")

    def write_context(self, context: context_file.ContextFile, state_dir: Path) -> Path | None:
        """Write `context.json`; None when the disk cannot take it. Like a
        capture file on a full disk, that does not fail the attempt: it runs
        without the file (`{context_file}` empty), the error is noted on it,
        and the host's fault stops the tick claiming (74/77)."""
        try:
            return context_file.write_context(context, state_dir)
        except OSError as exc:
            error = host_error(f"cannot write state_root {self.settings.state_root}", exc)
            self.tick.host_fault(error)
            self.notes.note_capture(state_dir, f"context file not written: {error}")
            return None
