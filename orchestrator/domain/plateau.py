"""Plateau detection: stop a task whose verifier score stopped rising.

Retrying a stuck worker burns time and money without changing the outcome, so
a task halts as `score_plateau` once its score history shows no progress. The
rule is the one machine-learning trainers use to stop or slow down, with the
same parameter names, so it needs no new intuition:

- Keras ``EarlyStopping(monitor, min_delta, patience, mode="max")`` stops when
  the monitored value has not improved by more than ``min_delta`` for
  ``patience`` epochs.
- PyTorch ``ReduceLROnPlateau(mode="max", patience, threshold,
  threshold_mode="abs" | "rel")`` calls a value better when it exceeds
  ``best + threshold`` (abs) or ``best * (1 + threshold)`` (rel).

Here, with patience P and min_delta d over the valid scores of the current
run: let ``best_before`` be the best score before the last P and
``best_within`` the best of the last P. The history is a plateau when
``best_within <= threshold``, where threshold is ``best_before + d`` (abs) or
``best_before * (1 + d)`` (rel): the last P scores did not raise the best by
more than d. Nothing is judged before ``max(min_attempts, P + 1)`` scores (the
window needs at least one score before it), so a score held at one value
plateaus exactly at attempt P + 1. Unlike the trainers, this is a pure function
of the whole history rather than a stateful counter, so it can be recomputed
from the database after a crash. The rel mode assumes non-negative scores,
which the verdict contract guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PlateauMode = Literal["abs", "rel"]


@dataclass(frozen=True)
class PlateauPolicy:
    """When a score history counts as stuck; mirrors Keras' EarlyStopping."""

    patience: int = 3
    min_delta: float = 0.01
    mode: PlateauMode = "abs"
    min_attempts: int | None = None  # None: patience + 1

    def __post_init__(self) -> None:
        if isinstance(self.patience, bool) or not isinstance(self.patience, int):
            raise ValueError(f"plateau patience must be an integer, not {self.patience!r}")
        if self.patience < 1:
            raise ValueError(f"plateau patience must be >= 1, not {self.patience}")
        if isinstance(self.min_delta, bool) or not isinstance(self.min_delta, int | float):
            raise ValueError(f"plateau min_delta must be a number, not {self.min_delta!r}")
        if not (math.isfinite(self.min_delta) and self.min_delta >= 0):
            raise ValueError(
                f"plateau min_delta must be a finite number >= 0, not {self.min_delta}"
            )
        if self.mode not in ("abs", "rel"):
            raise ValueError(f"plateau mode must be 'abs' or 'rel', not {self.mode!r}")
        if self.min_attempts is not None and (
            isinstance(self.min_attempts, bool)
            or not isinstance(self.min_attempts, int)
            or self.min_attempts < 1
        ):
            raise ValueError(
                f"plateau min_attempts must be an integer >= 1 or unset, not {self.min_attempts!r}"
            )

    @property
    def effective_min_attempts(self) -> int:
        return self.patience + 1 if self.min_attempts is None else self.min_attempts


@dataclass(frozen=True)
class PlateauDecision:
    """What `detect_plateau` decided, with the numbers it decided on."""

    plateau: bool
    counted: int  # valid scores considered
    best_before: float | None  # best score before the window of the last P
    best_within: float | None  # best score inside the window
    delta: float | None  # best_within - best_before
    threshold: float | None  # the value best_within had to exceed
    reason: str  # one human sentence explaining the decision

    def to_dict(self) -> dict[str, object]:
        """The decision as a JSON-ready dict (for the attempt log and `status --json`)."""
        return {
            "plateau": self.plateau,
            "counted": self.counted,
            "best_before": self.best_before,
            "best_within": self.best_within,
            "delta": self.delta,
            "threshold": self.threshold,
            "reason": self.reason,
        }


def detect_plateau(scores: Sequence[float], policy: PlateauPolicy) -> PlateauDecision:
    """Decide whether `scores` (oldest first) has reached a plateau under `policy`.

    Scores that are not finite numbers are skipped (the caller should pass
    only valid verdicts' scores; this keeps a stray NaN from poisoning `max`).
    The numbers are reported as soon as the window is complete (P + 1 scores),
    even while `min_attempts` still forbids a plateau.
    """
    valid = [score for score in map(_as_score, scores) if score is not None]
    counted = len(valid)
    patience = policy.patience
    needed = max(policy.effective_min_attempts, patience + 1)
    if counted < patience + 1:
        return PlateauDecision(
            plateau=False,
            counted=counted,
            best_before=None,
            best_within=None,
            delta=None,
            threshold=None,
            reason=f"{_scores(counted)} so far; no plateau is judged before {needed}.",
        )
    best_before = max(valid[:-patience])
    best_within = max(valid[-patience:])
    if policy.mode == "abs":
        threshold = best_before + policy.min_delta
        rule = f"{best_before:.6g} + {policy.min_delta:g}"
    else:
        threshold = best_before * (1 + policy.min_delta)
        rule = f"{best_before:.6g} * (1 + {policy.min_delta:g})"
    stuck = best_within <= threshold
    window = f"the last {_scores(patience)}"
    if counted < needed:
        reason = f"{_scores(counted)} so far; no plateau is judged before {needed}."
    elif stuck:
        reason = (
            f"plateau: {window} did not raise the best before them by more than "
            f"min_delta ({best_within:.6g} <= {rule} = {threshold:.6g})."
        )
    else:
        reason = (
            f"no plateau: {window} raised the best before them by more than "
            f"min_delta ({best_within:.6g} > {rule} = {threshold:.6g})."
        )
    return PlateauDecision(
        plateau=stuck and counted >= needed,
        counted=counted,
        best_before=best_before,
        best_within=best_within,
        delta=best_within - best_before,
        threshold=threshold,
        reason=reason,
    )


def _as_score(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        score = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return score if math.isfinite(score) else None


def _scores(n: int) -> str:
    return f"{n} valid score" if n == 1 else f"{n} valid scores"
