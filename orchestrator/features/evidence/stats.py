"""How far a verifier agrees with people: pure statistics over counted
decisions, standard library only.

The query counts decisions per distinct (score, pass, approved): a real
verifier prints few distinct scores, so everything here is linear in the
number of distinct scores, not in the number of decisions, and a million
attempts cost the database's GROUP BY, not a Python loop.

The interval is DeLong's (1988): the AUC's variance from its structural
components, exact under ties (a tie counts one half). It needs two
approvals and two rejects; with fewer there is no interval and the
verdict is left open (`at_chance` None), never guessed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Z_95_TWO_SIDED = 1.959963984540054
Z_95_ONE_SIDED = 1.6448536269514722


@dataclass(frozen=True)
class Cell:
    """How many decisions had this score, this pass and this decision."""

    score: float | None
    passed: bool
    approved: bool
    count: int


@dataclass(frozen=True)
class Auc:
    value: float
    low: float | None
    high: float | None

    @property
    def at_chance(self) -> bool | None:
        """Whether the 95 % interval holds 0.5; None without an interval."""
        if self.low is None or self.high is None:
            return None
        return self.low <= 0.5 <= self.high


@dataclass(frozen=True)
class Threshold:
    """`score >= at` read as approve agrees with people `agreement` of the
    time; `at` None: approving nothing agrees best."""

    at: float | None
    agreement: float


@dataclass(frozen=True)
class Agreement:
    n: int
    approved: int
    passed: int
    agreement: float | None
    precision: float | None
    recall: float | None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def agreement(cells: Iterable[Cell]) -> Agreement:
    """How often pass matched approve, and pass's precision and recall
    against approve (None where the denominator is empty). Every decision
    counts, scored or not: pass is what opened the gate."""
    n = approved = passed = both = agree = 0
    for cell in cells:
        n += cell.count
        approved += cell.count if cell.approved else 0
        passed += cell.count if cell.passed else 0
        both += cell.count if cell.passed and cell.approved else 0
        agree += cell.count if cell.passed == cell.approved else 0
    return Agreement(
        n, approved, passed, _ratio(agree, n), _ratio(both, passed), _ratio(both, approved)
    )


def _by_score(cells: Iterable[Cell]) -> list[tuple[float, int, int]]:
    """(score, approvals, rejects) per distinct score, ascending; unscored
    cells are not there (the caller counts them apart)."""
    table: dict[float, list[int]] = {}
    for cell in cells:
        if cell.score is None or cell.count == 0:
            continue
        row = table.setdefault(cell.score, [0, 0])
        row[0 if cell.approved else 1] += cell.count
    return [(score, pos, neg) for score, (pos, neg) in sorted(table.items())]


def auc(cells: Iterable[Cell], z: float = Z_95_TWO_SIDED) -> Auc | None:
    """ROC AUC of the score against approve, with DeLong's interval
    (clipped to [0, 1]). None when either class is empty."""
    rows = _by_score(cells)
    m = sum(pos for _, pos, _ in rows)  # approvals
    n = sum(neg for _, _, neg in rows)  # rejects
    if m == 0 or n == 0:
        return None
    # V10 of an approval at score s: the share of rejects below s, ties half;
    # V01 of a reject at s: the share of approvals above s, ties half.
    below = 0
    above = m
    v10: list[tuple[float, int]] = []
    v01: list[tuple[float, int]] = []
    for _, pos, neg in rows:
        above -= pos
        if pos:
            v10.append(((below + 0.5 * neg) / n, pos))
        if neg:
            v01.append(((above + 0.5 * pos) / m, neg))
        below += neg
    value = sum(v * k for v, k in v10) / m
    if m < 2 or n < 2:
        return Auc(value, None, None)
    s10 = sum(k * (v - value) ** 2 for v, k in v10) / (m - 1)
    s01 = sum(k * (v - value) ** 2 for v, k in v01) / (n - 1)
    half = z * math.sqrt(s10 / m + s01 / n)
    return Auc(value, max(0.0, value - half), min(1.0, value + half))


def best_threshold(cells: Iterable[Cell]) -> Threshold | None:
    """The score threshold whose "score >= t approves" agrees with people
    most often over the scored decisions; of equal ones the lowest. None
    without a scored decision."""
    rows = _by_score(cells)
    total = sum(pos + neg for _, pos, neg in rows)
    if total == 0:
        return None
    # Threshold above every score: everything rejected, every reject agrees.
    agree = sum(neg for _, _, neg in rows)
    best = Threshold(None, agree / total)
    for score, pos, neg in reversed(rows):
        agree += pos - neg
        if agree / total >= best.agreement:
            best = Threshold(score, agree / total)
    return best


def reliability(cells: Iterable[Cell], bins: int = 10) -> list[tuple[float, float, int, float]]:
    """Score bins against the approval rate: (low, high, decisions, rate)
    per non-empty bin of equal width over [0, 1] (a score outside goes to
    the nearest end)."""
    counts = [[0, 0] for _ in range(bins)]
    for score, pos, neg in _by_score(cells):
        index = min(bins - 1, max(0, math.floor(score * bins)))
        counts[index][0] += pos
        counts[index][1] += pos + neg
    return [
        (i / bins, (i + 1) / bins, total, pos / total)
        for i, (pos, total) in enumerate(counts)
        if total
    ]


def wilson_lower(successes: int, n: int, z: float = Z_95_ONE_SIDED) -> float:
    """The lower bound of the Wilson score interval (one-sided 95 % by
    default) on a proportion: what a record of `successes` in `n` lets one
    claim at least, small records claiming little. 0 for an empty record."""
    if n == 0:
        return 0.0
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - spread) / (1 + z2 / n)


def cells_of(rows: Iterable[tuple[float | None, bool, bool, int]]) -> list[Cell]:
    """Cells from the query's (score, pass, approved, count) rows."""
    return [Cell(score, bool(passed), bool(ok), int(k)) for score, passed, ok, k in rows]


def as_dict(value: object) -> Mapping[str, object] | None:
    """A result's fields, for JSON (None stays None)."""
    if value is None:
        return None
    return {name: getattr(value, name) for name in value.__dataclass_fields__}  # type: ignore[attr-defined]
