"""What an attempt is told before it runs (`context.json`) and what the
runaway guards learn after it ran (did the workspace change; does a retry
exit code make the task wait instead of spending an attempt)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.agents import context_file
from orchestrator.domain.decide import Outcome
from orchestrator.errors import host_error
from orchestrator.guards import watch as guards
from orchestrator.tick.kept import database_fault
from orchestrator.tick.model import AttemptRun, Claim
from orchestrator.tick.workspace import Workspaces


class Briefing(Workspaces):
    """The context file and the runaway guards of one attempt."""

    def _context(self, claim: Claim) -> context_file.ContextFile | AttemptRun:
        """What the attempt is told, read before anything runs; a database
        that stays away makes it a `database_error` (counting toward
        nothing), as it would later in the attempt."""
        try:
            return self._retrying(
                lambda _again: context_file.build_context(
                    self.engine,
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

    def _write_context(self, context: context_file.ContextFile, state_dir: Path) -> Path | None:
        """Write `context.json`; None when the disk cannot take it. Like a
        capture file on a full disk, that does not fail the attempt: it runs
        without the file (`{context_file}` empty), the error is noted on it,
        and the host's fault stops the tick claiming (74/77)."""
        try:
            return context_file.write_context(context, state_dir)
        except OSError as exc:
            error = host_error(f"cannot write state_root {self.settings.state_root}", exc)
            self._host_fault(error)
            self._note_capture(state_dir, f"context file not written: {error}")
            return None

    def _guard(self, claim: Claim, result: AttemptRun) -> None:
        """The runaway guards' facts about an attempt that ended: whether it
        changed the workspace, and whether its worker waits and retries."""
        workspace = self.settings.workspace_root / claim.task.slug
        result.workspace_hash, result.workspace_changed = self._watch.after(
            claim.attempt_id, workspace, result.outcome
        )
        if guards.may_back_off(claim.stage, result.outcome, result.worker_exit):
            wait = self._retrying(
                lambda _again: guards.backoff_wait(
                    self.engine, claim.task, claim.attempt_id, claim.stage
                )
            )
            if wait is not None:
                result.outcome, result.backoff_seconds = Outcome.BACKOFF, wait[0]
                result.error = (
                    f"{result.error}; exit {result.worker_exit} is a retry exit code: "
                    f"waiting {wait[0]:g}s (wait {wait[1]} of {claim.stage.backoff.tries})"
                )
