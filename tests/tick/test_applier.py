"""The applier alone: a decision becomes the task's transition in the
caller's transaction, fenced by the task's version, and a halt of a lost
stage is said only once its transaction committed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.domain.decide import Decision, HaltReason
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx


def test_a_decision_is_applied_and_a_halt_counted(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    claim = b.claim()
    decision = Decision(
        event=Event.GIVE_UP,
        state=State("only", Status.HALTED),
        reason="enough",
        halt_reason=HaltReason.MAX_ATTEMPTS,
        next_hint="",
    )
    with b.tx.write() as conn:
        b.applier().apply(conn, claim.task, decision, claim.attempt_id, db_now(conn))
        repo.close_attempt(
            conn, claim.attempt_id, claim.token, outcome="failed", finished_at=db_now(conn)
        )
    assert project.state("t1") == "only:halted"
    assert project.query("SELECT halt_reason FROM tasks") == [("max_attempts",)]
    assert b.tick.report.halted == 1
    assert check_invariants(project.db_url, allow_running=False) == []
    with pytest.raises(repo.ConflictError), b.tx.write() as conn:  # the version moved on
        b.applier().apply(conn, claim.task, decision, claim.attempt_id, db_now(conn))


def test_a_halt_rolled_back_is_never_said(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    with read_tx(b.engine) as conn:
        [task] = repo.tasks_with_status(conn, Status.READY)
    with pytest.raises(RuntimeError), b.tx.write() as conn:
        b.applier().halt_unknown(conn, task, db_now(conn))
        assert b.said == []  # not while the transaction is open
        raise RuntimeError("rolled back")
    assert b.said == []
    assert project.state("t1") == "only"
    with b.tx.write() as conn:
        b.applier().halt_unknown(conn, task, db_now(conn))
    assert b.said == ["t1: halted (unknown_stage 'only')"]
    assert project.query("SELECT halt_reason FROM tasks") == [("unknown_stage",)]
