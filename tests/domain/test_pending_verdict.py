"""Verdicts that wait: how a pending verdict is parsed (hostile values
included), and what `decide` does with it (nothing spent, no score, a hint
for the next attempt, and a failure once `pending_timeout` has passed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.domain.decide import (
    HaltReason,
    Outcome,
    RunHistory,
    StagePolicy,
    decide,
)
from orchestrator.domain.pipeline import Event, Status
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.domain.verdict import (
    RECHECK_DEFAULT,
    RECHECK_MAX,
    RECHECK_MIN,
    Verdict,
    parse_verdict,
    strict_pass_problem,
)

STAGES = ("ci",)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def pending(reasons: tuple[str, ...] = ("build running",), hint: str = "") -> Verdict:
    return Verdict(
        passed=False, score=0.0, reasons=reasons, next_hint=hint, pending=True, recheck_seconds=30
    )


def test_a_pending_verdict_is_found_in_prose_and_ignores_pass_and_score() -> None:
    text = 'CI is not done.\n{"pending": true, "pass": true, "score": 1, "reasons": ["lint"]}'
    verdict = parse_verdict(text)
    assert verdict is not None and verdict.pending
    assert (verdict.passed, verdict.score, verdict.reasons) == (False, 0.0, ("lint",))
    assert verdict.recheck_seconds == RECHECK_DEFAULT
    # An object with only the `pending` key is a verdict, not prose.
    later = parse_verdict('{"pass": false}\nthen {"pending": true, "recheck_seconds": 5}')
    assert later is not None and later.pending and later.recheck_seconds == 5


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (120, 120.0),
        ("90", 90.0),
        (0, RECHECK_MIN),
        (-5, RECHECK_MIN),
        (1e300, RECHECK_MAX),
        (10**400, RECHECK_DEFAULT),  # too large for a float
        ("soon", RECHECK_DEFAULT),
        (None, RECHECK_DEFAULT),
        (True, RECHECK_DEFAULT),
        ([5], RECHECK_DEFAULT),
        ({"s": 5}, RECHECK_DEFAULT),
        ("NaN", RECHECK_DEFAULT),
        ("Infinity", RECHECK_DEFAULT),
    ],
)
def test_recheck_seconds_is_coerced_and_clamped(raw: object, expected: float) -> None:
    text = '{"pending": true, "recheck_seconds": ' + json.dumps(raw) + "}"
    if isinstance(raw, int) and raw > 10**300:
        text = '{"pending": true, "recheck_seconds": ' + str(raw) + "}"
    verdict = parse_verdict(text)
    assert verdict is not None and verdict.pending
    assert verdict.recheck_seconds == expected


@pytest.mark.parametrize("raw", [1, "yes", "1", None, [True], "false", False, {"a": 1}])
def test_only_true_makes_a_verdict_pending(raw: object) -> None:
    verdict = parse_verdict(json.dumps({"pending": raw, "pass": False, "score": 0.4}))
    assert verdict is not None and not verdict.pending
    assert verdict.score == 0.4


@pytest.mark.parametrize("raw", [True, "true", " TRUE "])
def test_true_in_any_spelling_is_pending(raw: object) -> None:
    verdict = parse_verdict(json.dumps({"pending": raw}))
    assert verdict is not None and verdict.pending


def test_a_pending_verdict_passes_the_strict_rule_and_says_so_in_to_dict() -> None:
    text = '{"pending": true, "reasons": ["a\\u0000b"]}'
    assert strict_pass_problem(text) is None
    verdict = parse_verdict(text)
    assert verdict is not None
    assert verdict.reasons == ("ab",)  # cleaned like any verdict
    assert verdict.to_dict()["pending"] is True
    plain = parse_verdict('{"pass": true}')
    assert plain is not None and "pending" not in plain.to_dict()


def test_pending_spends_nothing_adds_no_score_and_hints_the_reasons() -> None:
    policy = StagePolicy(max_attempts=2, plateau=PlateauPolicy(patience=1))
    history = RunHistory.of([(Outcome.FAILED, 0.3)], hint="old")
    decision = decide(
        "ci", STAGES, policy, history, Outcome.PENDING, pending(("lint failed", "build")), now=T0
    )
    assert decision.event is Event.RETRY and decision.state.status is Status.READY
    assert decision.outcome is None and decision.halt_reason is None
    assert decision.next_hint == "lint failed; build"
    # Many pendings after it: still one counted attempt, one score.
    after = RunHistory.of(
        [(Outcome.FAILED, 0.3), *[(Outcome.PENDING, None)] * 10],
        hint="h",
        started=[T0] * 11,
    )
    assert after.counted_attempts == 1 and after.scores == (0.3,)
    assert after.pending_since == T0
    # A next_hint of the pending verdict wins over its reasons.
    hinted = decide("ci", STAGES, policy, after, Outcome.PENDING, pending(hint="wait"), now=T0)
    assert hinted.next_hint == "wait" and hinted.event is Event.RETRY


def test_pending_is_not_an_interrupt_and_ends_an_interrupt_streak() -> None:
    history = RunHistory.of(
        [(Outcome.INTERRUPTED, None), (Outcome.INTERRUPTED, None), (Outcome.PENDING, None)],
        hint="",
    )
    assert history.interrupt_streak == 0 and history.counted_attempts == 0
    decision = decide(
        "ci", STAGES, StagePolicy(max_interrupts=3), history, Outcome.INTERRUPTED, now=T0
    )
    assert decision.halt_reason is None  # a streak of one, not three


def test_the_pending_run_starts_again_after_a_counted_attempt() -> None:
    history = RunHistory.of(
        [(Outcome.PENDING, None), (Outcome.FAILED, 0.1), (Outcome.PENDING, None)],
        hint="",
        started=[T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)],
    )
    assert history.pending_since == T0 + timedelta(minutes=2)
    # Interrupted rechecks and backoffs do not end a run of pendings.
    kept = RunHistory.of(
        [(Outcome.PENDING, None), (Outcome.INTERRUPTED, None), (Outcome.PENDING, None)],
        hint="",
        started=[T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)],
    )
    assert kept.pending_since == T0
    done = RunHistory.of(
        [(Outcome.PENDING, None), (Outcome.PASSED, 1.0)], hint="", started=[T0, T0]
    )
    assert done.pending_since is None


def test_past_pending_timeout_the_attempt_is_recorded_failed() -> None:
    policy = StagePolicy(max_attempts=3, pending_timeout=600)
    history = RunHistory.of([(Outcome.PENDING, None)] * 3, hint="", started=[T0, T0, T0])
    inside = decide(
        "ci", STAGES, policy, history, Outcome.PENDING, pending(), now=T0 + timedelta(seconds=599)
    )
    assert inside.outcome is None and inside.event is Event.RETRY
    late = decide(
        "ci",
        STAGES,
        policy,
        history,
        Outcome.PENDING,
        pending(("check build pending",)),
        now=T0 + timedelta(seconds=600),
    )
    assert late.outcome is Outcome.FAILED and late.event is Event.RETRY
    assert "still pending after 600s" in late.next_hint
    assert "check build pending" in late.next_hint
    assert "2 attempts left" in late.reason
    assert late.plateau is not None and late.plateau.plateau is False


def test_a_timed_out_pending_verdict_can_use_the_last_attempt() -> None:
    policy = StagePolicy(max_attempts=1, pending_timeout=10)
    history = RunHistory.of([(Outcome.PENDING, None)], hint="", started=[T0])
    decision = decide(
        "ci", STAGES, policy, history, Outcome.PENDING, pending(), now=T0 + timedelta(hours=1)
    )
    assert decision.outcome is Outcome.FAILED
    assert decision.halt_reason is HaltReason.MAX_ATTEMPTS
    assert decision.state.status is Status.HALTED


def test_a_first_pending_verdict_never_times_out_without_a_clock() -> None:
    decision = decide("ci", STAGES, StagePolicy(pending_timeout=0), RunHistory(), Outcome.PENDING)
    assert decision.outcome is None and decision.event is Event.RETRY


def test_an_interrupted_recheck_still_awaits_the_verdict() -> None:
    waits = RunHistory.of([(Outcome.PENDING, None), (Outcome.INTERRUPTED, None)], hint="")
    assert waits.awaiting_verdict
    backoff = RunHistory.of([(Outcome.PENDING, None), (Outcome.HOST_ERROR, None)], hint="")
    assert backoff.awaiting_verdict
    judged = RunHistory.of([(Outcome.PENDING, None), (Outcome.FAILED, 0.2)], hint="")
    assert not judged.awaiting_verdict and not RunHistory().awaiting_verdict
