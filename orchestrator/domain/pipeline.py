"""The state machine as one table (docs/explanation/state-machine.md).

A task's state is a stage plus a status. Every change of state is an *event*
applied to that pair; `TRANSITIONS` is the single list of legal edges, and
both the engine and the human commands go through `next_state`, so a state
the table does not allow can never be written. The table is data, so tests
walk every (status, event) pair and the manual's diagram can be checked
against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.errors import IllegalTransitionError, InvalidChoiceError

COMPLETE = "complete"


class Status(StrEnum):
    READY = "ready"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    HALTED = "halted"
    CANCELLED = "cancelled"
    COMPLETE = "complete"
    # The last stage passed; the change is being landed (`land`): the
    # step between the last stage and `complete` (`features/landing/landing.py`).
    LANDING = "landing"
    # Landed, and held by a feature until something outside decides (a pull
    # request followed until it is merged or closed): `hold` from `landing`.
    HELD = "held"


class Event(StrEnum):
    CLAIM = "claim"  # a tick starts an attempt
    STAGE_PASSED = "stage_passed"  # verdict passed, stage not gated
    AWAIT_APPROVAL = "await_approval"  # verdict passed, stage gated
    RETRY = "retry"  # failed, crashed or interrupted; the stage runs again
    GIVE_UP = "give_up"  # plateau, max_attempts, max_interrupts
    APPROVE = "approve"
    REJECT = "reject"
    ADVANCE = "advance"  # an approved gate moves on to the next stage
    RESUME = "resume"
    HALT = "halt"  # a human stops the task
    CANCEL = "cancel"
    LANDED = "landed"  # the landing step moved the change to its target
    SEND_BACK = "send_back"  # a landing's conflict or failing check: back to `land_to`
    HOLD = "hold"  # landed where a feature follows it (a pull request): `held`
    # A person moved the task to another pipeline version (`features/versions`):
    # its status stays, its stage may change (`--map`).
    MIGRATE = "migrate"


class Target(StrEnum):
    """Where an edge leads: a status at the same stage, the next stage, or
    (reject only) ready at the same stage or an earlier one."""

    SAME_READY = "ready"
    SAME_RUNNING = "running"
    SAME_AWAITING = "awaiting_approval"
    SAME_APPROVED = "approved"
    SAME_HALTED = "halted"
    SAME_CANCELLED = "cancelled"
    SAME_HELD = "held"
    NEXT_STAGE = "next_stage"
    BACK_READY = "back"  # reject: this stage again, or `reject --to` an earlier one
    COMPLETE = "complete"  # landed: finished, whatever stage it landed from
    MIGRATED = "migrated"  # the same status, at the stage `migrate` names


_LIVE = (
    Status.READY,
    Status.RUNNING,
    Status.AWAITING_APPROVAL,
    Status.APPROVED,
    Status.LANDING,
    Status.HELD,
)

TRANSITIONS: dict[tuple[Status, Event], Target] = {
    (Status.READY, Event.CLAIM): Target.SAME_RUNNING,
    (Status.RUNNING, Event.STAGE_PASSED): Target.NEXT_STAGE,
    (Status.RUNNING, Event.AWAIT_APPROVAL): Target.SAME_AWAITING,
    (Status.RUNNING, Event.RETRY): Target.SAME_READY,
    (Status.RUNNING, Event.GIVE_UP): Target.SAME_HALTED,
    (Status.AWAITING_APPROVAL, Event.APPROVE): Target.SAME_APPROVED,
    (Status.AWAITING_APPROVAL, Event.REJECT): Target.BACK_READY,
    (Status.APPROVED, Event.ADVANCE): Target.NEXT_STAGE,
    (Status.HALTED, Event.RESUME): Target.SAME_READY,
    (Status.LANDING, Event.LANDED): Target.COMPLETE,
    (Status.LANDING, Event.SEND_BACK): Target.BACK_READY,
    (Status.LANDING, Event.GIVE_UP): Target.SAME_HALTED,  # a landing refused
    (Status.LANDING, Event.HOLD): Target.SAME_HELD,
    # What the holding feature saw: merged, sent back with feedback, closed.
    (Status.HELD, Event.LANDED): Target.COMPLETE,
    (Status.HELD, Event.SEND_BACK): Target.BACK_READY,
    (Status.HELD, Event.GIVE_UP): Target.SAME_HALTED,
    **{(status, Event.HALT): Target.SAME_HALTED for status in _LIVE},
    **{(status, Event.CANCEL): Target.SAME_CANCELLED for status in (*_LIVE, Status.HALTED)},
    # Not while running (its attempt ends first) nor landing (its branch has
    # passed every stage of its version).
    **{
        (status, Event.MIGRATE): Target.MIGRATED
        for status in (Status.READY, Status.AWAITING_APPROVAL, Status.APPROVED, Status.HALTED)
    },
}

# `add` creates a task: its first transition, which has no state before it
# and so no edge in the table. The schema allows exactly these events.
ADD = "add"
RECORDED_EVENTS = (ADD, *(event.value for event in Event))


@dataclass(frozen=True)
class State:
    stage: str
    status: Status

    def __str__(self) -> str:
        return state_string(self.stage, self.status)


def state_string(stage: str, status: Status | str) -> str:
    """`research`, `research:halted`, `complete`: the form users read and filter on."""
    if status in (Status.READY, Status.COMPLETE):
        return stage
    return f"{stage}:{status}"


def parse_state(text: str) -> State:
    """Inverse of `state_string`; raises IllegalTransitionError-free ValueError on junk."""
    stage, _, status = text.partition(":")
    if not stage:
        raise ValueError(f"invalid state {text!r}")
    if not status:
        return State(stage, Status.COMPLETE if stage == COMPLETE else Status.READY)
    try:
        parsed = Status(status)
    except ValueError:
        raise ValueError(f"invalid state {text!r}: unknown status {status!r}") from None
    if parsed in (Status.READY, Status.COMPLETE):
        raise ValueError(f"invalid state {text!r}: write it as {stage!r}")
    return State(stage, parsed)


def following_stage(stage: str, stage_names: Sequence[str]) -> str:
    """The stage after `stage`, or `complete` after the last one."""
    try:
        index = stage_names.index(stage)
    except ValueError:
        raise IllegalTransitionError(f"stage {stage!r} is not in the pipeline") from None
    return stage_names[index + 1] if index + 1 < len(stage_names) else COMPLETE


def check_transition(before: State, event: Event, after: State) -> None:
    """Refuse (IllegalTransitionError) a change of state the table has no edge
    for. Every write of a task's state passes here, so a state the table does
    not allow can never be stored, whoever computed it."""
    target = TRANSITIONS.get((before.status, event))
    if target is None:
        raise IllegalTransitionError(f"cannot {event.value} a task in state {before}")
    if target is Target.NEXT_STAGE:
        legal = (
            after.stage != before.stage
            and after.status in (Status.READY, Status.COMPLETE)
            and (after.status is Status.COMPLETE) == (after.stage == COMPLETE)
        ) or (after.stage == before.stage and after.status is Status.LANDING)
    elif target is Target.COMPLETE:
        legal = after == State(COMPLETE, Status.COMPLETE)
    elif target is Target.BACK_READY:
        # Which stages are earlier is the pipeline's to say (`reject_state`);
        # the edge itself only ever leads to a stage ready to run.
        legal = after.status is Status.READY and after.stage != COMPLETE
    elif target is Target.MIGRATED:
        legal = after.status is before.status and after.stage != COMPLETE
    elif event is Event.RESUME and after.status is Status.LANDING:
        # A refused landing resumed: landed again, not its last stage rerun
        # (`resume_state`).
        legal = after.stage == before.stage
    else:
        legal = after.stage == before.stage and after.status.value == target.value
    if not legal:
        raise IllegalTransitionError(f"{event.value} cannot lead from {before} to {after}")


def next_state(state: State, event: Event, stage_names: Sequence[str]) -> State:
    """Apply `event` to `state`, or raise IllegalTransitionError naming both."""
    target = TRANSITIONS.get((state.status, event))
    if target is None:
        raise IllegalTransitionError(f"cannot {event.value} a task in state {state}")
    if target is Target.NEXT_STAGE:
        stage = following_stage(state.stage, stage_names)
        return State(stage, Status.COMPLETE if stage == COMPLETE else Status.READY)
    if target is Target.BACK_READY:
        return State(state.stage, Status.READY)
    if target is Target.COMPLETE:
        return State(COMPLETE, Status.COMPLETE)
    if target is Target.MIGRATED:  # the same stage: a `--map` names another itself
        return state
    return State(state.stage, Status(target.value))


def landing_instead(before: State, to: State, lands: bool) -> State:
    """Where a passed last stage leads: `complete`, or (a pipeline that
    lands its changes) `landing` at that stage, the step before `complete`.
    The edge is still the pass's own (`stage_passed`, `advance`)."""
    if lands and to.status is Status.COMPLETE:
        return State(before.stage, Status.LANDING)
    return to


