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
    marked: dict[str, str] = {}
    for attempt in attempts:
        if attempt.get("outcome") in (None, "pending"):
            continue  # still running, or a recheck of a verdict that waits: no point of the curve
        by_stage.setdefault(str(attempt["stage"]), []).append(attempt.get("score"))
        mark = marks(attempt)
        if mark:  # the newest mark of the stage's (its latest run's best)
            marked[str(attempt["stage"])] = marked_line(
                marked.get(str(attempt["stage"]), ""), attempt
            )
    lines = []
    for stage, scores in by_stage.items():
        known = [s for s in scores if s is not None]
        if not known:
            continue
        ends = f"{known[0]:g}" if len(known) == 1 else f"{known[0]:g} → {known[-1]:g}"
        tail = f"  {marked[stage]}" if stage in marked else ""
        lines.append(f"{stage} {sparkline(scores)} {ends}{tail}")
    return lines


def marks(attempt: Mapping[str, Any]) -> str:
    """ "best", "restored" or both: what `show` and the pages mark an attempt with."""
    names = [name for name in ("best", "restored") if attempt.get(name)]
    return ", ".join(names)


def marked_line(before: str, attempt: Mapping[str, Any]) -> str:
    """The curve's tail: the stage's best and restored attempt, by number
    (a later run's best replaces an earlier run's)."""
    parts = dict(p.split(" #", 1) for p in before.split(", ") if " #" in p)
    for name in ("best", "restored"):
        if attempt.get(name):
            parts[name] = str(attempt["number"])
    return ", ".join(f"{name} #{parts[name]}" for name in ("best", "restored") if name in parts)
