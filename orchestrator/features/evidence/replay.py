"""What another plateau rule would have done: recorded runs replayed
through the engine's own rule (`domain/plateau.detect_plateau`) and its
own reading of a run (`domain/decide.RunHistory.of`), so a simulated halt
is exactly the halt a tick with that rule would have made. Pure: no I/O.

A rule can only be replayed as far as the record goes. A run it would
have halted earlier is a saving (the attempts and dollars after the halt)
and maybe a loss (a better score reached later). A run it would have let
go on past where the recorded rule halted it is counted, not guessed:
what those attempts would have cost is not in the record."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.domain.decide import Outcome, RunHistory
from orchestrator.domain.plateau import PlateauPolicy, detect_plateau


@dataclass(frozen=True)
class Step:
    """One recorded attempt of a run, oldest first."""

    outcome: str
    score: float | None
    cost_usd: float | None


@dataclass(frozen=True)
class Run:
    pipeline: str
    stage: str
    task: str
    run: int
    steps: tuple[Step, ...]
    halted_on_plateau: bool  # the recorded rule halted it after its last step


@dataclass(frozen=True)
class RunReplay:
    halt_after: int | None  # attempts the rule would have let run; None: no earlier halt
    attempts_saved: int
    usd_saved: float
    best_lost: float  # the best score reached after the halt, above the best before it
    continued: bool  # the recorded rule halted it; this rule would not have


@dataclass(frozen=True)
class Totals:
    runs: int = 0
    halted_earlier: int = 0
    attempts_saved: int = 0
    usd_saved: float = 0.0
    best_lost: float = 0.0
    runs_losing_best: int = 0
    continued: int = 0

    def add(self, replay: RunReplay) -> Totals:
        return Totals(
            self.runs + 1,
            self.halted_earlier + (replay.halt_after is not None),
            self.attempts_saved + replay.attempts_saved,
            self.usd_saved + replay.usd_saved,
            self.best_lost + replay.best_lost,
            self.runs_losing_best + (replay.best_lost > 0),
            self.continued + replay.continued,
        )


def _pairs(steps: Sequence[Step]) -> list[tuple[Outcome, float | None]]:
    return [(Outcome(step.outcome), step.score) for step in steps]


def replay_run(run: Run, policy: PlateauPolicy) -> RunReplay:
    """Where `policy` would have halted `run`: after each failed attempt
    (where the engine asks the plateau rule), on the scores the engine
    would have counted up to it."""
    pairs = _pairs(run.steps)
    for index in range(len(pairs)):
        if pairs[index][0] is not Outcome.FAILED:
            continue
        scores = RunHistory.of(pairs[: index + 1], hint="").scores
        if not detect_plateau(scores, policy).plateau:
            continue
        if index + 1 == len(pairs):
            break  # halts where the record ends: nothing saved, nothing lost
        after = run.steps[index + 1 :]
        best_before = max(scores, default=0.0)
        later = RunHistory.of(pairs, hint="").scores[len(scores) :]
        lost = max(0.0, max(later, default=best_before) - best_before)
        return RunReplay(
            index + 1,
            len(after),
            sum(step.cost_usd or 0.0 for step in after),
            lost,
            False,
        )
    continued = run.halted_on_plateau and not _halts_at_end(pairs, policy)
    return RunReplay(None, 0, 0.0, 0.0, continued)


def _halts_at_end(pairs: list[tuple[Outcome, float | None]], policy: PlateauPolicy) -> bool:
    scores = RunHistory.of(pairs, hint="").scores
    return detect_plateau(scores, policy).plateau


def replay(runs: Iterable[Run], policy: PlateauPolicy) -> dict[tuple[str, str], Totals]:
    """Totals per (pipeline, stage)."""
    totals: dict[tuple[str, str], Totals] = {}
    for run in runs:
        key = (run.pipeline, run.stage)
        totals[key] = totals.get(key, Totals()).add(replay_run(run, policy))
    return totals


def total(per_stage: dict[tuple[str, str], Totals]) -> Totals:
    whole = Totals()
    for part in per_stage.values():
        whole = Totals(
            whole.runs + part.runs,
            whole.halted_earlier + part.halted_earlier,
            whole.attempts_saved + part.attempts_saved,
            whole.usd_saved + part.usd_saved,
            whole.best_lost + part.best_lost,
            whole.runs_losing_best + part.runs_losing_best,
            whole.continued + part.continued,
        )
    return whole
