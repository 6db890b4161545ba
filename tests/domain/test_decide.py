"""`decide`: the transition out of `stage:running`, as plain tables."""

from __future__ import annotations

import pytest

from orchestrator.domain.decide import (
    HaltReason,
    Outcome,
    RunHistory,
    StagePolicy,
    decide,
    verdict_outcome,
)
from orchestrator.domain.pipeline import COMPLETE, Event, State, Status
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.domain.verdict import Verdict

STAGES = ("research", "implement")


def v(score: float, passed: bool = False, hint: str = "") -> Verdict:
    return Verdict(passed=passed, score=score, reasons=(), next_hint=hint)


@pytest.mark.parametrize(
    ("verdict", "pass_score", "expected"),
    [
        (v(0.9, True), 0.0, Outcome.PASSED),
        (v(0.9, True), 0.9, Outcome.PASSED),
        (v(0.89, True), 0.9, Outcome.FAILED),
        (v(1.0, False), 0.0, Outcome.FAILED),
    ],
)
def test_verdict_outcome(verdict: Verdict, pass_score: float, expected: Outcome) -> None:
    assert verdict_outcome(verdict, pass_score) is expected


CASES = [
    # id, stage, policy, history, outcome, verdict, event, state, halt, hint
    (
        "pass-ungated-next-stage",
        "research",
        StagePolicy(),
        RunHistory(hint="old"),
        Outcome.PASSED,
        v(1, True),
        Event.STAGE_PASSED,
        State("implement", Status.READY),
        None,
        "",
    ),
    (
        "pass-last-stage-complete",
        "implement",
        StagePolicy(),
        RunHistory(),
        Outcome.PASSED,
        v(1, True),
        Event.STAGE_PASSED,
        State(COMPLETE, Status.COMPLETE),
        None,
        "",
    ),
    (
        "pass-gated-awaits",
        "research",
        StagePolicy(gate=True),
        RunHistory(),
        Outcome.PASSED,
        v(1, True),
        Event.AWAIT_APPROVAL,
        State("research", Status.AWAITING_APPROVAL),
        None,
        "",
    ),
    (
        "fail-retries-with-verdict-hint",
        "research",
        StagePolicy(),
        RunHistory(hint="reject note"),
        Outcome.FAILED,
        v(0.3, hint="add tests"),
        Event.RETRY,
        State("research", Status.READY),
        None,
        "add tests",
    ),
    (
        "invalid-keeps-previous-hint",
        "research",
        StagePolicy(),
        RunHistory(hint="reject note"),
        Outcome.INVALID_VERDICT,
        None,
        Event.RETRY,
        State("research", Status.READY),
        None,
        "reject note",
    ),
    (
        "max-attempts",
        "research",
        StagePolicy(max_attempts=2),
        RunHistory(scores=(0.1,), counted_attempts=1),
        Outcome.FAILED,
        v(0.5),
        Event.GIVE_UP,
        State("research", Status.HALTED),
        HaltReason.MAX_ATTEMPTS,
        "",
    ),
    (
        "plateau-wins-over-max-attempts",
        "research",
        StagePolicy(max_attempts=4),
        RunHistory(scores=(0.5, 0.5, 0.5), counted_attempts=3),
        Outcome.FAILED,
        v(0.5),
        Event.GIVE_UP,
        State("research", Status.HALTED),
        HaltReason.SCORE_PLATEAU,
        "",
    ),
    (
        "worker-error-counts-toward-max",
        "research",
        StagePolicy(max_attempts=3),
        RunHistory(counted_attempts=2),
        Outcome.WORKER_ERROR,
        None,
        Event.GIVE_UP,
        State("research", Status.HALTED),
        HaltReason.MAX_ATTEMPTS,
        "",
    ),
    (
        "crash-counts-toward-max",
        "research",
        StagePolicy(max_attempts=3),
        RunHistory(counted_attempts=1),
        Outcome.CRASHED,
        None,
        Event.RETRY,
        State("research", Status.READY),
        None,
        "",
    ),
    (
        "interrupt-counts-toward-nothing",
        "research",
        StagePolicy(max_attempts=1),
        RunHistory(counted_attempts=0, interrupt_streak=1),
        Outcome.INTERRUPTED,
        None,
        Event.RETRY,
        State("research", Status.READY),
        None,
        "",
    ),
    (
        "interrupt-streak-halts",
        "research",
        StagePolicy(max_interrupts=3),
        RunHistory(interrupt_streak=2, hint="h"),
        Outcome.INTERRUPTED,
        None,
        Event.GIVE_UP,
        State("research", Status.HALTED),
        HaltReason.INTERRUPTED,
        "h",
    ),
    (
        "host-error-counts-toward-nothing-not-even-the-streak",
        "research",
        StagePolicy(max_attempts=1, max_interrupts=1),
        RunHistory(counted_attempts=1, interrupt_streak=5, hint="h"),
        Outcome.HOST_ERROR,
        None,
        Event.RETRY,
        State("research", Status.READY),
        None,
        "h",
    ),
    (
        "database-error-counts-toward-nothing-not-even-the-streak",
        "research",
        StagePolicy(max_attempts=1, max_interrupts=1),
        RunHistory(counted_attempts=1, interrupt_streak=5, hint="h"),
        Outcome.DATABASE_ERROR,
        None,
        Event.RETRY,
        State("research", Status.READY),
        None,
        "h",
    ),
]


