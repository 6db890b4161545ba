"""Best of N, the claim side: a claim of a stage with `candidates = K`
opens the round's first candidate (the task becomes `running`, as for any
claim), and each further slot is claimed on its own, by any tick on any
host, with no transition: the task stays `running` at the version the
first claim gave it, so every candidate's record is fenced alike."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig, Settings, StageConfig
from orchestrator.ext.model import Claim
from orchestrator.storage import repo
from orchestrator.storage.repo import rounds as round_rows
from orchestrator.tick.host import HostIdentity


def configured(settings: Settings) -> bool:
    """Whether any stage runs candidates: only then does a claim look for
    open slots (a project without one claims exactly as before)."""
    return any(stage.candidates > 1 for p in settings.pipelines.values() for stage in p.stages)


def attempt_columns(
    me: HostIdentity,
    task: repo.TaskSnapshot,
    stage: StageConfig,
    *,
    number: int,
    token: str,
    lease: Any,
    now: datetime,
    tick_id: int | None,
) -> dict[str, Any]:
    """The columns every claim's attempt row gets, a first claim's or a
    slot's: one list, so neither can open a row the other would not."""
    return {
        "task_id": task.id,
        "stage": task.stage,
        "run": task.run,
        "number": number,
        "hint": task.next_hint,
        "tick_id": tick_id,
        "lease_token": token,
        "lease_expires_at": lease,
        "host": me.host,
        "boot_id": me.identity,
        "tick_pid": me.pid,
        "tick_start": me.start_token,
        "started_at": now,
        "pool": stage.pool,
    }


def first_slot(conn: Connection, task: repo.TaskSnapshot, stage: StageConfig) -> dict[str, Any]:
    """The round columns of a claim's attempt: {} for a stage of one."""
    if stage.candidates <= 1:
        return {}
    return {
        "round": round_rows.next_round(conn, task.id, task.stage),
        "candidate": 1,
        "candidates": stage.candidates,
    }


def claim_fields(conn: Connection, attempt_id: int) -> dict[str, Any]:
    """The round fields of a `Claim` rebuilt from its attempt row."""
    found = round_rows.round_of(conn, attempt_id)
    if found is None:
        return {}
    round_no, candidate, candidates = found
    return {"round": round_no, "candidate": candidate, "candidates": candidates}


def claim_slot(
    conn: Connection,
    settings: Settings,
    me: HostIdentity,
    *,
    exclude: Collection[int],
    only: str | None,
    token: str,
    now: datetime,
    tick_id: int,
    lease: Any,
    refused: Callable[[StageConfig], bool] = lambda stage: False,
) -> Claim | None:
    """Open the next unclaimed slot of a running round, if any task has
    one; a round whose stage the config lost is passed over (its open
    candidates end as usual; recovery or the record decides it), and so is
    one whose pool says no: each candidate is an attempt of the pool."""
    skipped = set(exclude)
    while True:
        found = round_rows.find_open_slot(
            conn, host=me.host, any_host=settings.affinity == "any", exclude=skipped, slug=only
        )
        if found is None:
            return None
        task, slot = found
        pipeline = settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(task.stage)
        if pipeline is None or stage is None or refused(stage):
            skipped.add(task.id)
            continue
        return _open(conn, me, task, pipeline, stage, slot, token, now, tick_id, lease)


def _open(
    conn: Connection,
    me: HostIdentity,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    stage: StageConfig,
    slot: round_rows.Slot,
    token: str,
    now: datetime,
    tick_id: int,
    lease: Any,
) -> Claim:
    prev = next(
        (
            a
            for a in repo.attempts_of(conn, task.id, task.stage)
            if a.number == slot.first_number - 1
        ),
        None,
    )
    attempt_id = round_rows.open_candidate(
        conn,
        **attempt_columns(
            me, task, stage, number=slot.number, token=token, lease=lease, now=now, tick_id=tick_id
        ),
        round=slot.round,
        candidate=slot.candidate,
        candidates=slot.candidates,
    )
    return Claim(
        task=task,
        pipeline=pipeline,
        stage=stage,
        attempt_id=attempt_id,
        number=slot.number,
        token=token,
        hint=task.next_hint,
        prev_outcome=(prev.outcome or "") if prev else "",
        prev_score="" if prev is None or prev.score is None else repr(prev.score),
        candidate=slot.candidate,
        round=slot.round,
        candidates=slot.candidates,
    )
