"""Best of N, the record side: a candidate's close, and the round's
decision, made once, by whichever transaction closes its last candidate
(a record or recovery's close of a crashed one). The task's row is held
first, so of two candidates closing at once on two hosts exactly one sees
the round full. The round counts as one attempt: `decide` is asked with
its best candidate's outcome and verdict (`domain.rounds.best`), and the
transition names that candidate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.domain import rounds
from orchestrator.domain.decide import Decision, Outcome, decide
from orchestrator.domain.pipeline import State
from orchestrator.domain.verdict import Verdict
from orchestrator.ext.lookups import stage_names, stage_of, stage_policy
from orchestrator.ext.model import RoundEnd, Slot
from orchestrator.ext.ports import ApplierPort
from orchestrator.features.candidates import store as round_rows
from orchestrator.storage import repo


@dataclass(frozen=True)
class Decided:
    """What deciding a round did: its decision and the candidate it names."""

    decision: Decision
    best: round_rows.Member
    candidates: int
    state: State  # the state written: the decision's, or where a pipeline puts it


def close(
    conn: Connection,
    settings: Settings,
    applier: ApplierPort,
    task: repo.TaskSnapshot,
    slot: Slot,
    now: datetime,
) -> RoundEnd:
    """One candidate closed (`TickHooks.decide_round`): the round decided
    if it was the last, and the tail of the candidate's line."""
    end = decide_if_full(conn, settings, applier, task, slot.round, now)
    return RoundEnd(
        None if end is None else end.decision,
        describe(end, slot.candidate, slot.candidates, slot.round),
        None if end is None else end.state,
    )


def decide_if_full(
    conn: Connection,
    settings: Settings,
    applier: ApplierPort,
    task: repo.TaskSnapshot,
    round_no: int,
    now: datetime,
) -> Decided | None:
    """Decide the task's round `round_no` when every slot has ended (the
    caller closed one in this transaction, holding the task's row); None
    while candidates remain, or when it was decided already."""
    members = round_rows.members(conn, task.id, task.stage, round_no)
    if not members or len(members) < members[0].candidates:
        return None
    if any(m.finished_at is None for m in members):
        return None
    if round_rows.decided(conn, [m.id for m in members]) is not None:
        return None
    stage = stage_of(settings, task)
    if stage is None:
        applier.halt_unknown(conn, task, now)
        return None
    best = rounds.best(
        [
            rounds.Candidate(m.id, m.number, m.candidate, Outcome(m.outcome), m.score)
            for m in members
            if m.outcome is not None
        ]
    )
    chosen = next(m for m in members if m.id == best.attempt_id)
    decision = decide(
        task.stage,
        stage_names(settings, task),
        stage_policy(settings, stage),
        repo.run_history(conn, task, excluding_round=round_no),
        best.outcome,
        _verdict(chosen),
        None,
    )
    if decision.plateau is not None:
        plateau = json.dumps(decision.plateau.to_dict(), sort_keys=True)
        round_rows.record_plateau(conn, chosen.id, plateau)
    # Only a winner's commit is the task's; the others stay at their refs.
    keep = chosen.id if best.outcome is Outcome.PASSED else None
    round_rows.clear_commits(conn, [m.id for m in members if m.id != keep])
    written = applier.apply(conn, task, decision, chosen.id, now)
    return Decided(decision, chosen, len(members), written)


def _verdict(member: round_rows.Member) -> Verdict | None:
    if member.passed is None or member.score is None:
        return None
    reasons = tuple(json.loads(member.reasons)) if member.reasons else ()
    return Verdict(bool(member.passed), float(member.score), reasons, member.next_hint or "")


def describe(end: Decided | None, candidate: int, candidates: int, round_no: int) -> str:
    """The tail of a candidate's line in the log."""
    if end is None:
        return f"(round {round_no}: candidate {candidate} of {candidates} ended)"
    won = "won" if end.best.outcome == Outcome.PASSED.value else "was best"
    return (
        f"(round {round_no} decided: attempt {end.best.number}, "
        f"candidate {end.best.candidate} of {end.candidates}, {won})"
    )
