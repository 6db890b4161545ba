"""Which candidate of a round wins, or stands for the round."""

from __future__ import annotations

import pytest

from orchestrator.domain.decide import Outcome
from orchestrator.domain.rounds import Candidate, best, collapse

P, F = Outcome.PASSED, Outcome.FAILED


def cand(n: int, outcome: Outcome, score: float | None) -> Candidate:
    return Candidate(attempt_id=100 + n, number=n, slot=n, outcome=outcome, score=score)


@pytest.mark.parametrize(
    ("finished", "winner"),
    [
        # finish order as listed: the first-finished of two 0.9 passes wins
        ([cand(1, F, 0.3), cand(4, P, 0.9), cand(3, P, 0.6), cand(2, P, 0.9)], 4),
        ([cand(2, P, 0.9), cand(4, P, 0.9)], 2),
        # a pass beats a higher-scoring failure
        ([cand(1, F, 0.95), cand(2, P, 0.5)], 2),
        # none passes: the best score stands for the round
        ([cand(1, F, 0.2), cand(2, F, 0.7), cand(3, Outcome.CRASHED, None)], 2),
        # no verdict anywhere: a counted outcome over one that counts for nothing
        ([cand(1, Outcome.HOST_ERROR, None), cand(2, Outcome.CRASHED, None)], 2),
        ([cand(1, Outcome.INTERRUPTED, None), cand(2, Outcome.HOST_ERROR, None)], 1),
    ],
)
def test_the_best_candidate(finished: list[Candidate], winner: int) -> None:
    assert best(finished).number == winner


def test_an_empty_round_has_no_best() -> None:
    with pytest.raises(ValueError):
        best([])


def test_a_round_counts_as_one_attempt_at_its_place() -> None:
    alone = cand(1, F, 0.1)
    rows = [(None, alone), (1, cand(2, F, 0.4)), (1, cand(3, F, 0.6)), (None, cand(4, P, 1.0))]
    assert [c.number for c in collapse(rows)] == [1, 3, 4]
