"""What the runaway guards learn of an attempt: whether its worker changed
the workspace, and whether a retry exit code makes the task wait instead
of spending an attempt."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings, StageConfig
from orchestrator.domain.decide import Outcome
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.guards import watch as guards
from orchestrator.tick.transactions import Transactions


class RunawayGuards:
    """The facts the no-change and backoff guards need, gathered around the
    worker. Reads the workspace (its fingerprint) and `attempts` (the
    backoff's earlier waits); writes nothing: the record does."""

    def __init__(self, settings: Settings, tx: Transactions, watch: guards.WorkspaceWatch) -> None:
        self.settings = settings
        self.tx = tx
        self.watch = watch  # the no-change guard's before/after

    def before(self, attempt_id: int, stage: StageConfig, workspace: Path) -> None:
        self.watch.before(attempt_id, stage, workspace)

    def worker_ended(self, attempt_id: int, workspace: Path) -> None:
        self.watch.worker_ended(attempt_id, workspace)

    def judge(self, claim: Claim, result: AttemptRun) -> None:
        """The runaway guards' facts about an attempt that ended: whether it
        changed the workspace, and whether its worker waits and retries."""
        workspace = self.settings.workspace_root / claim.task.slug
        result.workspace_hash, result.workspace_changed = self.watch.after(
            claim.attempt_id, workspace, result.outcome
        )
        if guards.may_back_off(claim.stage, result.outcome, result.worker_exit):
            wait = self.tx.retrying(
                lambda _again: guards.backoff_wait(
                    self.tx.engine, claim.task, claim.attempt_id, claim.stage
                )
            )
            if wait is not None:
                result.outcome, result.backoff_seconds = Outcome.BACKOFF, wait[0]
                result.error = (
                    f"{result.error}; exit {result.worker_exit} is a retry exit code: "
                    f"waiting {wait[0]:g}s (wait {wait[1]} of {claim.stage.backoff.tries})"
                )
