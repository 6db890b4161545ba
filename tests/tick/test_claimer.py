"""The claimer alone, on a real database: it claims a ready task and opens
its attempt in one committed transaction, passes over a task whose attempt
holds a lease, halts a stage the configuration lost, moves approved gates
on, and stops claiming at its bounds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from e2e.e2e_support import PASS, stage
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.domain.decide import Outcome
from orchestrator.domain.verdict import Verdict
from orchestrator.ext.model import AttemptRun, TickOptions

ONE_STAGE = stage("only", worker=["true"], verifier=PASS)
PASSED = Verdict(passed=True, score=1.0, reasons=(), next_hint="")


def test_it_claims_a_ready_task_and_opens_its_attempt(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(ONE_STAGE)
    b.add("t1")
    token = uuid.uuid4().hex
    claim = b.claimer().claim((), None, token)
    assert claim is not None
    assert (claim.task.slug, claim.stage.name, claim.number, claim.token) == (
        "t1",
        "only",
        1,
        token,
    )
    # Committed before anything runs: another connection sees it.
    [(status, host)] = project.query("SELECT status, host FROM tasks WHERE slug = 't1'")
    assert (status, host) == ("running", b.me.host)
    [(number, lease, finished, tick_id)] = project.query(
        "SELECT number, lease_token, finished_at, tick_id FROM attempts"
    )
    assert (number, lease, finished) == (1, token, None)
    assert tick_id == b.tick.tick_id is not None
    assert b.tick.report.claimed == 1
    assert check_invariants(project.db_url) == []


def test_a_task_whose_attempt_holds_a_lease_is_passed_over(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(ONE_STAGE)
    b.add("t1", "t2")
    first = b.claim()
    # Another claimer (another tick) finds t1 leased and takes t2; then nothing.
    other = bench()
    second = other.claimer().claim((), None, uuid.uuid4().hex)
    assert second is not None
    assert (first.task.slug, second.task.slug) == ("t1", "t2")
    assert other.claimer().claim((), None, uuid.uuid4().hex) is None
    assert other.claimer().claim((), "t1", uuid.uuid4().hex) is None  # asked by name too
    assert project.query("SELECT count(*) FROM attempts")[0][0] == 2


def test_a_stage_the_config_lost_is_halted_not_claimed(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(ONE_STAGE)
    b.add("t1")
    lost = bench(stage("renamed", worker=["true"], verifier=PASS))
    assert lost.claimer().claim((), None, uuid.uuid4().hex) is None
    assert project.state("t1") == "only:halted"
    [(reason,)] = project.query("SELECT halt_reason FROM tasks")
    assert reason == "unknown_stage"
    assert lost.tick.report.halted == 1
    assert lost.said == ["t1: halted (unknown_stage 'only')"]  # said once committed
    assert project.query("SELECT count(*) FROM attempts")[0][0] == 0


def test_an_approved_gate_moves_on(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(
        stage("research", worker=["true"], verifier=PASS, gate=True)
        + stage("implement", worker=["true"], verifier=PASS)
    )
    b.add("t1")
    b.claimer().advance_approved()
    assert b.tick.report.advanced == 0  # nothing approved: nothing written
    assert b.tick.tick_id is None
    assert project.query("SELECT count(*) FROM ticks")[0][0] == 0
    # Through the gate by hand: research passed, then approved.
    assert project.cli("approve", "t1").exit_code != 0  # not awaiting approval yet
    claim = b.claim()
    b.recorder().record(claim, AttemptRun(Outcome.PASSED, verdict=PASSED))
    assert project.state("t1") == "research:awaiting_approval"
    assert project.cli("approve", "t1").exit_code == 0
    b.claimer().advance_approved()
    assert project.state("t1") == "implement"
    assert b.tick.report.advanced == 1
    assert "t1: research:approved -> implement" in b.said
    assert check_invariants(project.db_url) == []


def test_claiming_stops_at_its_bounds(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(ONE_STAGE)
    claimer = b.claimer()
    now = time.monotonic()
    assert claimer.may_claim(TickOptions(), 5, now)
    assert not claimer.may_claim(TickOptions(max_tasks=2), 2, now)
    assert not claimer.may_claim(TickOptions(max_seconds=1), 0, now - 2)
    project.config.write_text(project.config.read_text() + "\n# edited\n")
    assert not claimer.may_claim(TickOptions(), 0, now)
    assert b.tick.report.stopped_claiming == "the configuration changed"
