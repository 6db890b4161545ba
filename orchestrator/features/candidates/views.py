"""Best of N, the read side: which attempts were candidates of a round,
and which candidate each decided round chose (`show`, the gate page)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from orchestrator.config import Settings
from orchestrator.features.candidates import store as round_rows
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.storage.reads.attempts import named_attempts, newest_round, round_slots
from orchestrator.workspace.gitrun import GitError, run_git


def round_facts(conn: Connection, task_id: int) -> dict[int, dict[str, Any]]:
    """attempt id -> its `round`, `candidate`, `candidates` and `winner`
    (the candidate its round's decision named: the winner, or the best of
    a round none passed), for the task's candidates only."""
    rows = round_slots(conn, task_id)
    if not rows:
        return {}
    named = named_attempts(conn, task_id)
    return {
        row.id: {
            "round": row.round,
            "candidate": row.candidate,
            "candidates": row.candidates,
            "winner": row.id in named,
        }
        for row in rows
    }


def slot_label(attempt: dict[str, Any]) -> str:
    """`2/4*`: candidate 2 of 4, chosen by its round; "" for an attempt alone."""
    if attempt.get("round") is None:
        return ""
    mark = "*" if attempt.get("winner") else ""
    return f"r{attempt['round']} {attempt['candidate']}/{attempt['candidates']}{mark}"


DIFF_CHARS = 20000  # of each candidate's diff on the gate page


@dataclass(frozen=True)
class CandidateView:
    """One candidate of the round a gate waits on, as its reviewer sees it."""

    number: int
    candidate: int
    candidates: int
    outcome: str | None
    score: float | None
    reasons: tuple[str, ...]
    winner: bool
    base: str | None  # the round's base (the candidate's start commit)
    ref: str
    diff: str
    truncated: bool


def round_candidates(
    engine: Engine, settings: Settings, task: repo.TaskSnapshot
) -> list[CandidateView]:
    """The candidates of the newest round at the task's stage and run, the
    winner first, then by score; each with its diff against the round's
    base from its kept ref. Empty for a stage without candidates."""
    with read_tx(engine) as conn:
        newest = newest_round(conn, task.id, task.stage, task.run)
        if newest is None:
            return []
        members = round_rows.members(conn, task.id, task.stage, newest)
        chosen = round_rows.decided(conn, [m.id for m in members])
    pipeline = settings.pipeline(task.pipeline)
    repository = None if pipeline is None else pipeline.repository
    views = []
    for m in members:
        ref = f"refs/orchestrator/{task.slug}/{task.stage}/{m.number}"
        diff, cut = _diff(repository, m.start_commit, ref)
        reasons = tuple(json.loads(m.reasons)) if m.reasons else ()
        views.append(
            CandidateView(
                m.number, m.candidate, m.candidates, m.outcome, m.score, reasons,
                m.id == chosen, m.start_commit, ref, diff, cut,
            )
        )  # fmt: skip
    return sorted(views, key=lambda v: (not v.winner, -(v.score or 0.0), v.number))


def _diff(repository: Path | None, base: str | None, ref: str) -> tuple[str, bool]:
    if repository is None or base is None or len(base) < 40:
        return "", False
    flags = ["--no-color", "--no-ext-diff", "--no-textconv", "--find-renames"]
    try:
        text = run_git(repository, ["diff", *flags, base, ref])
    except GitError:
        return "", False  # no commit of the candidate's (it crashed before one)
    return text[:DIFF_CHARS], len(text) > DIFF_CHARS
