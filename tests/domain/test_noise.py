"""Several verdicts made one, and the spread of a verifier's scores."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.domain.noise import median_verdict, spread
from orchestrator.domain.verdict import Verdict


def v(score: float, passed: bool, why: str) -> Verdict:
    return Verdict(passed=passed, score=score, reasons=(why,), next_hint=f"hint {why}")


def test_the_median_score_the_majority_pass_and_the_median_samples_words() -> None:
    got = median_verdict([v(0.2, False, "a"), v(0.9, True, "b"), v(0.6, True, "c")])
    assert (got.score, got.passed, got.reasons, got.next_hint) == (0.6, True, ("c",), "hint c")
    # One wild sample moves the median little; a mean would follow it.
    wild = median_verdict([v(0.5, True, "a"), v(0.52, True, "b"), v(0.0, False, "c")])
    assert wild.score == 0.5 and wild.passed


def test_an_even_count_averages_the_middle_two_and_a_tie_does_not_pass() -> None:
    got = median_verdict(
        [v(0.4, True, "a"), v(0.8, False, "b"), v(0.6, True, "c"), v(0.2, False, "d")]
    )
    assert got.score == pytest.approx(0.5)
    assert got.reasons == ("a",)  # the lower middle sample (0.4)
    assert not got.passed  # two of four


def test_equal_scores_take_the_first_samples_words() -> None:
    got = median_verdict([v(0.5, True, "a"), v(0.5, True, "b"), v(0.5, True, "c")])
    assert got.reasons == ("b",)  # the middle one by (score, order)


def test_spread_is_the_sample_standard_deviation() -> None:
    scores = [0.1, 0.3, 0.5, 0.7]
    got = spread(scores)
    assert got.stdev == pytest.approx(statistics.stdev(scores))
    assert (got.low, got.high, got.samples) == (0.1, 0.7, 4)
    assert got.mean == pytest.approx(0.4)
    assert got.suggested_min_delta == round(2 * got.stdev, 4)
    assert spread([0.5]).stdev == 0.0
    with pytest.raises(ValueError):
        spread([])