def resume_state(state: State, halt_reason: str | None) -> State:
    """Where `resume` leads: ready at the stage, or for a landing that was
    refused (`land_refused`: its branch passed every stage) `landing` again,
    so the next tick retries the landing, not the last stage's agent."""
    if state.status is Status.HALTED and halt_reason == "land_refused":
        return State(state.stage, Status.LANDING)
    return next_state(state, Event.RESUME, ())


def land_to_stage(stages: Sequence[tuple[str, bool]], named: str | None) -> str | None:
    """The stage a landing sends a task back to: `named`, else the
    pipeline's `implement`, else its first stage without a gate (`stages`
    is (name, gated) in order); None when there is none."""
    names = [name for name, _gated in stages]
    if named is not None:
        return named if named in names else None
    if "implement" in names:
        return "implement"
    return next((name for name, gated in stages if not gated), None)


def reject_choices(stage: str, stage_names: Sequence[str]) -> tuple[str, ...]:
    """The stages `reject --to` may name at a gate of `stage`: the earlier
    stages of the pipeline, in order, then the gate's own."""
    if stage not in stage_names:
        return ()
    return tuple(stage_names[: stage_names.index(stage) + 1])


def reject_state(state: State, to: str | None, stage_names: Sequence[str]) -> State:
    """Where `reject` sends a task at a gate: its own stage again (`to` None
    or that stage), or `to`, an earlier stage of its pipeline. A flaw found
    at a review is fixed where the work is done, not by the reviewer."""
    again = next_state(state, Event.REJECT, stage_names)  # raises unless at a gate
    if to is None or to == state.stage:
        return again
    choices = reject_choices(state.stage, stage_names)
    if to not in choices:
        listed = ", ".join(choices) or "none (the pipeline lost this stage)"
        raise InvalidChoiceError(
            f"reject --to {to!r}: not an earlier stage of {state.stage!r} in the task's "
            f"pipeline; choose one of: {listed}"
        )
    return State(to, Status.READY)
