"""The replay against runs worked by hand, with the engine's plateau rule."""

from __future__ import annotations

import pytest

from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.features.evidence.replay import Run, Step, replay, replay_run, total


def run(scores: list[float | None], *, halted: bool = False, cost: float = 0.5) -> Run:
    steps = tuple(Step("failed" if s is not None else "crashed", s, cost) for s in scores)
    return Run("p", "work", "t", 1, steps, halted)


def test_an_earlier_halt_saves_the_rest_and_counts_a_later_best() -> None:
    # patience 2, min_delta 0: after 0.5 0.5 0.4 the last two (0.5, 0.4) do
    # not beat 0.5: halt after attempt 3; attempts 4-5 (0.3, 0.9) saved,
    # 0.9 - 0.5 = 0.4 of best score lost.
    replayed = replay_run(run([0.5, 0.5, 0.4, 0.3, 0.9]), PlateauPolicy(2, 0.0))
    assert replayed.halt_after == 3
    assert replayed.attempts_saved == 2
    assert replayed.usd_saved == pytest.approx(1.0)
    assert replayed.best_lost == pytest.approx(0.4)
    assert replayed.continued is False


def test_a_rising_run_is_not_halted_and_a_crash_adds_no_score() -> None:
    assert replay_run(run([0.1, 0.2, 0.3, 0.4]), PlateauPolicy(2, 0.0)).halt_after is None
    # A crash between: the scores are 0.5, 0.5, 0.5 after attempt 4, where
    # the window first fills (patience 2 needs three scores).
    replayed = replay_run(run([0.5, None, 0.5, 0.5, 0.5]), PlateauPolicy(2, 0.0))
    assert (replayed.halt_after, replayed.attempts_saved, replayed.best_lost) == (4, 1, 0.0)


def test_a_run_the_record_halted_that_the_rule_lets_go_on_is_counted() -> None:
    replayed = replay_run(run([0.5, 0.5, 0.5, 0.5], halted=True), PlateauPolicy(6, 0.0))
    assert replayed.continued is True and replayed.attempts_saved == 0


def test_totals_per_stage_and_overall() -> None:
    runs = [run([0.5, 0.5, 0.4, 0.3, 0.9]), run([0.1, 0.2, 0.3])]
    per_stage = replay(runs, PlateauPolicy(2, 0.0))
    whole = total(per_stage)
    assert list(per_stage) == [("p", "work")]
    assert (whole.runs, whole.halted_earlier, whole.attempts_saved) == (2, 1, 2)
    assert whole.runs_losing_best == 1
