"""The graph checks of `add --after`, on their own (no database)."""

from __future__ import annotations

import pytest

from orchestrator.domain.waits import Wait, check_waits, find_cycle, parse_after, waiting_line
from orchestrator.errors import DependencyError


def test_parse_after_keeps_order_and_drops_blanks_and_repeats() -> None:
    assert parse_after(" a, b,,a ,c") == ("a", "b", "c")
    assert parse_after("") == ()


def test_a_cycle_is_found_and_named_around() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None  # a diamond is fine


def test_a_long_chain_does_not_recurse() -> None:
    edges = {f"t{i}": [f"t{i + 1}"] for i in range(20_000)}
    assert find_cycle(edges) is None
    edges["t20000"] = ["t0"]
    cycle = find_cycle(edges)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert len(cycle) == 20_002


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ({"a": ("a",)}, "cannot wait on itself"),
        ({"a": ("ghost",)}, "'ghost', which does not exist"),
        ({"a": ("b",), "b": ("a",)}, "cycle: a -> b -> a"),
    ],
)
def test_bad_waits_are_refused_as_data_errors(
    new: dict[str, tuple[str, ...]], message: str
) -> None:
    with pytest.raises(DependencyError, match=message) as caught:
        check_waits(new, existing=set())
    assert caught.value.exit_code == 65


def test_a_wait_on_an_existing_task_is_fine() -> None:
    check_waits({"b": ("a",)}, existing={"a"})


def test_the_waiting_line_names_a_stuck_task() -> None:
    assert waiting_line([Wait("a", "build", "complete")]) is None
    assert waiting_line([Wait("a", "build:running", "running")]) == (
        "waits until a (build:running) is complete"
    )
    halted = waiting_line([Wait("a", "build:halted", "halted", "manual")])
    assert halted is not None
    assert "a (halted: manual)" in halted
    assert "resume" in halted
    cancelled = waiting_line([Wait("a", "build:cancelled", "cancelled")])
    assert cancelled is not None
    assert "a, cancelled: it never runs" in cancelled
