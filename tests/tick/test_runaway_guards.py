"""The runaway guards alone: whether the worker changed the workspace (the
verifier's writes are not its doing), and a retry exit code that makes the
task wait instead of spending an attempt, until its tries run out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator.domain.decide import Outcome
from orchestrator.ext.model import AttemptRun
from orchestrator.guards.watch import WorkspaceWatch
from orchestrator.tick.runaway import RunawayGuards


def _guards(b: Bench) -> RunawayGuards:
    return RunawayGuards(b.settings, b.tx, WorkspaceWatch())


def test_a_worker_that_changed_nothing_is_seen(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS, halt_after_no_change=2))
    b.add("t1")
    claim = b.claim()
    workspace = b.settings.workspace_root / "t1"
    workspace.mkdir(parents=True)
    (workspace / "a.txt").write_text("one")
    guards = _guards(b)
    guards.before(claim.attempt_id, claim.stage, workspace)
    guards.worker_ended(claim.attempt_id, workspace)
    (workspace / "verifier-wrote.txt").write_text("not the worker's doing")
    unchanged = AttemptRun(Outcome.FAILED)
    guards.judge(claim, unchanged)
    assert unchanged.workspace_changed is False
    assert unchanged.workspace_hash is not None

    guards.before(claim.attempt_id, claim.stage, workspace)
    (workspace / "a.txt").write_text("two")
    guards.worker_ended(claim.attempt_id, workspace)
    changed = AttemptRun(Outcome.FAILED)
    guards.judge(claim, changed)
    assert changed.workspace_changed is True


def test_a_retry_exit_code_backs_off_until_the_tries_run_out(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(
        stage(
            "only",
            worker=["true"],
            verifier=PASS,
            retry_exit_codes=[75],
            backoff={"initial": 10, "factor": 2, "max": 100, "tries": 2},
        )
    )
    b.add("t1")
    waits: list[tuple[Outcome, float | None]] = []
    for _ in range(3):
        claim = b.claim()
        result = AttemptRun(Outcome.WORKER_ERROR, error="worker exited 75", worker_exit=75)
        _guards(b).judge(claim, result)
        waits.append((result.outcome, result.backoff_seconds))
        # Recorded with no wait at all, so the next claim comes at once.
        waited = 0.0 if result.backoff_seconds is not None else None
        b.recorder().record(claim, dataclasses.replace(result, backoff_seconds=waited))
    assert waits == [
        (Outcome.BACKOFF, 10),
        (Outcome.BACKOFF, 20),
        (Outcome.WORKER_ERROR, None),  # two waits in a row: it spends an attempt now
    ]
