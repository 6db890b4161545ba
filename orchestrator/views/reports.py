"""The read side of list, show, history, scores and sql.

Each returns plain rows (dicts of JSON-ready values) so the CLI only
renders; the queries are `storage/reads/`'s.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, StatementError

from orchestrator.agents.report import attempt_usage
from orchestrator.domain.pipeline import Status, parse_state
from orchestrator.errors import ConfigError, RefusedError, SchemaError
from orchestrator.features.candidates.views import round_facts
from orchestrator.features.versions import store as version_rows
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.storage.driver_errors import translate
from orchestrator.storage.reads.attempts import exit_codes, score_rows, tried_stages
from orchestrator.storage.reads.history import history_rows
from orchestrator.storage.reads.tasks import held_stages
from orchestrator.storage.reads.user_sql import READ_ONLY_DRIVERS, execute_one, read_only
from orchestrator.storage.repo import restores
from orchestrator.views.suggest import did_you_mean, unknown_task


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    return {key: _jsonable(value) for key, value in row.items()}


def list_tasks(
    engine: Engine, state: str | None = None, stages: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Tasks in creation order; `state` filters by state string, stage or status.

    A stage neither in `stages` (the config's) nor held by any task is a
    typo: refused with the closest stage or status, not an empty table."""
    stage: str | None = None
    status: Status | None = None
    statuses = [s.value for s in Status]
    if state is not None:
        if state in statuses and state != "complete":
            status = Status(state)  # a bare status: `ready`, `halted`, … at any stage
        else:
            try:
                parsed = parse_state(state)
            except ValueError as exc:
                _, _, bad = state.partition(":")
                raise RefusedError(f"{exc}{did_you_mean(bad, statuses)}") from None
            stage, status = parsed.stage, parsed.status
    with read_tx(engine) as conn:
        if stage is not None and stage != "complete" and stage not in stages:
            held = held_stages(conn)
            if stage not in held:
                hint = did_you_mean(stage, [*stages, *held, *statuses])
                raise RefusedError(f"no stage or status {stage!r}{hint}")
        rows = repo.list_rows(conn, stage=stage, status=status)
    out = []
    for row in rows:
        out.append(
            {
                "slug": row["slug"],
                "title": row["title"],
                "pipeline": row["pipeline"],
                "priority": row["priority"],
                "state": row["state"],
                "stage": row["stage"],
                "status": row["status"],
                "attempt": row["attempt"],
                "score": row["score"],
                "cost_usd": row["cost_usd"],
                "budget": row["max_cost_usd"],
                "halt_reason": row["halt_reason"],
                "updated_at": _jsonable(row["updated_at"]),
            }
        )
    return out


