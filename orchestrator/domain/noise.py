"""A verifier's noise: several verdicts on the same work made one, and the
spread of its scores.

The median resists one wild sample, where a mean would move with it. For
an even number of samples the score is the mean of the two middle ones;
the reasons and hint come from the lower middle sample (a verdict that was
really printed), and `pass` is a strict majority (a tie does not pass:
half the samples saying no is not evidence enough to move on).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.domain.verdict import Verdict


def median_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    if not verdicts:
        raise ValueError("no verdicts")
    order = sorted(range(len(verdicts)), key=lambda i: (verdicts[i].score, i))
    middle = verdicts[order[(len(verdicts) - 1) // 2]]
    passes = sum(1 for v in verdicts if v.passed)
    return Verdict(
        passed=passes * 2 > len(verdicts),
        score=float(statistics.median(v.score for v in verdicts)),
        reasons=middle.reasons,
        next_hint=middle.next_hint,
    )


@dataclass(frozen=True)
class Spread:
    """The scores of repeated verdicts on one piece of work."""

    samples: int
    mean: float
    stdev: float  # the sample standard deviation (n - 1); 0 for one sample
    low: float
    high: float

    @property
    def suggested_min_delta(self) -> float:
        """Two standard deviations: a rise smaller than that is, about one
        time in twenty, the verifier's noise rather than better work."""
        return round(2 * self.stdev, 4)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "samples": self.samples,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.low,
            "max": self.high,
            "suggested_min_delta": self.suggested_min_delta,
        }


def spread(scores: Sequence[float]) -> Spread:
    if not scores:
        raise ValueError("no scores")
    stdev = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return Spread(len(scores), statistics.fmean(scores), stdev, min(scores), max(scores))
