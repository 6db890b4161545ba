"""What a gate's reviewer sees, and the hash that binds an approval to it.

The hash covers the task's state and version, the passing verdict, the
captured output tails shown, the agent's answer and the workspace's changes
(full content, by digest). `show`, the web gate page and `approve --expect` all compute it
here, so a hash copied from one is checked by the others
(`api/approving.py`); any change in between refuses the approval with
"changed since you looked".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from orchestrator import safefs
from orchestrator.config import Settings
from orchestrator.features.candidates.views import CandidateView, round_candidates
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.storage.reads.attempts import run_started_at
from orchestrator.views.answer import Answer, agent_answer
from orchestrator.views.branch import BranchChanges, branch_changes
from orchestrator.views.reports import attempt_dir
from orchestrator.views.suggest import unknown_task
from orchestrator.workspace.changes import collect
from orchestrator.workspace.listing import LOOK_BYTES, StageStart, WorkspaceChanges

TAIL_BYTES = 4096
CAPTURES = ("worker.out", "worker.err", "verifier.out", "verifier.err")
HASH_LENGTH = 16  # hex digits: enough to tell apart, short enough to type


@dataclass
class GateView:
    task: repo.TaskSnapshot
    attempt: repo.AttemptSnapshot | None  # the newest attempt at the stage
    tails: dict[str, str]  # capture name -> its last TAIL_BYTES, as text
    stage_started: datetime | None
    changes: WorkspaceChanges
    digest: str
    answer: Answer | None = None  # what the agent said, out of its envelope
    # A task is a branch: the whole change, then this stage's part.
    branch: BranchChanges | None = None
    # Best of N: the round's candidates, the winner first (`features.candidates.views`).
    candidates: list[CandidateView] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        return self.task.status.value == "awaiting_approval"


def gate_view(engine: Engine, settings: Settings, slug: str) -> GateView:
    """Read the gate's artifacts; works at any state (the hash then binds that state)."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        attempts = repo.attempts_of(conn, task.id, task.stage)
        started = run_started_at(conn, task.id, task.stage, task.run)
        commit = repo.stage_start_commit(conn, task.id, task.stage, task.run)
    attempt = attempts[-1] if attempts else None
    folder = attempt_dir(settings.state_root, slug, attempt) if attempt else None
    # One budget for the whole look: however many files, a look reads at
    # most LOOK_BYTES (a file past it is hashed by its metadata instead).
    budget = safefs.Budget(LOOK_BYTES)
    tails = _tails(folder, budget) if folder else {}
    pipeline = settings.pipeline(task.pipeline)
    stage = pipeline.stage(task.stage) if pipeline else None
    answer = agent_answer(folder, stage) if folder else None
    branch = branch_changes(engine, settings, slug) if task.branch else None
    if branch is not None:
        changes = WorkspaceChanges(kind="branch", digest_parts=list(branch.digest_parts))
    else:
        changes = collect(settings.workspace_root / slug, StageStart(started, commit), budget)
    candidates = round_candidates(engine, settings, task) if task.branch else []
    digest = _digest(task, attempt, tails, changes, answer, candidates)
    return GateView(task, attempt, tails, started, changes, digest, answer, branch, candidates)


def _tails(folder: Path, budget: safefs.Budget) -> dict[str, str]:
    """The commands could write in their folder: a capture swapped for a
    link (to a file outside) or a FIFO is not shown, and not hashed."""
    tails: dict[str, str] = {}
    for name in CAPTURES:
        try:
            data = safefs.read_tail(folder / name, TAIL_BYTES, budget)
        except OSError:
            continue
        tails[name] = data.decode("utf-8", "replace")
    return tails


def _digest(
    task: repo.TaskSnapshot,
    attempt: repo.AttemptSnapshot | None,
    tails: dict[str, str],
    changes: WorkspaceChanges,
    answer: Answer | None,
    candidates: list[CandidateView] | None = None,
) -> str:
    shown: dict[str, object] = {
        "task": [task.slug, str(task.state), task.version],
        "attempt": None
        if attempt is None
        else [attempt.id, attempt.outcome, attempt.score, list(attempt.reasons)],
        "tails": tails,
        "changes": [changes.kind, *changes.digest_parts],
        "answer": None if answer is None else answer.text,
    }
    if candidates:  # only then: a stage of one keeps its hash
        shown["candidates"] = [[c.number, c.score, c.winner, c.diff] for c in candidates]
    blob = json.dumps(shown, sort_keys=True, ensure_ascii=True).encode()
    return hashlib.sha256(blob).hexdigest()[:HASH_LENGTH]
