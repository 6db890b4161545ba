"""Best of N: which candidate of a round wins, or stands for the round.

A round of K candidates is decided once, when every candidate has ended,
and counts as one attempt of the stage: the best candidate's outcome,
verdict and score are what `decide` and the plateau rule see. Pure: the
tick gathers the candidates (in the order they finished) and records
what this returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.domain.decide import IGNORED, NOT_COUNTED, Outcome


@dataclass(frozen=True)
class Candidate:
    """One ended candidate of a round, as recorded."""

    attempt_id: int
    number: int
    slot: int
    outcome: Outcome
    score: float | None  # a valid verdict's score; None without one


def _rank(candidate: Candidate) -> tuple[int, float]:
    """Higher is better: a pass above any failure, a scored failure above
    one without a verdict, an outcome that counts above one that does not
    (so a round counts toward nothing only when all its candidates do)."""
    if candidate.outcome is Outcome.PASSED:
        return 4, candidate.score or 0.0
    if candidate.score is not None:
        return 3, candidate.score
    if candidate.outcome in IGNORED:
        return 0, 0.0
    if candidate.outcome in NOT_COUNTED:
        return 1, 0.0
    return 2, 0.0


def best(finished: Sequence[Candidate]) -> Candidate:
    """The round's best candidate, `finished` in the order they finished:
    the best score among passing ones (a tie goes to the first to finish),
    else the best-scoring failure, else the first to finish."""
    if not finished:
        raise ValueError("a round with no candidate has no best")
    chosen = finished[0]
    for candidate in finished[1:]:
        if _rank(candidate) > _rank(chosen):  # strictly: the earlier keeps a tie
            chosen = candidate
    return chosen


def collapse(rows: Sequence[tuple[int | None, Candidate]]) -> list[Candidate]:
    """A run's attempts with each decided round reduced to its best
    candidate, in the order the rounds began: `rows` are (round, candidate)
    in attempt order, the candidates of one round listed in finish order."""
    result: list[Candidate] = []
    rounds: dict[int, list[Candidate]] = {}
    order: list[int | Candidate] = []
    for round_no, candidate in rows:
        if round_no is None:
            order.append(candidate)
            continue
        if round_no not in rounds:
            rounds[round_no] = []
            order.append(round_no)
        rounds[round_no].append(candidate)
    for item in order:
        result.append(best(rounds[item]) if isinstance(item, int) else item)
    return result
