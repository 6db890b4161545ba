"""The state machine: every (status, event) pair, legal and illegal."""

from __future__ import annotations

import itertools

import pytest

from orchestrator.domain.pipeline import (
    COMPLETE,
    TRANSITIONS,
    Event,
    State,
    Status,
    check_transition,
    following_stage,
    land_to_stage,
    landing_instead,
    next_state,
    parse_state,
    reject_state,
    state_string,
)
from orchestrator.errors import IllegalTransitionError, InvalidChoiceError

STAGES = ("research", "implement", "referee")

# The state diagram of docs/explanation/state-machine.md, written out independently of the table.
EXPECTED: dict[tuple[Status, Event], State] = {
    (Status.READY, Event.CLAIM): State("implement", Status.RUNNING),
    (Status.RUNNING, Event.STAGE_PASSED): State("referee", Status.READY),
    (Status.RUNNING, Event.AWAIT_APPROVAL): State("implement", Status.AWAITING_APPROVAL),
    (Status.RUNNING, Event.RETRY): State("implement", Status.READY),
    (Status.RUNNING, Event.GIVE_UP): State("implement", Status.HALTED),
    (Status.AWAITING_APPROVAL, Event.APPROVE): State("implement", Status.APPROVED),
    (Status.AWAITING_APPROVAL, Event.REJECT): State("implement", Status.READY),
    (Status.APPROVED, Event.ADVANCE): State("referee", Status.READY),
    (Status.HALTED, Event.RESUME): State("implement", Status.READY),
    (Status.LANDING, Event.LANDED): State(COMPLETE, Status.COMPLETE),
    (Status.LANDING, Event.SEND_BACK): State("implement", Status.READY),
    (Status.LANDING, Event.GIVE_UP): State("implement", Status.HALTED),
    (Status.LANDING, Event.HOLD): State("implement", Status.HELD),
    (Status.HELD, Event.LANDED): State(COMPLETE, Status.COMPLETE),
    (Status.HELD, Event.SEND_BACK): State("implement", Status.READY),
    (Status.HELD, Event.GIVE_UP): State("implement", Status.HALTED),
    **{
        (status, Event.HALT): State("implement", Status.HALTED)
        for status in (
            Status.READY,
            Status.RUNNING,
            Status.AWAITING_APPROVAL,
            Status.APPROVED,
            Status.LANDING,
            Status.HELD,
        )
    },
    **{
        (status, Event.CANCEL): State("implement", Status.CANCELLED)
        for status in (
            Status.READY,
            Status.RUNNING,
            Status.AWAITING_APPROVAL,
            Status.APPROVED,
            Status.LANDING,
            Status.HELD,
            Status.HALTED,
        )
    },
    # `migrate` keeps the status; the stage is the one its `--map` names.
    **{
        (status, Event.MIGRATE): State("implement", status)
        for status in (Status.READY, Status.AWAITING_APPROVAL, Status.APPROVED, Status.HALTED)
    },
}

ALL_PAIRS = list(itertools.product(Status, Event))


def test_table_is_exactly_the_documented_edges() -> None:
    assert set(TRANSITIONS) == set(EXPECTED)


@pytest.mark.parametrize(("status", "event"), ALL_PAIRS, ids=str)
def test_every_pair(status: Status, event: Event) -> None:
    state = State("implement", status)
    if (status, event) in EXPECTED:
        assert next_state(state, event, STAGES) == EXPECTED[(status, event)]
    else:
        with pytest.raises(IllegalTransitionError, match=event.value):
            next_state(state, event, STAGES)


def test_last_stage_passes_to_complete() -> None:
    assert next_state(State("referee", Status.RUNNING), Event.STAGE_PASSED, STAGES) == State(
        COMPLETE, Status.COMPLETE
    )
    assert next_state(State("referee", Status.APPROVED), Event.ADVANCE, STAGES) == State(
        COMPLETE, Status.COMPLETE
    )


def test_a_pipeline_that_lands_goes_through_landing_before_complete() -> None:
    passed = next_state(State("referee", Status.RUNNING), Event.STAGE_PASSED, STAGES)
    landing = landing_instead(State("referee", Status.RUNNING), passed, lands=True)
    assert landing == State("referee", Status.LANDING)
    check_transition(State("referee", Status.RUNNING), Event.STAGE_PASSED, landing)
    check_transition(State("referee", Status.APPROVED), Event.ADVANCE, landing)
    # Not the last stage, or a pipeline that does not land: unchanged.
    ready = State("referee", Status.READY)
    assert landing_instead(State("implement", Status.RUNNING), ready, lands=True) == ready
    assert landing_instead(State("referee", Status.RUNNING), passed, lands=False) == passed
    # Landing leads nowhere but complete, back to a stage ready, or halted.
    check_transition(landing, Event.LANDED, State(COMPLETE, Status.COMPLETE))
    check_transition(landing, Event.SEND_BACK, State("implement", Status.READY))
    with pytest.raises(IllegalTransitionError):
        check_transition(landing, Event.LANDED, State("referee", Status.READY))
    with pytest.raises(IllegalTransitionError):
        check_transition(State("implement", Status.RUNNING), Event.STAGE_PASSED, landing)


