"""A landing's send-back, bounded: a conflict or a failing check sends the
task back to `land_to` with a hint, at most `max_land_sendbacks` times
since it was added or last resumed; the landing failing once more halts it
`land_failed`, the hint its reason (docs/decisions/land-sendbacks.md).

Each send-back starts a new run of `land_to`, so `max_attempts` (which
counts one run's attempts) never stops a check that cannot pass.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.ext.model import ACTOR
from orchestrator.features.landing.model import SendBack
from orchestrator.features.landing.store import sendbacks_since_resume
from orchestrator.storage import repo


def send_back(
    conn: Connection,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    outcome: SendBack,
    now: datetime,
) -> tuple[str, bool]:
    """Record the send-back (or, past the bound, the halt) in the caller's
    transaction; (what the tick says, whether the task halted)."""
    limit = pipeline.landing.max_sendbacks
    if sendbacks_since_resume(conn, task.id) >= limit:
        repo.apply_transition(
            conn,
            task,
            Event.GIVE_UP,
            State(task.stage, Status.HALTED),
            now=now,
            actor=ACTOR,
            reason=f"sent back {limit} time(s) (max_land_sendbacks), then: {outcome.hint}",
            halt_reason=HaltReason.LAND_FAILED.value,
            # The hint stays the task's: the run a `resume` starts is given it.
            next_hint=outcome.hint,
            hint_source="landing",
        )
        return f"halted (land_failed: {first_line(outcome.hint)})", True
    to = pipeline.landing.to or pipeline.first_stage()
    repo.apply_transition(
        conn,
        task,
        Event.SEND_BACK,
        State(to, Status.READY),
        now=now,
        actor=ACTOR,
        reason=first_line(outcome.hint),
        next_hint=outcome.hint,
        hint_source="landing",
        new_run=True,
    )
    return f"landing sent it back to {to}", False


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "sent back"
    return line[:500]