@pytest.mark.parametrize(
    ("stage", "policy", "history", "outcome", "verdict", "event", "state", "halt", "hint"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decide(
    stage: str,
    policy: StagePolicy,
    history: RunHistory,
    outcome: Outcome,
    verdict: Verdict | None,
    event: Event,
    state: State,
    halt: HaltReason | None,
    hint: str,
) -> None:
    decision = decide(stage, STAGES, policy, history, outcome, verdict)
    assert (decision.event, decision.state, decision.halt_reason, decision.next_hint) == (
        event,
        state,
        halt,
        hint,
    )


def test_constant_score_halts_at_patience_plus_one() -> None:
    policy = StagePolicy(max_attempts=100, plateau=PlateauPolicy(patience=3))
    scores: tuple[float, ...] = ()
    for attempt in range(1, 10):
        decision = decide(
            "research", STAGES, policy, RunHistory(scores, attempt - 1), Outcome.FAILED, v(0.5)
        )
        if decision.halt_reason is not None:
            break
        scores = (*scores, 0.5)
    assert attempt == 4
    assert decision.halt_reason is HaltReason.SCORE_PLATEAU
    assert decision.plateau is not None and decision.plateau.counted == 4


def test_invalid_verdicts_do_not_enter_the_plateau_window() -> None:
    policy = StagePolicy(max_attempts=100)
    decision = decide(
        "research", STAGES, policy, RunHistory((0.5, 0.5, 0.5), 10), Outcome.INVALID_VERDICT
    )
    assert decision.event is Event.RETRY
    assert decision.plateau is not None and decision.plateau.counted == 3


def test_database_errors_are_no_part_of_the_history() -> None:
    """An attempt the database stopped neither counts toward max_attempts
    nor breaks (or extends) an interrupt streak (issue 17)."""
    history = RunHistory.of(
        [
            (Outcome.INTERRUPTED, None),
            (Outcome.DATABASE_ERROR, None),
            (Outcome.FAILED, 0.2),
            (Outcome.DATABASE_ERROR, None),
            (Outcome.INTERRUPTED, None),
        ],
        hint="",
    )
    assert (history.counted_attempts, history.interrupt_streak, history.scores) == (1, 1, (0.2,))


# -- runaway guards (issue 15) -------------------------------------------------


def test_no_change_streak_halts_at_its_limit_and_a_change_resets_it() -> None:
    policy = StagePolicy(max_attempts=10, halt_after_no_change=2)
    history = RunHistory.of(
        [(Outcome.FAILED, 0.1), (Outcome.FAILED, 0.2)], hint="", changes=[False, True]
    )
    assert history.no_change_streak == 0
    first = decide("research", STAGES, policy, history, Outcome.FAILED, v(0.3), changed=False)
    assert first.halt_reason is None
    history = RunHistory.of(
        [(Outcome.FAILED, 0.1), (Outcome.FAILED, 0.2)], hint="", changes=[True, False]
    )
    second = decide("research", STAGES, policy, history, Outcome.FAILED, v(0.3), changed=False)
    assert second.halt_reason is HaltReason.NO_PROGRESS
    # Not looked at (None) neither extends nor breaks the streak; a pass wins.
    unknown = decide("research", STAGES, policy, history, Outcome.FAILED, v(0.3), changed=None)
    assert unknown.halt_reason is None
    passed = decide("research", STAGES, policy, history, Outcome.PASSED, v(1.0), changed=False)
    assert passed.halt_reason is None
    off = StagePolicy(max_attempts=10)
    assert (
        decide("research", STAGES, off, history, Outcome.FAILED, changed=False).halt_reason is None
    )


def test_backoff_counts_toward_nothing_and_keeps_its_own_streak() -> None:
    history = RunHistory.of(
        [(Outcome.FAILED, 0.2), (Outcome.BACKOFF, None), (Outcome.BACKOFF, None)],
        hint="h",
        changes=[False, None, None],
    )
    assert history.counted_attempts == 1
    assert history.backoff_streak == 2
    assert history.no_change_streak == 1
    policy = StagePolicy(max_attempts=1)
    decision = decide("research", STAGES, policy, history, Outcome.BACKOFF)
    assert decision.state.status is Status.READY and decision.halt_reason is None
    assert (
        RunHistory.of([(Outcome.BACKOFF, None), (Outcome.FAILED, 0.1)], hint="").backoff_streak == 0
    )
