"""`context.json`: what an attempt is told about its task, before it starts.

The environment and the prompt carry one hint and the previous score; an
agent that is to learn from the run needs the reasons, the run's history,
the approver's notes and what the earlier stages concluded. All of it is
read through the storage layer in one read transaction and written, once,
as a versioned JSON file in the attempt's state folder
(`{context_file}`, `ORCHESTRATOR_CONTEXT_FILE`). The format is documented
in the README ("The context file"); fields are only ever added within a
version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, select

from orchestrator import safefs
from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.domain.decide import Outcome, RunHistory
from orchestrator.domain.plateau import detect_plateau
from orchestrator.storage import repo, tables
from orchestrator.storage.db import read_tx

CONTEXT_VERSION = 1
CONTEXT_NAME = "context.json"
# Notes people left with these events reach the agent.
_NOTE_EVENTS = ("approve", "reject", "resume", "halt", "add")


@dataclass(frozen=True)
class ContextFile:
    """The context as data, and the prompt placeholders derived from it."""

    data: dict[str, Any]

    @property
    def reasons(self) -> str:
        """The run's last verdict's reasons, one `- ` line each. Attempts
        without a verdict after it (a backoff, an error) are passed over:
        a rate limit must not make the agent forget what the judge said."""
        judged = [row for row in self.data["history"] if row["pass"] is not None]
        last = judged[-1]["reasons"] if judged else []
        return "\n".join(f"- {reason}" for reason in last)

    @property
    def history(self) -> str:
        """A compact table of the run's attempts (empty when there are none)."""
        rows = self.data["history"]
        if not rows:
            return ""
        lines = ["attempt | outcome | score | pass | next_hint"]
        for row in rows:
            score = "" if row["score"] is None else f"{row['score']:.2f}"
            passed = "" if row["pass"] is None else ("yes" if row["pass"] else "no")
            hint = (row["next_hint"] or row["error"] or "").replace("\n", " ")
            hint = hint if len(hint) <= 100 else hint[:97] + "..."
            lines.append(f"{row['number']} | {row['outcome']} | {score} | {passed} | {hint}")
        return "\n".join(lines)

    @property
    def prev_session(self) -> str:
        return str(self.data["attempt"]["prev_session"] or "")


def build_context(
    engine: Engine,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    stage: StageConfig,
    attempt_id: int,
    number: int,
    hint: str,
) -> ContextFile:
    with read_tx(engine) as conn:
        return _build(conn, task, pipeline, stage, attempt_id, number, hint)


def write_context(context: ContextFile, state_dir: Path) -> Path:
    """Written whole or not at all (a reader never sees half a file)."""
    path = state_dir / CONTEXT_NAME
    safefs.replace(path, json.dumps(context.data, indent=2, sort_keys=True).encode("utf-8"))
    return path


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _build(
    conn: Connection,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    stage: StageConfig,
    attempt_id: int,
    number: int,
    hint: str,
) -> ContextFile:
    finished = [a for a in repo.context_rows(conn, task.id) if a["id"] != attempt_id]
    this_run = [a for a in finished if a["stage"] == stage.name and a["run"] == task.run]
    # The run's facts from the rows already read (one query fewer per attempt).
    history = RunHistory.of(
        [(Outcome(a["outcome"]), a["score"]) for a in this_run],
        hint=task.next_hint,
        changes=[a["workspace_changed"] for a in this_run],
    )
    plateau = detect_plateau(history.scores, stage.plateau)
    earlier = pipeline.stage_names[: pipeline.stage_names.index(stage.name)]
    data: dict[str, Any] = {
        "version": CONTEXT_VERSION,
        "task": {
            "slug": task.slug,
            "title": task.title,
            "body": task.body,
            "pipeline": task.pipeline,
            "priority": task.priority,
        },
        "stage": {
            "name": stage.name,
            "gate": stage.gate,
            "max_attempts": stage.max_attempts,
            "pass_score": stage.pass_score,
        },
        "attempt": {
            "number": number,
            "run": task.run,
            "hint": hint,
            "attempts_left": max(0, stage.max_attempts - history.counted_attempts),
            "prev_session": _prev_session(conn, task.id, stage.name, number),
        },
        "history": [_attempt(a) for a in this_run],
        "notes": _notes(conn, task.id),
        "earlier_stages": {
            name: _passing(finished, name) for name in earlier if _passing(finished, name)
        },
        "plateau": {
            "patience": stage.plateau.patience,
            "min_delta": stage.plateau.min_delta,
            "mode": stage.plateau.mode,
            "min_attempts": stage.plateau.effective_min_attempts,
            "scores": list(history.scores),
            **{k: v for k, v in plateau.to_dict().items() if k != "plateau"},
        },
        "guards": _guards(stage, history),
    }
    return ContextFile(data)


def _attempt(a: dict[str, Any]) -> dict[str, Any]:
    return {
        "number": a["number"],
        "outcome": a["outcome"],
        "score": a["score"],
        "pass": a["pass"],
        "reasons": a["reasons"],
        "next_hint": a["next_hint"],
        "error": a["error"],
        "workspace_changed": a["workspace_changed"],
        "finished_at": _when(a["finished_at"]),
    }


def _passing(finished: list[dict[str, Any]], stage: str) -> dict[str, Any] | None:
    passed = [a for a in finished if a["stage"] == stage and a["outcome"] == "passed"]
    if not passed:
        return None
    last = passed[-1]
    return {
        "attempt": last["number"],
        "run": last["run"],
        "score": last["score"],
        "reasons": last["reasons"],
        "next_hint": last["next_hint"],
    }


def _notes(conn: Connection, task_id: int) -> list[dict[str, Any]]:
    return [
        {
            "event": row["event"],
            "from": row["from_state"],
            "to": row["to_state"],
            "by": row["actor"],
            "note": row["note"],
            "at": _when(row["at"]),
        }
        for row in repo.transitions_of(conn, task_id)
        if row["note"] and row["event"] in _NOTE_EVENTS
    ]


def _guards(stage: StageConfig, history: RunHistory) -> dict[str, Any]:
    return {
        "halt_after_no_change": stage.halt_after_no_change,
        "no_change_streak": history.no_change_streak,
        "backoff_streak": history.backoff_streak,
        "strict_verdict": stage.strict_verdict,
    }


def _prev_session(conn: Connection, task_id: int, stage: str, number: int) -> str | None:
    """The last session id recorded by an earlier attempt at the stage, where
    the schema records one (`attempts.session_id`); None otherwise. Not just
    the attempt before: one that recorded none (a backoff, a crash) would
    otherwise cut the agent off from the session it could resume."""
    column = tables.attempts.c.get("session_id")
    if column is None or number <= 1:
        return None
    attempts = tables.attempts
    value = conn.execute(
        select(column)
        .where(
            attempts.c.task_id == task_id,
            attempts.c.stage == stage,
            attempts.c.number < number,
            column.is_not(None),
        )
        .order_by(attempts.c.number.desc())
        .limit(1)
    ).scalar()
    return None if value is None else str(value)
