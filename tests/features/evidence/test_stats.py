"""The statistics against values worked out by hand (in the comments), so
a slip in the DeLong components or the Wilson bound cannot hide behind a
second implementation of the same formula."""

from __future__ import annotations

import math

import pytest

from orchestrator.features.evidence.stats import (
    Cell,
    agreement,
    auc,
    best_threshold,
    reliability,
    wilson_lower,
)


def cells(approved: list[float], rejected: list[float], pass_at: float = 0.5) -> list[Cell]:
    return [Cell(s, s >= pass_at, True, 1) for s in approved] + [
        Cell(s, s >= pass_at, False, 1) for s in rejected
    ]


def test_auc_and_delong_interval_by_hand() -> None:
    # Approvals 0.9 0.8 0.4, rejects 0.7 0.3: 5 of 6 pairs ordered -> 5/6.
    # V10 = 1, 1, 1/2; V01 = 2/3, 1. S10 = (2/36 + 4/36)/2 = 1/12,
    # S01 = (1/36 + 1/36)/1 = 1/18; var = 1/36 + 1/36 = 1/18.
    result = auc(cells([0.9, 0.8, 0.4], [0.7, 0.3]))
    assert result is not None
    assert result.value == pytest.approx(5 / 6)
    half = 1.959963984540054 * math.sqrt(1 / 18)
    assert result.low == pytest.approx(5 / 6 - half)
    assert result.high == 1.0  # clipped
    assert result.at_chance is True  # 0.371 <= 0.5


def test_ties_count_half_and_counts_weigh_like_repeats() -> None:
    # One approval and one reject at 0.5, one approval at 0.9 above a reject
    # at 0.1: pairs (0.5,0.5)=1/2, (0.5,0.1)=1, (0.9,0.5)=1, (0.9,0.1)=1 -> 3.5/4.
    tied = auc(cells([0.5, 0.9], [0.5, 0.1]))
    assert tied is not None and tied.value == pytest.approx(0.875)
    repeated = auc(cells([0.9, 0.9, 0.2], [0.3, 0.3, 0.1]))
    weighted = auc(
        [
            Cell(0.9, True, True, 2),
            Cell(0.2, False, True, 1),
            Cell(0.3, False, False, 2),
            Cell(0.1, False, False, 1),
        ]
    )
    assert repeated == weighted


def test_no_interval_below_two_of_a_class_and_none_without_a_class() -> None:
    single = auc(cells([0.9], [0.1, 0.2]))
    assert single is not None and single.value == 1.0 and single.at_chance is None
    assert auc(cells([0.9, 0.8], [])) is None
    assert auc([Cell(None, True, True, 3), Cell(None, False, False, 3)]) is None


def test_agreement_precision_recall_by_hand() -> None:
    # pass&approve 6, pass&reject 2, fail&approve 1, fail&reject 3 (n = 12):
    # agreement 9/12, precision 6/8, recall 6/7.
    result = agreement(
        [
            Cell(0.9, True, True, 6),
            Cell(0.8, True, False, 2),
            Cell(None, False, True, 1),
            Cell(0.1, False, False, 3),
        ]
    )
    assert (result.n, result.approved, result.passed) == (12, 7, 8)
    assert result.agreement == pytest.approx(0.75)
    assert result.precision == pytest.approx(0.75)
    assert result.recall == pytest.approx(6 / 7)
    empty = agreement([])
    assert (empty.n, empty.agreement, empty.precision, empty.recall) == (0, None, None, None)


def test_best_threshold_by_hand() -> None:
    # Approvals 0.9 0.6, rejects 0.7 0.2. t=0.9: 3/4; t=0.7: 2/4; t=0.6: 3/4;
    # t=0.2: 2/4; none: 2/4. Of the equal 3/4, the lowest: 0.6.
    found = best_threshold(cells([0.9, 0.6], [0.7, 0.2]))
    assert found is not None and found.at == 0.6 and found.agreement == pytest.approx(0.75)
    # Everything rejected: approving nothing agrees best.
    nothing = best_threshold(cells([], [0.4, 0.9]))
    assert nothing is not None and nothing.at is None and nothing.agreement == 1.0
    assert best_threshold([Cell(None, True, True, 1)]) is None


def test_reliability_bins() -> None:
    bins = reliability(cells([0.95, 0.91, 0.15], [0.92, 0.1, 1.0]), bins=10)
    # [0.1, 0.2): 0.15 approved, 0.1 rejected -> 1/2; [0.9, 1.0]: 0.95, 0.91
    # approved, 0.92 and 1.0 (the top edge, last bin) rejected -> 2/4.
    assert bins == [(0.1, 0.2, 2, 0.5), (0.9, 1.0, 4, 0.5)]


def test_wilson_lower_bound() -> None:
    # 30 of 30: 1 / (1 + z^2/30) with z = 1.6449 -> 0.9173.
    assert wilson_lower(30, 30) == pytest.approx(0.9173, abs=1e-4)
    assert wilson_lower(30, 30) >= 0.9
    assert wilson_lower(29, 30) < 0.9
    assert wilson_lower(20, 20) == pytest.approx(0.8808, abs=1e-4)
    assert wilson_lower(0, 0) == 0.0
