"""detect_plateau: the plateau rule (docs/explanation/verdicts-and-plateau.md),
table by table, then as properties."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from orchestrator.domain.plateau import PlateauDecision, PlateauPolicy, detect_plateau

DEFAULT = PlateauPolicy()


def policy(
    patience: int = 3, min_delta: float = 0.01, mode: str = "abs", min_attempts: int | None = None
) -> PlateauPolicy:
    return PlateauPolicy(patience, min_delta, cast(Any, mode), min_attempts)


# --- which series plateau --------------------------------------------------------

PLATEAU_CASES = [
    pytest.param([], DEFAULT, False, id="empty-series"),
    pytest.param([0.5], DEFAULT, False, id="one-score"),
    pytest.param([0.5] * 3, DEFAULT, False, id="constant-P-scores-not-yet"),
    pytest.param([0.5] * 4, DEFAULT, True, id="constant-P+1-scores-plateau"),
    pytest.param([0.5] * 10, DEFAULT, True, id="constant-long"),
    pytest.param([0.0] * 4, DEFAULT, True, id="constant-zero"),
    pytest.param([1.0] * 4, DEFAULT, True, id="constant-one"),
    pytest.param([0.5, 0.505, 0.508, 0.509], DEFAULT, True, id="rising-less-than-min-delta"),
    pytest.param([0.1, 0.2, 0.3, 0.4], DEFAULT, False, id="rising-steadily"),
    pytest.param(
        [0.1, 0.3, 0.2, 0.25, 0.35, 0.3, 0.5, 0.45], DEFAULT, False, id="noisy-but-improving"
    ),
    pytest.param([0.9, 0.5, 0.4, 0.3], DEFAULT, True, id="declining"),
    pytest.param([0.2, 0.5, 0.5, 0.5], DEFAULT, False, id="jump-at-start-of-window"),
    pytest.param([0.2, 0.5, 0.5, 0.5, 0.5], DEFAULT, True, id="jump-then-P-flat"),
    pytest.param([0.2, 0.2, 0.2, 0.5], DEFAULT, False, id="jump-at-end-of-window"),
    # patience
    pytest.param([0.5, 0.5], policy(patience=1), True, id="P1-constant-2"),
    pytest.param([0.5, 0.52], policy(patience=1), False, id="P1-improving"),
    pytest.param([0.5] * 5, policy(patience=5), False, id="P5-constant-5-not-yet"),
    pytest.param([0.5] * 6, policy(patience=5), True, id="P5-constant-6"),
    pytest.param([0.1, 0.6, 0.5, 0.5, 0.5, 0.5], policy(patience=5), False, id="P5-improved"),
    # min_delta, including the exact threshold (dyadic numbers: exact in binary)
    pytest.param([0.5, 0.75, 0.75, 0.75], policy(min_delta=0.25), True, id="abs-exact-threshold"),
    pytest.param([0.5, 0.5, 0.5, 0.7500001], policy(min_delta=0.25), False, id="abs-just-above"),
    pytest.param([0.5] * 4, policy(min_delta=0.0), True, id="delta0-constant-plateaus"),
    pytest.param([0.5, 0.5, 0.5, 0.5000001], policy(min_delta=0.0), False, id="delta0-any-rise"),
    pytest.param([0.1, 0.5, 0.5, 0.5], policy(min_delta=0.5), True, id="big-delta"),
    # rel
    pytest.param([0.5, 0.75, 0.75, 0.75], policy(min_delta=0.5, mode="rel"), True, id="rel-exact"),
    pytest.param([0.5, 0.76], policy(1, 0.5, "rel"), False, id="rel-above"),
    pytest.param([0.2, 0.25], policy(1, 0.1, "abs"), True, id="abs-vs-rel-abs-plateaus"),
    pytest.param([0.2, 0.25], policy(1, 0.1, "rel"), False, id="abs-vs-rel-rel-improves"),
    pytest.param([0.0, 0.0], policy(1, 0.1, "rel"), True, id="rel-best-zero-constant"),
    pytest.param([0.0, 0.001], policy(1, 0.1, "rel"), False, id="rel-best-zero-any-rise"),
    # min_attempts
    pytest.param([0.5] * 3, policy(2, min_attempts=5), False, id="min-attempts-5-at-3"),
    pytest.param([0.5] * 4, policy(2, min_attempts=5), False, id="min-attempts-5-at-4"),
    pytest.param([0.5] * 5, policy(2, min_attempts=5), True, id="min-attempts-5-at-5"),
    pytest.param([0.5] * 3, policy(3, min_attempts=1), False, id="min-attempts-below-P+1"),
    pytest.param([0.5] * 4, policy(3, min_attempts=1), True, id="min-attempts-1-at-P+1"),
    # invalid scores are not counted
    pytest.param([0.5, math.nan, 0.5, math.inf, 0.5, 0.5], DEFAULT, True, id="skips-nan-inf"),
    pytest.param([0.5, math.nan, 0.5, 0.5], DEFAULT, False, id="nan-does-not-count"),
]


@pytest.mark.parametrize(("scores", "rule", "expected"), PLATEAU_CASES)
def test_plateau(scores: list[float], rule: PlateauPolicy, expected: bool) -> None:
    decision = detect_plateau(scores, rule)
    assert decision.plateau is expected
    assert decision.reason
    assert decision.reason.startswith("plateau") is expected


@pytest.mark.parametrize("patience", [1, 2, 3, 4, 7])
def test_constant_series_plateaus_exactly_at_p_plus_1(patience: int) -> None:
    rule = policy(patience=patience)
    assert not detect_plateau([0.3] * patience, rule).plateau
    assert detect_plateau([0.3] * (patience + 1), rule).plateau


# --- the numbers behind a decision --------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "rule", "expected"),
    [
        pytest.param(
            [],
            DEFAULT,
            PlateauDecision(False, 0, None, None, None, None, ""),
            id="empty",
        ),
        pytest.param(
            [0.1, 0.5, 0.45, 0.5, 0.505],
            DEFAULT,
            PlateauDecision(True, 5, 0.5, 0.505, 0.005, 0.51, ""),
            id="abs-plateau",
        ),
        pytest.param(
            [0.25, 0.5, 0.25],
            policy(patience=2),
            PlateauDecision(False, 3, 0.25, 0.5, 0.25, 0.26, ""),
            id="abs-improving",
        ),
        pytest.param(
            [0.5, 0.625, 0.5],
            policy(patience=2, min_delta=0.25, mode="rel"),
            PlateauDecision(True, 3, 0.5, 0.625, 0.125, 0.625, ""),
            id="rel-at-threshold",
        ),
        pytest.param(
            [0.5, 0.5, 0.5],
            policy(patience=2, min_attempts=4),
            PlateauDecision(False, 3, 0.5, 0.5, 0.0, 0.51, ""),
            id="numbers-before-min-attempts",
        ),
        pytest.param(
            [math.nan, 0.5, 0.5],
            policy(patience=1),
            PlateauDecision(True, 2, 0.5, 0.5, 0.0, 0.51, ""),
            id="counted-skips-nan",
        ),
    ],
)
def test_decision_numbers(
    scores: list[float], rule: PlateauPolicy, expected: PlateauDecision
) -> None:
    decision = detect_plateau(scores, rule)
    assert decision.plateau is expected.plateau
    assert decision.counted == expected.counted
    for name in ("best_before", "best_within", "delta", "threshold"):
        got, want = getattr(decision, name), getattr(expected, name)
        assert (got is None) == (want is None), name
        if want is not None:
            assert got == pytest.approx(want), name


def test_reason_names_the_numbers() -> None:
    decision = detect_plateau([0.5, 0.5, 0.5, 0.5], DEFAULT)
    assert decision.reason == (
        "plateau: the last 3 valid scores did not raise the best before them by more than "
        "min_delta (0.5 <= 0.5 + 0.01 = 0.51)."
    )
    waiting = detect_plateau([0.5], DEFAULT)
    assert waiting.reason == "1 valid score so far; no plateau is judged before 4."


def test_to_dict() -> None:
    decision = detect_plateau([0.5, 0.5], policy(patience=1, min_delta=0.25))
    assert decision.to_dict() == {
        "plateau": True,
        "counted": 2,
        "best_before": 0.5,
        "best_within": 0.5,
        "delta": 0.0,
        "threshold": 0.75,
        "reason": decision.reason,
    }


# --- the policy ----------------------------------------------------------------


def test_policy_defaults() -> None:
    assert PlateauPolicy(patience=3, min_delta=0.01, mode="abs", min_attempts=None) == DEFAULT
    assert DEFAULT.effective_min_attempts == 4
    assert policy(patience=5).effective_min_attempts == 6
    assert policy(min_attempts=2).effective_min_attempts == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"patience": 0}, id="patience-0"),
        pytest.param({"patience": -1}, id="patience-negative"),
        pytest.param({"patience": 1.5}, id="patience-float"),
        pytest.param({"patience": True}, id="patience-bool"),
        pytest.param({"min_delta": -0.01}, id="min-delta-negative"),
        pytest.param({"min_delta": math.nan}, id="min-delta-nan"),
        pytest.param({"min_delta": math.inf}, id="min-delta-inf"),
        pytest.param({"min_delta": "0.1"}, id="min-delta-string"),
        pytest.param({"mode": "max"}, id="mode-unknown"),
        pytest.param({"mode": "ABS"}, id="mode-uppercase"),
        pytest.param({"min_attempts": 0}, id="min-attempts-0"),
        pytest.param({"min_attempts": -3}, id="min-attempts-negative"),
        pytest.param({"min_attempts": False}, id="min-attempts-bool"),
    ],
)
def test_policy_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="plateau"):
        PlateauPolicy(**kwargs)


def test_policy_accepts_an_integer_min_delta() -> None:
    assert PlateauPolicy(min_delta=0).min_delta == 0


# --- properties ----------------------------------------------------------------

policies = st.builds(
    PlateauPolicy,
    patience=st.integers(1, 6),
    min_delta=st.floats(0, 0.05),
    mode=st.sampled_from(["abs", "rel"]),
    min_attempts=st.none() | st.integers(1, 10),
)


@settings(max_examples=examples(500), deadline=None)
@given(policies, st.data())
def test_steady_improvement_never_plateaus(rule: PlateauPolicy, data: st.DataObject) -> None:
    """Once in every P attempts a score beats the best so far by more than min_delta."""
    patience = rule.patience
    slot = data.draw(st.integers(0, patience - 1), label="improvement slot in each block")
    blocks = data.draw(st.integers(1, 8), label="blocks")
    scores = [data.draw(st.floats(0, 1), label="first score")]
    for index in range(blocks * patience):
        if index % patience == slot:
            best = max(scores)
            bar = best + rule.min_delta if rule.mode == "abs" else best * (1 + rule.min_delta)
            scores.append(bar + data.draw(st.floats(1e-3, 0.1), label="margin"))
        else:
            scores.append(data.draw(st.floats(0, 1), label="filler"))
    for end in range(1, len(scores) + 1):
        decision = detect_plateau(scores[:end], rule)
        assert not decision.plateau, (scores[:end], decision)


@settings(max_examples=examples(500), deadline=None)
@given(policies, st.floats(0, 1), st.integers(0, 12))
def test_constant_series_always_plateaus(rule: PlateauPolicy, value: float, extra: int) -> None:
    length = max(rule.effective_min_attempts, rule.patience + 1) + extra
    decision = detect_plateau([value] * length, rule)
    assert decision.plateau
    assert decision.delta == 0.0


@settings(max_examples=examples(1000), deadline=None)
@given(policies, st.lists(st.floats(0, 1) | st.sampled_from([math.nan, math.inf]), max_size=20))
def test_decision_follows_the_rule(rule: PlateauPolicy, scores: list[float]) -> None:
    decision = detect_plateau(scores, rule)
    valid = [s for s in scores if math.isfinite(s)]
    assert decision.counted == len(valid)
    needed = max(rule.effective_min_attempts, rule.patience + 1)
    if len(valid) < rule.patience + 1:
        assert decision.best_before is None
        assert not decision.plateau
        return
    assert decision.best_before == max(valid[: -rule.patience])
    assert decision.best_within == max(valid[-rule.patience :])
    assert decision.threshold is not None
    assert decision.plateau == (len(valid) >= needed and decision.best_within <= decision.threshold)
