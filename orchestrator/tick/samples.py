"""`verifier_samples`: the verifier run several times on the same work,
each sample judged alone, the attempt judged on their median verdict
(`domain.noise`). A sample without a valid verdict makes the attempt's
outcome that sample's (an `invalid_verdict` is the verifier's fault, not
noise to average away); a pending sample makes it pending."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.agents.runtime import sample_name
from orchestrator.domain.decide import verdict_outcome
from orchestrator.domain.noise import median_verdict
from orchestrator.ext.model import AttemptRun


def capture_name(sample: int) -> str:
    """The first sample's output is `verifier.out` as always; later ones
    `verifier-2.out`, ... beside it (`agents.runtime.sample_name`)."""
    return sample_name(sample)


def combine(runs: Sequence[AttemptRun], pass_score: float) -> AttemptRun:
    for run in runs:
        if run.verdict is None:
            return run
    for run in runs:
        # A sample that waits (CI running) makes the attempt wait: its
        # zero score is no judgement to take a median of.
        if run.verdict is not None and run.verdict.pending:
            return run
    verdict = median_verdict([run.verdict for run in runs if run.verdict is not None])
    last = runs[-1]
    return AttemptRun(
        verdict_outcome(verdict, pass_score),
        verdict=verdict,
        worker_exit=last.worker_exit,
        verifier_exit=last.verifier_exit,
    )
