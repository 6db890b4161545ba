"""The runaway guards around an attempt: did it change the workspace, and
should a worker that asked to be retried later wait instead of spending an
attempt.

The engine fingerprints the workspace at two points, just before the worker
and just after it ends (before the verifier, whose reports, coverage data
or logs are not the worker's progress), and judges the pair once the
attempt's outcome is known; the decision itself stays in `domain.decide`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.config import StageConfig
from orchestrator.domain.decide import Outcome
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.workspace.fingerprint import fingerprint

# Outcomes after which the worker may have touched the workspace.
_RAN = frozenset(
    {
        Outcome.PASSED,
        Outcome.FAILED,
        Outcome.INVALID_VERDICT,
        Outcome.WORKER_ERROR,
        Outcome.VERIFIER_ERROR,
        Outcome.TIMEOUT,
    }
)


class WorkspaceWatch:
    """The workspace's fingerprint before each running attempt (by attempt
    id), so the one after can say whether the attempt changed it.

    Only stages with a worker and `halt_after_no_change` are watched: the
    fingerprint costs a few git calls or a bounded walk of the tree, which
    nobody should pay for a guard they did not ask for."""

    def __init__(self) -> None:
        self._before: dict[int, str | None] = {}
        self._after: dict[int, str | None] = {}
        self._lock = threading.Lock()

    def before(self, attempt_id: int, stage: StageConfig, workspace: Path) -> None:
        if stage.halt_after_no_change is None or stage.worker is None:
            return
        seen = fingerprint(workspace)
        with self._lock:
            self._before[attempt_id] = seen

    def worker_ended(self, attempt_id: int, workspace: Path) -> None:
        """Fingerprint the workspace as the worker left it, before the
        verifier runs: what the verifier writes is not the worker's doing."""
        with self._lock:
            if attempt_id not in self._before:
                return
        seen = fingerprint(workspace)
        with self._lock:
            self._after[attempt_id] = seen

    def after(
        self, attempt_id: int, workspace: Path, outcome: Outcome
    ) -> tuple[str | None, bool | None]:
        """(fingerprint after the worker, changed); (None, None) when not
        looked at. Without a fingerprint taken when the worker ended (the
        attempt stopped on the way), the workspace is looked at now."""
        with self._lock:
            if attempt_id not in self._before:
                return None, None
            before = self._before.pop(attempt_id)
            taken = attempt_id in self._after
            after = self._after.pop(attempt_id, None)
        if outcome not in _RAN:
            return None, None
        if not taken:
            after = fingerprint(workspace)
        if before is None or after is None:
            return after, None
        return after, after != before


def may_back_off(stage: StageConfig, outcome: Outcome, worker_exit: int | None) -> bool:
    """Whether the worker failed with one of the stage's retry exit codes."""
    return (
        outcome is Outcome.WORKER_ERROR
        and worker_exit is not None
        and worker_exit in stage.retry_exit_codes
    )


def backoff_wait(
    engine: Engine, task: repo.TaskSnapshot, attempt_id: int, stage: StageConfig
) -> tuple[float, int] | None:
    """(seconds to wait, which wait this is) when tries are left, else None
    (the exit then spends an attempt as a `worker_error`)."""
    with read_tx(engine) as conn:
        waits = repo.run_history(conn, task, excluding=attempt_id).backoff_streak
    if waits >= stage.backoff.tries:
        return None
    return stage.backoff.delay(waits), waits + 1
