"""A score history in one line of block characters, for `show`: the curve
the plateau rule judges, readable at a glance in a terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BLOCKS = "▁▂▃▄▅▆▇█"
NO_SCORE = "·"  # an attempt with no score (crashed, invalid verdict, ...)


def sparkline(scores: Sequence[float | None]) -> str:
    """Scores on a 0..1 scale (widened when a score falls outside it)."""
    known = [s for s in scores if s is not None]
    if not known:
        return NO_SCORE * len(scores)
    low, high = min(0.0, *known), max(1.0, *known)
    span = high - low
    out = []
    for score in scores:
        if score is None:
            out.append(NO_SCORE)
            continue
        index = round((score - low) / span * (len(BLOCKS) - 1))
        out.append(BLOCKS[index])
    return "".join(out)


def score_lines(attempts: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per stage that has a score: its attempts' curve, first and last score."""
    by_stage: dict[str, list[float | None]] = {}
    for attempt in attempts:
        if attempt.get("outcome") in (None, "pending"):
            continue  # still running, or a recheck of a verdict that waits: no point of the curve
        by_stage.setdefault(str(attempt["stage"]), []).append(attempt.get("score"))
    lines = []
    for stage, scores in by_stage.items():
        known = [s for s in scores if s is not None]
        if not known:
            continue
        ends = f"{known[0]:g}" if len(known) == 1 else f"{known[0]:g} → {known[-1]:g}"
        lines.append(f"{stage} {sparkline(scores)} {ends}")
    return lines
