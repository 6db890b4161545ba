"""`simulate`: the recorded runs replayed under other plateau rules, per
stage and in total, and for a grid the cheapest rule that loses no best
score on the record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from itertools import groupby
from typing import TYPE_CHECKING, Any

from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.features.evidence.errors import UsageError
from orchestrator.features.evidence.replay import Run, Step, replay, total
from orchestrator.features.evidence.store import RecordedAttempt, recorded_attempts
from orchestrator.storage.db import read_tx

if TYPE_CHECKING:
    from sqlalchemy import Engine

MAX_GRID = 400


def parse_patience(text: str) -> list[int]:
    """`3`, `2..6` or `2,4,6`: each an integer >= 1."""
    values: list[int] = []
    for part in text.split(","):
        low, dots, high = part.strip().partition("..")
        try:
            span = range(int(low), int(high) + 1) if dots else range(int(low), int(low) + 1)
        except ValueError:
            raise UsageError(f"--patience {text!r}: write N, A..B or N,M") from None
        values.extend(span)
    if not values:
        raise UsageError(f"--patience {text!r}: names no patience")
    if min(values) < 1:
        raise UsageError(f"--patience {text!r}: a patience is at least 1 attempt")
    return sorted(set(values))


def parse_min_delta(text: str) -> list[float]:
    """`0.01` or `0,0.01,0.05`: each a finite number >= 0."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--min-delta {text!r}: write X or X,Y,Z") from None
    if any(not (0 <= v < float("inf")) for v in values):
        raise UsageError(f"--min-delta {text!r}: each must be a finite number >= 0")
    return sorted(set(values))


def runs_of(rows: Sequence[RecordedAttempt]) -> list[Run]:
    """The rows (ordered by task, stage, run, number) cut into runs."""
    runs = []
    for (pipeline, stage, task, number), group in groupby(
        rows, key=lambda r: (r.pipeline, r.stage, r.task, r.run)
    ):
        steps = list(group)
        runs.append(
            Run(
                pipeline,
                stage,
                task,
                number,
                tuple(Step(s.outcome, s.score, s.cost_usd) for s in steps),
                steps[-1].halt_reason == "score_plateau",
            )
        )
    return runs


def simulate(
    engine: Engine,
    *,
    patience: Sequence[int],
    min_delta: Sequence[float],
    pipeline: str | None = None,
    stage: str | None = None,
) -> dict[str, Any]:
    """Every rule of the grid replayed over the same rows, read once."""
    if len(patience) * len(min_delta) > MAX_GRID:
        raise UsageError(f"the grid has more than {MAX_GRID} rules")
    with read_tx(engine) as conn:
        runs = runs_of(recorded_attempts(conn, pipeline=pipeline, stage=stage))
    rules: list[dict[str, Any]] = []
    for p in patience:
        for d in min_delta:
            per_stage = replay(runs, PlateauPolicy(patience=p, min_delta=d))
            rules.append(
                {
                    "patience": p,
                    "min_delta": d,
                    "stages": [
                        {"pipeline": key[0], "stage": key[1], **asdict(per_stage[key])}
                        for key in sorted(per_stage)
                    ],
                    "total": asdict(total(per_stage)),
                }
            )
    safe = [r for r in rules if r["total"]["runs_losing_best"] == 0]
    best = max(safe, key=lambda r: (r["total"]["attempts_saved"], -r["patience"]), default=None)
    return {
        "runs": len(runs),
        "rules": rules,
        "suggested": None
        if best is None
        else {"patience": best["patience"], "min_delta": best["min_delta"]},
    }


def text_lines(result: dict[str, Any]) -> list[str]:
    """One block per rule (per stage, then the total); a grid adds a table."""
    if result["runs"] == 0:
        return ["no recorded runs to replay"]
    rules = result["rules"]
    if len(rules) == 1:
        [rule] = rules
        rule_name = f"patience {rule['patience']}, min_delta {rule['min_delta']:g}"
        lines = [f"{rule_name}, over {result['runs']} runs"]
        for part in [*rule["stages"], {"pipeline": "", "stage": "total", **rule["total"]}]:
            name = f"{part['pipeline']}/{part['stage']}" if part["pipeline"] else "total"
            lines.append(
                f"  {name:<24} halted earlier {part['halted_earlier']:>4}  "
                f"attempts saved {part['attempts_saved']:>5}  ${part['usd_saved']:.2f} saved  "
                f"best lost {part['best_lost']:.3f} in {part['runs_losing_best']} runs  "
                f"continued {part['continued']}"
            )
        return lines
    lines = [
        f"over {result['runs']} runs",
        "  patience  min_delta  halted  saved  usd_saved  best_lost  losing  continued",
    ]
    for rule in rules:
        t = rule["total"]
        lines.append(
            f"  {rule['patience']:>8}  {rule['min_delta']:>9g}  {t['halted_earlier']:>6}  "
            f"{t['attempts_saved']:>5}  {t['usd_saved']:>9.2f}  {t['best_lost']:>9.3f}  "
            f"{t['runs_losing_best']:>6}  {t['continued']:>9}"
        )
    suggested = result["suggested"]
    lines.append(
        "suggested: no rule of the grid loses no best score"
        if suggested is None
        else f"suggested: patience {suggested['patience']}, min_delta {suggested['min_delta']:g}"
        " (saves the most attempts without losing a best score on the record)"
    )
    return lines
