"""Best of N, the claim side: a claim of a stage with `candidates = K`
opens the round's first candidate (the task becomes `running`, as for any
claim), and each further slot is claimed on its own, by any tick on any
host, with no transition: the task stays `running` at the version the
first claim gave it, so every candidate's record is fenced alike."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.ext.model import Claim, ClaimSearch, Slot, attempt_columns
from orchestrator.ext.ports import Kernel
from orchestrator.features.candidates import store as round_rows
from orchestrator.storage import repo
from orchestrator.storage.db import db_now


def open_first(
    conn: Connection, task: repo.TaskSnapshot, stage: StageConfig, columns: dict[str, Any]
) -> tuple[int, Slot] | None:
    """A claim's attempt of a stage of K: the round's first slot, opened
    with the engine's columns; None for a stage of one (the engine's row)."""
    if stage.candidates <= 1:
        return None
    slot = Slot(round_rows.next_round(conn, task.id, task.stage), 1, stage.candidates)
    attempt_id = round_rows.open_candidate(
        conn, **columns, round=slot.round, candidate=1, candidates=slot.candidates
    )
    return attempt_id, slot


def slot_of(conn: Connection, attempt_id: int) -> Slot | None:
    """The round slot of an attempt row; None for an attempt on its own."""
    found = round_rows.round_of(conn, attempt_id)
    return None if found is None else Slot(*found)


def claim_slot(kernel: Kernel, conn: Connection, search: ClaimSearch) -> Claim | None:
    """Open the next unclaimed slot of a running round, if any task has
    one; a round whose stage the config lost is passed over (its open
    candidates end as usual; recovery or the record decides it), and so is
    one whose pool says no: each candidate is an attempt of the pool."""
    settings, me = kernel.settings, kernel.me
    now = db_now(conn)
    tick_id = kernel.tx.ensure_tick(conn, now)
    lease = repo.lease_expiry(now, settings.lease_seconds)
    skipped = set(search.exclude)
    while True:
        found = round_rows.find_open_slot(
            conn,
            host=me.host,
            any_host=settings.affinity == "any",
            exclude=skipped,
            slug=search.only,
        )
        if found is None:
            return None
        task, slot = found
        pipeline = settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(task.stage)
        if pipeline is None or stage is None or search.refused(conn, stage, now) is not None:
            skipped.add(task.id)
            continue
        columns = attempt_columns(
            me,
            task,
            stage,
            number=slot.number,
            token=search.token,
            lease=lease,
            now=now,
            tick_id=tick_id,
        )
        return _open(conn, task, pipeline, stage, slot, search.token, columns)


def _open(
    conn: Connection,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    stage: StageConfig,
    slot: round_rows.Slot,
    token: str,
    columns: dict[str, Any],
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
        **columns,
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
