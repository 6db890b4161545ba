"""The recorder alone, on a real database: it closes an attempt and applies
what `decide` makes of it in one transaction, fenced by the task's version
and the lease token; a result that lost its fence is kept aside and changes
nothing; with a chain the same transaction claims the next task."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from e2e.e2e_support import PASS, stage
from sqlalchemy import create_engine, text
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.domain.decide import Outcome
from orchestrator.domain.verdict import Verdict
from orchestrator.ext.model import AttemptRun, Chain, Cooldown, TickOptions

TWO_STAGES = stage("first", worker=["true"], verifier=PASS, max_attempts=3) + stage(
    "second", worker=["true"], verifier=PASS
)


def _verdict(passed: bool, score: float) -> Verdict:
    return Verdict(passed=passed, score=score, reasons=("looked",), next_hint="again")


def _events(project: Project) -> list[str]:
    return [row[0] for row in project.query("SELECT event FROM transitions ORDER BY seq")]


def test_it_closes_the_attempt_and_applies_the_decision(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1")
    claim = b.claim()
    ready, following = b.recorder().record(
        claim, AttemptRun(Outcome.PASSED, verdict=_verdict(True, 0.9), worker_exit=0)
    )
    assert (ready, following) == (True, None)
    [(outcome, score, finished, reasons)] = project.query(
        "SELECT outcome, score, finished_at, reasons FROM attempts"
    )
    assert (outcome, score, json.loads(reasons)) == ("passed", 0.9, ["looked"])
    assert finished is not None
    assert project.state("t1") == "second"
    assert _events(project) == ["add", "claim", "stage_passed"]
    assert b.tick.report.outcomes == {"passed": 1}
    assert b.said == ["t1: first attempt 1 passed score 0.90 -> second"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_failed_attempt_is_retried_with_its_hint(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1")
    b.recorder().record(b.claim(), AttemptRun(Outcome.FAILED, verdict=_verdict(False, 0.2)))
    assert project.state("t1") == "first"
    [(hint,)] = project.query("SELECT next_hint FROM tasks")
    assert hint == "again"
    assert b.claim().number == 2  # the next attempt of the same stage


def test_a_result_whose_task_moved_is_kept_aside_and_changes_nothing(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1")
    claim = b.claim()
    assert project.cli("halt", "t1").exit_code == 0  # bumps the task's version
    ready, _ = b.recorder().record(claim, AttemptRun(Outcome.PASSED, verdict=_verdict(True, 1)))
    assert ready is True  # may be: someone else moved it
    [(outcome, late)] = project.query("SELECT outcome, late_result FROM attempts")
    assert outcome == "interrupted"
    assert json.loads(late)["outcome"] == "passed"
    assert project.state("t1") == "first:halted"
    assert "stage_passed" not in _events(project)
    assert b.tick.report.outcomes == {"interrupted": 1}


def test_a_result_whose_lease_was_taken_is_kept_aside(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1")
    claim = b.claim()
    # Another tick closed it meanwhile (recovery): our close finds another token.
    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        taken = conn.execute(
            text("UPDATE attempts SET lease_token = 'someone-else' WHERE lease_token = :t"),
            {"t": claim.token},
        )
        assert taken.rowcount == 1
    engine.dispose()
    assert b.recorder().record(claim, AttemptRun(Outcome.PASSED, verdict=_verdict(True, 1))) == (
        True,
        None,
    )
    [(outcome, late)] = project.query("SELECT outcome, late_result FROM attempts")
    assert outcome is None  # not ours to close
    assert json.loads(late)["outcome"] == "passed"
    assert project.state("t1") == "first:running"
    assert b.tick.report.outcomes == {}


def test_with_a_chain_the_record_claims_the_next_task(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1", "t2")
    claimer = b.claimer()
    recorder = b.recorder(claimer)
    first = b.claim("t1")
    chain = Chain(TickOptions(), 1, time.monotonic(), Cooldown(0))
    _, following = recorder.record(
        first, AttemptRun(Outcome.PASSED, verdict=_verdict(True, 1)), chain
    )
    assert following is not None
    assert following.token == chain.token
    assert following.task.slug == "t1"  # ready again at once: retry_interval is 0
    assert b.tick.report.claimed == 2
    assert project.state("t1") == "second:running"


def test_a_released_claim_is_closed_interrupted(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(TWO_STAGES)
    b.add("t1")
    b.recorder().release(b.claim())
    [(outcome, error)] = project.query("SELECT outcome, error FROM attempts")
    assert outcome == "interrupted"
    assert error == "the tick stopped before it started"
    assert project.state("t1") == "first"
    assert check_invariants(project.db_url, allow_running=False) == []
