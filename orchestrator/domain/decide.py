"""What happens after an attempt: one pure function, `decide`.

The engine gathers facts (the attempt's outcome and verdict, the run's score
history, the stage's policy) and records whatever `decide` returns; it never
chooses a state itself. Keeping the choice here means every rule of the state machine
(plateau before max_attempts, interrupts that count toward nothing, which
hint the next attempt sees) is testable with plain tables, as procrastinate
does with its `RetryDecision`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from orchestrator.domain.pipeline import Event, State, Status, next_state
from orchestrator.domain.plateau import PlateauDecision, PlateauPolicy, detect_plateau
from orchestrator.domain.verdict import Verdict


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    INVALID_VERDICT = "invalid_verdict"
    WORKER_ERROR = "worker_error"
    VERIFIER_ERROR = "verifier_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"
    # The host could not make or write the attempt's folders (a full disk, a
    # read-only mount, no permission): not the task's fault, so it counts
    # toward nothing, not even the interrupt streak.
    HOST_ERROR = "host_error"
    # The database, not the worker, failed: the tick that ran the attempt
    # could not reach it for longer than `reconnect_seconds` and stopped the
    # attempt. Like a host error it counts toward nothing.
    DATABASE_ERROR = "database_error"
    # The worker exited with one of the stage's `retry_exit_codes` (rate
    # limited, flaky) and tries were left: the task waits out its backoff
    # and the attempt counts toward nothing.
    BACKOFF = "backoff"
    # The verdict waits (`"pending": true`: CI running, a review not in):
    # the attempt spends nothing, adds no score, and the task is rechecked
    # after the verdict's `recheck_seconds`, until the stage's
    # `pending_timeout`, after which the pending attempt is recorded failed.
    PENDING = "pending"


# Outcomes that spend no attempt of `max_attempts`; in a row, they make the
# interrupt streak that `max_interrupts` bounds.
NOT_COUNTED = frozenset({Outcome.INTERRUPTED})
# Outcomes that are no part of the task's history at all: the host's faults
# and the database's.
IGNORED = frozenset({Outcome.HOST_ERROR, Outcome.DATABASE_ERROR})


class HaltReason(StrEnum):
    SCORE_PLATEAU = "score_plateau"
    MAX_ATTEMPTS = "max_attempts"
    INTERRUPTED = "interrupted"
    UNKNOWN_STAGE = "unknown_stage"
    MANUAL = "manual"
    # The task's recorded cost reached its budget (`agents.budget`).
    BUDGET = "budget"
    NO_PROGRESS = "no_progress"
    # The landing step could not land and a person must act (`Refused`).
    LAND_REFUSED = "land_refused"
    # The landing sent the task back `max_land_sendbacks` times and failed
    # once more (a check that keeps failing, a conflict that keeps coming).
    LAND_FAILED = "land_failed"
    # A held task's pull request was closed without merge (who closed it:
    # the reason).
    PR_CLOSED = "pr_closed"
    # A held task came back with feedback more than its feature's bound
    # allows (`max_feedback_rounds`).
    FEEDBACK_ROUNDS = "feedback_rounds"


@dataclass(frozen=True)
class StagePolicy:
    gate: bool = False
    max_attempts: int = 5
    pass_score: float = 0.0
    plateau: PlateauPolicy = field(default_factory=PlateauPolicy)
    max_interrupts: int = 3
    # Halt as no_progress after this many attempts in a row that left the
    # workspace as it was; None: never.
    halt_after_no_change: int | None = None
    # Seconds a run of pending verdicts may last, from its first one.
    pending_timeout: float = 3600.0


@dataclass(frozen=True)
class RunHistory:
    """The current run of the stage, before the attempt being decided."""

    scores: tuple[float, ...] = ()  # valid verdict scores, oldest first
    counted_attempts: int = 0  # attempts that count toward max_attempts
    interrupt_streak: int = 0  # interrupted attempts in a row, newest last
    hint: str = ""  # the hint the attempt being decided was given
    no_change_streak: int = 0  # attempts in a row that changed nothing, newest last
    backoff_streak: int = 0  # backoff waits in a row, newest last
    # When the newest run of pending verdicts began (its first attempt's
    # start); None when the newest counted attempt was not pending.
    pending_since: datetime | None = None
    # Whether the newest counted attempt was pending (the next is a recheck).
    awaiting_verdict: bool = False

    @classmethod
    def of(
        cls,
        attempts: Sequence[tuple[Outcome, float | None]],
        *,
        hint: str,
        changes: Sequence[bool | None] = (),
        started: Sequence[datetime | None] = (),
    ) -> RunHistory:
        """The history of a run from its finished attempts (outcome, score),
        oldest first: the one place that says which outcomes count.
        `changes` says, attempt by attempt, whether the workspace changed
        (None: not looked at, which neither extends nor breaks the streak);
        `started`, when each began (for `pending_since`)."""
        scores: list[float] = []
        counted = streak = unchanged = waits = 0
        pending_since: datetime | None = None
        pending_run = False
        for index, (outcome, score) in enumerate(attempts):
            if outcome in IGNORED:
                continue  # neither counted nor breaking a streak
            if outcome is Outcome.BACKOFF:
                waits += 1
                continue  # spends no attempt, breaks no streak
            waits = 0
            if outcome is Outcome.PENDING:
                if not pending_run:
                    pending_run = True
                    pending_since = started[index] if index < len(started) else None
                streak = 0  # a verdict came back: the stage runs
                continue  # spends no attempt, adds no score
            if outcome not in NOT_COUNTED:
                pending_run, pending_since = False, None
            changed = changes[index] if index < len(changes) else None
            if changed is not None:
                unchanged = 0 if changed else unchanged + 1
            if score is not None and outcome in (Outcome.PASSED, Outcome.FAILED):
                scores.append(float(score))
            if outcome in NOT_COUNTED:
                streak += 1
            else:
                counted += 1
                streak = 0
        return cls(
            scores=tuple(scores),
            counted_attempts=counted,
            interrupt_streak=streak,
            hint=hint,
            no_change_streak=unchanged,
            backoff_streak=waits,
            pending_since=pending_since,
            awaiting_verdict=pending_run,
        )


@dataclass(frozen=True)
class Decision:
    event: Event
    state: State
    halt_reason: HaltReason | None
    next_hint: str
    reason: str
    plateau: PlateauDecision | None = None
    # The outcome to record instead of the attempt's own (a pending verdict
    # past `pending_timeout` is recorded failed); None: the attempt's own.
    outcome: Outcome | None = None


def verdict_outcome(verdict: Verdict, pass_score: float) -> Outcome:
    """A verdict passes when `pass` is true and its score reaches `pass_score`."""
    return Outcome.PASSED if verdict.passed and verdict.score >= pass_score else Outcome.FAILED


def decide(
    stage: str,
    stage_names: Sequence[str],
    policy: StagePolicy,
    history: RunHistory,
    outcome: Outcome,
    verdict: Verdict | None = None,
    changed: bool | None = None,
    now: datetime | None = None,
) -> Decision:
    """Choose the transition out of `stage:running` for an attempt that ended.

    `changed` says whether the attempt changed the workspace (None: not
    looked at); the backoff's wait itself is the engine's (`guards`), as is
    a pending verdict's recheck. `now` (the database's clock) measures a run
    of pending verdicts against `pending_timeout`; None: never timed out."""
    running = State(stage, Status.RUNNING)

    def to(
        event: Event,
        reason: str,
        *,
        halt_reason: HaltReason | None = None,
        hint: str | None = None,
        plateau: PlateauDecision | None = None,
    ) -> Decision:
        return Decision(
            event=event,
            state=next_state(running, event, stage_names),
            halt_reason=halt_reason,
            next_hint=history.hint if hint is None else hint,
            reason=reason,
            plateau=plateau,
            outcome=recorded,
        )

    recorded: Outcome | None = None
    if outcome is Outcome.PENDING:
        waiting = pending_hint(verdict)
        since = history.pending_since
        waited = None if since is None or now is None else (now - since).total_seconds()
        if waited is None or waited < policy.pending_timeout:
            return to(
                Event.RETRY,
                "the verdict is pending; rechecked later, it counts toward nothing",
                hint=waiting or history.hint,
            )
        # Past the timeout: the attempt is the failed attempt it became.
        recorded = outcome = Outcome.FAILED
        verdict = Verdict(
            passed=False,
            score=0.0,
            reasons=() if verdict is None else verdict.reasons,
            next_hint=(
                f"still pending after {waited:.0f}s (pending_timeout "
                f"{policy.pending_timeout:g}s)" + (f": {waiting}" if waiting else "")
            ),
        )
        history = RunHistory(
            scores=history.scores,
            counted_attempts=history.counted_attempts,
            interrupt_streak=history.interrupt_streak,
            hint=history.hint,
            no_change_streak=history.no_change_streak,
            backoff_streak=history.backoff_streak,
        )

    if outcome is Outcome.HOST_ERROR:
        return to(Event.RETRY, "the host could not run the attempt; it counts toward nothing")

    if outcome is Outcome.DATABASE_ERROR:
        return to(Event.RETRY, "the database was unreachable; the attempt counts toward nothing")

    if outcome is Outcome.BACKOFF:
        return to(Event.RETRY, "the worker asked to be retried later; it counts toward nothing")

    if outcome is Outcome.INTERRUPTED:
        streak = history.interrupt_streak + 1
        if streak >= policy.max_interrupts:
            return to(
                Event.GIVE_UP,
                f"interrupted {streak} times in a row",
                halt_reason=HaltReason.INTERRUPTED,
            )
        return to(Event.RETRY, "attempt interrupted; it counts toward nothing")

    if outcome is Outcome.PASSED:
        if policy.gate:
            return to(Event.AWAIT_APPROVAL, "verdict passed; waiting for approval")
        return to(Event.STAGE_PASSED, "verdict passed", hint="")

    scores = history.scores
    hint = history.hint
    if verdict is not None:
        if recorded is None:  # a timed-out pending verdict has no score
            scores = (*scores, verdict.score)
        hint = verdict.next_hint
    counted = history.counted_attempts + 1
    unchanged = history.no_change_streak
    if changed is not None:
        unchanged = 0 if changed else unchanged + 1
    limit = policy.halt_after_no_change
    if limit is not None and changed is False and unchanged >= limit:
        return to(
            Event.GIVE_UP,
            f"{unchanged} attempts in a row left the workspace unchanged",
            halt_reason=HaltReason.NO_PROGRESS,
            hint=hint,
        )
    plateau = detect_plateau(scores, policy.plateau)
    if plateau.plateau:
        return to(
            Event.GIVE_UP,
            plateau.reason,
            halt_reason=HaltReason.SCORE_PLATEAU,
            plateau=plateau,
            hint=hint,
        )
    if counted >= policy.max_attempts:
        return to(
            Event.GIVE_UP,
            f"{counted} of {policy.max_attempts} attempts used",
            halt_reason=HaltReason.MAX_ATTEMPTS,
            plateau=plateau,
            hint=hint,
        )
    if recorded is not None:
        return to(
            Event.RETRY,
            f"{hint}; {policy.max_attempts - counted} attempts left",
            plateau=plateau,
            hint=hint,
        )
    return to(
        Event.RETRY,
        f"attempt {outcome.value}; {policy.max_attempts - counted} left",
        plateau=plateau,
        hint=hint,
    )


def pending_hint(verdict: Verdict | None) -> str:
    """What a pending verdict tells the next attempt: its `next_hint`, else
    its reasons (a failing check's name reaches the worker either way)."""
    if verdict is None:
        return ""
    if verdict.next_hint:
        return verdict.next_hint
    return "; ".join(reason for reason in verdict.reasons if reason)