def show_task(engine: Engine, slug: str, state_root: Path | None = None) -> dict[str, Any]:
    """One task with its transitions and attempts; `state_root` adds each
    attempt's folder, where the real cause of a failure usually sits."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        rows = repo.list_rows(conn, slug=slug)  # this task's row, not its stage's
        transitions = repo.transitions_of(conn, task.id)
        attempts = repo.attempts_of(conn, task.id)
        exits = exit_codes(conn, task.id)
        usage = attempt_usage(conn, task.id)
        waits = repo.waits_of(conn, [task.id]).get(task.id, [])
        parent, subtasks = repo.family(conn, task.id)
        marks = restores.task_marks(conn, task.id)
        in_rounds = round_facts(conn, task.id)
        version, ran = version_rows.of_task(conn, task.id)
    summary = next((r for r in rows if r["slug"] == slug), None)
    return {
        "slug": task.slug,
        "title": task.title,
        "body": task.body,
        "pipeline": task.pipeline,
        # The version it was added on; each attempt's, the one it ran.
        "pipeline_version": version,
        "priority": task.priority,
        "state": str(task.state),
        "stage": task.stage,
        "status": task.status.value,
        "attempt": summary["attempt"] if summary else 0,
        "score": summary["score"] if summary else None,
        "cost_usd": summary["cost_usd"] if summary else None,
        "budget": task.max_cost_usd,
        "halt_reason": task.halt_reason,
        "next_hint": task.next_hint,
        "host": task.host,
        "created_at": _jsonable(task.created_at),
        "updated_at": _jsonable(task.updated_at),
        # `add --after` and `add_subtask`: what it waits on, and its family.
        "after": [{"slug": w.slug, "state": w.state} for w in waits],
        "parent": parent,
        "subtasks": subtasks,
        "transitions": [_clean(t) for t in transitions],
        "attempts": [
            {
                "stage": a.stage,
                "number": a.number,
                "run": a.run,
                "outcome": a.outcome,
                "pass": a.passed,
                "score": a.score,
                "reasons": list(a.reasons),
                "next_hint": a.next_hint,
                "hint": a.hint,
                "error": a.error,
                "worker_exit": exits.get(a.id, (None, None))[0],
                "verifier_exit": exits.get(a.id, (None, None))[1],
                **usage.get(a.id, {}),
                "started_at": _jsonable(a.started_at),
                "finished_at": _jsonable(a.finished_at),
                "state_dir": None if state_root is None else str(attempt_dir(state_root, slug, a)),
                # The best score of its stage's run; the one whose work was put back last.
                "best": a.id in marks.best,
                "restored": a.id in marks.restored,
                "restored_at": _jsonable(marks.restored_at.get(a.id)),
                **in_rounds.get(a.id, {}),
                "pipeline_version": ran.get(a.id),
            }
            for a in attempts
        ],
    }


def attempt_dir(state_root: Path, slug: str, attempt: repo.AttemptSnapshot) -> Path:
    """Where the attempt's captured output and prompt are (the engine's layout)."""
    return state_root / slug / f"{attempt.stage}-{attempt.number:03d}"


def history(
    engine: Engine, slug: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Transitions, oldest first (all tasks, or one); `limit` keeps the
    newest rows, like `tail`: a history is read for what happened last."""
    with read_tx(engine) as conn:
        task_id = None
        if slug is not None:
            task = repo.get_task(conn, slug)
            if task is None:
                raise unknown_task(conn, slug)
            task_id = task.id
        rows = [_clean(row) for row in history_rows(conn, task_id, limit)]
    return rows[::-1] if limit is not None else rows


def scores(
    engine: Engine, slug: str, stage: str | None = None, stages: Collection[str] = ()
) -> list[dict[str, Any]]:
    """A task's scores; a `stage` neither in `stages` (its pipeline's) nor
    in its attempts is a typo, refused with the closest name."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        if stage is not None and stage not in stages:
            tried = tried_stages(conn, task.id)
            if stage not in tried:
                hint = did_you_mean(stage, [*stages, *tried])
                raise RefusedError(f"task {slug!r} has no stage {stage!r}{hint}")
        return [_clean(row) for row in score_rows(conn, task.id, stage)]


def run_sql(engine: Engine, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run a read-only query. Writes fail: SQLite's `query_only`, PostgreSQL's
    READ ONLY transaction — the database refuses, not a regex of ours.

    Only drivers we can hold to one statement are allowed: with any other
    PostgreSQL driver, `COMMIT; DELETE …` would end READ ONLY and write."""
    dialect = engine.dialect
    if (dialect.name, dialect.driver) not in READ_ONLY_DRIVERS:
        raise ConfigError(
            f"sql refuses the {dialect.name}+{dialect.driver} driver: it cannot be held "
            "read-only; use a postgresql+psycopg:// URL (pip install 'orchestrator[pg]')"
        )
    with read_tx(engine) as conn, read_only(conn):
        try:
            columns, rows = execute_one(conn, query)
            return columns, [tuple(_jsonable(v) for v in row) for row in rows]
        except (DBAPIError, StatementError) as exc:
            orig = getattr(exc, "orig", exc)
            message = str(orig).strip().splitlines()[0] if str(orig).strip() else repr(orig)
            if "readonly" in message or "read-only" in message:
                raise RefusedError(f"sql is read-only: {message}") from exc
            mapped = translate(exc)
            if mapped is not None and not isinstance(mapped, SchemaError):
                raise mapped from exc  # busy, unreadable, permission: not the query's fault
            raise RefusedError(f"query failed: {message}") from exc