def test_land_to_defaults_to_implement_else_the_first_stage_without_a_gate() -> None:
    gated = [("research", True), ("implement", False), ("review", False)]
    assert land_to_stage(gated, None) == "implement"
    assert land_to_stage([("research", True), ("build", False)], None) == "build"
    assert land_to_stage([("research", True)], None) is None
    assert land_to_stage(gated, "review") == "review"
    assert land_to_stage(gated, "gone") is None


@pytest.mark.parametrize("status", [Status.CANCELLED, Status.COMPLETE])
def test_terminal_states_accept_nothing(status: Status) -> None:
    for event in Event:
        with pytest.raises(IllegalTransitionError):
            next_state(State("implement", status), event, STAGES)


def test_migrate_keeps_the_status_and_may_change_the_stage() -> None:
    for status in (Status.READY, Status.AWAITING_APPROVAL, Status.APPROVED, Status.HALTED):
        check_transition(State("implement", status), Event.MIGRATE, State("review", status))
    with pytest.raises(IllegalTransitionError):
        check_transition(State("implement", Status.HALTED), Event.MIGRATE, State("x", Status.READY))
    with pytest.raises(IllegalTransitionError):
        check_transition(
            State("implement", Status.READY), Event.MIGRATE, State(COMPLETE, Status.READY)
        )
    with pytest.raises(IllegalTransitionError, match="cannot migrate"):
        check_transition(
            State("implement", Status.RUNNING), Event.MIGRATE, State("x", Status.RUNNING)
        )


def test_unknown_stage_cannot_advance() -> None:
    with pytest.raises(IllegalTransitionError, match="not in the pipeline"):
        following_stage("nope", STAGES)


@pytest.mark.parametrize(
    ("stage", "status", "text"),
    [
        ("research", Status.READY, "research"),
        ("research", Status.AWAITING_APPROVAL, "research:awaiting_approval"),
        ("implement", Status.HALTED, "implement:halted"),
        (COMPLETE, Status.COMPLETE, "complete"),
    ],
)
def test_state_strings_round_trip(stage: str, status: Status, text: str) -> None:
    assert state_string(stage, status) == text
    assert parse_state(text) == State(stage, status)


@pytest.mark.parametrize("text", ["", ":running", "research:ready", "x:bogus", "x:complete"])
def test_parse_state_rejects_junk(text: str) -> None:
    with pytest.raises(ValueError, match="invalid state"):
        parse_state(text)


GATE = State("referee", Status.AWAITING_APPROVAL)


@pytest.mark.parametrize("to", [None, "referee"])
def test_reject_without_a_target_or_to_its_own_stage_runs_the_stage_again(to: str | None) -> None:
    assert reject_state(GATE, to, STAGES) == State("referee", Status.READY)


@pytest.mark.parametrize("to", ["research", "implement"])
def test_reject_to_an_earlier_stage_makes_it_ready(to: str) -> None:
    after = reject_state(GATE, to, STAGES)
    assert after == State(to, Status.READY)
    check_transition(GATE, Event.REJECT, after)  # the edge the table allows


@pytest.mark.parametrize("to", ["nope", COMPLETE, "referee:running", ""])
def test_reject_to_a_stage_not_earlier_names_the_choices(to: str) -> None:
    with pytest.raises(InvalidChoiceError) as raised:
        reject_state(GATE, to, STAGES)
    assert "research, implement, referee" in str(raised.value)
    assert raised.value.exit_code == 1


def test_reject_to_a_later_stage_is_refused() -> None:
    gate = State("research", Status.AWAITING_APPROVAL)
    with pytest.raises(InvalidChoiceError, match=r"earlier stage.*: research$"):
        reject_state(gate, "implement", STAGES)


def test_reject_to_an_earlier_stage_needs_a_gate() -> None:
    with pytest.raises(IllegalTransitionError, match="cannot reject"):
        reject_state(State("referee", Status.RUNNING), "research", STAGES)


@pytest.mark.parametrize(
    "after",
    [State("referee", Status.RUNNING), State(COMPLETE, Status.COMPLETE), State("x", Status.HALTED)],
)
def test_reject_edge_leads_only_to_a_ready_stage(after: State) -> None:
    with pytest.raises(IllegalTransitionError):
        check_transition(GATE, Event.REJECT, after)
