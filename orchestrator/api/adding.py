"""Adding tasks: checking each spec, its branch and its waits, and writing
them all in one transaction.

Kept apart from the state changes of `actions` (approve, reject, ...): adding
validates new input and reaches the task's repository, the other commands
move an existing task through the state machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from orchestrator.config import PipelineConfig, Settings
from orchestrator.domain.slug import slug_problem, validate_slug
from orchestrator.domain.text import clean_text
from orchestrator.errors import ConfigError, RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx, write_tx
from orchestrator.storage.repo.wake import notify_wake
from orchestrator.workspace import worktree
from orchestrator.workspace.gitrun import GitError

MAX_TITLE_BYTES = 1024
MAX_BODY_BYTES = 1_048_576


@dataclass(frozen=True)
class TaskSpec:
    slug: str
    title: str
    pipeline: str = "default"
    priority: int = 0
    body: str = ""
    max_cost_usd: float | None = None  # the task's own budget (`add --budget`)
    after: tuple[str, ...] = ()  # tasks it waits on (`add --after`)
    parent: str | None = None  # the task whose agent added it (`orchestrator mcp`)


# Told of the new tasks (slug -> pipeline) inside the transaction adding
# them, at the database's now: the features' `Feature.added`, which the
# caller hands in (`compose.tasks_added`); this module cannot import the
# composition root, which the tick's door to agents reaches it from.
Added = Callable[[Connection, Settings, Mapping[str, str], datetime], None]


def add_tasks(
    engine: Engine,
    settings: Settings,
    specs: Sequence[TaskSpec],
    actor: str,
    added: Added | None = None,
) -> int:
    """Create tasks in one transaction: all of them, or none (exit 1 says why)."""
    new: list[repo.NewTask] = []
    seen: set[str] = set()
    given, specs = specs, []
    for spec in given:
        validate_slug(spec.slug)
        if spec.slug in seen:
            raise RefusedError(f"slug {spec.slug!r} appears twice in the input")
        seen.add(spec.slug)
        if not isinstance(spec.title, str) or not isinstance(spec.body, str):
            raise RefusedError(f"task {spec.slug!r}: title and body must be strings")
        title = clean_text(spec.title, MAX_TITLE_BYTES).strip()
        if not title:
            raise RefusedError(f"task {spec.slug!r} needs a non-empty title")
        if not isinstance(spec.after, tuple) or not all(isinstance(o, str) for o in spec.after):
            raise RefusedError(f"task {spec.slug!r}: after must be a list of task slugs")
        # A repeat is the same wait (the library and MCP pass `after` as
        # given): one row, not a primary-key clash read as a lost race.
        specs.append(replace(spec, after=tuple(dict.fromkeys(spec.after))))
        if isinstance(spec.priority, bool) or not isinstance(spec.priority, int):
            raise RefusedError(f"task {spec.slug!r}: priority must be an integer")
        if abs(spec.priority) > 2**31 - 1:
            raise RefusedError(f"task {spec.slug!r}: priority out of range")
        # A non-string name (JSON lines) is unknown, not an unhashable-key crash.
        pipeline = settings.pipeline(spec.pipeline) if isinstance(spec.pipeline, str) else None
        if pipeline is None:
            known = ", ".join(sorted(settings.pipelines)) or "none configured"
            raise RefusedError(f"unknown pipeline {spec.pipeline!r} (known: {known})")
        new.append(
            repo.NewTask(
                slug=spec.slug,
                title=title,
                pipeline=spec.pipeline,
                first_stage=pipeline.first_stage(),
                priority=spec.priority,
                body=clean_text(spec.body, MAX_BODY_BYTES),
                max_cost_usd=spec.max_cost_usd,
                **task_branch(pipeline, spec.slug),
            )
        )
    try:
        with write_tx(engine) as conn:
            taken = repo.existing_slugs(conn, [t.slug for t in new])
            if taken:
                raise RefusedError(f"task {sorted(taken)[0]!r} already exists")
            check_links(conn, specs)
            now = db_now(conn)
            repo.insert_tasks(conn, new, now, actor)
            if added is not None:
                added(conn, settings, {t.slug: t.pipeline for t in new}, now)
            repo.link_tasks(conn, [(s.slug, s.parent, s.after) for s in specs])
            notify_wake(conn)  # new work: `run` takes it now, not at its interval
    except IntegrityError as exc:
        # PostgreSQL does not serialise two `add`s of one slug: the loser of
        # the race meets the unique slug here, after the check above passed.
        which = f"task {new[0].slug!r}" if len(new) == 1 else "one of these tasks"
        raise RefusedError(f"{which} already exists (added meanwhile)") from exc
    return len(new)


def check_links(conn: Connection, specs: Sequence[TaskSpec]) -> None:
    """Refuse (65) a wait on a task that is not there or in this input, or a
    cycle; refuse (1) a parent that is not there."""
    from orchestrator.domain.waits import check_waits

    named = {o for s in specs for o in s.after} | {s.parent for s in specs if s.parent}
    existing = repo.existing_slugs(conn, sorted(named))
    check_waits({s.slug: s.after for s in specs}, existing)
    for spec in specs:
        if spec.parent is not None and spec.parent not in existing:
            raise RefusedError(f"task {spec.slug!r}: parent {spec.parent!r} does not exist")


def task_branch(pipeline: PipelineConfig, slug: str) -> dict[str, str]:
    """A task of a pipeline with `repository` is the branch `task/<slug>`
    from `base` (else the branch checked out there now), recorded at `add`
    so that a later checkout in the repository cannot change it."""
    if pipeline.repository is None:
        return {}
    problem = worktree.branch_problem(slug)
    if problem is not None:
        raise RefusedError(f"invalid slug {slug!r} for pipeline {pipeline.name!r}: {problem}")
    try:
        root = worktree.repository_root(pipeline.repository)
        base = pipeline.base or worktree.current_branch(root)
    except GitError as exc:
        raise ConfigError(f"pipeline {pipeline.name!r}: repository: {exc}") from exc
    if worktree.branch_tip(root, base) is None:
        raise ConfigError(
            f"pipeline {pipeline.name!r}: base branch {base!r} does not exist in {root}"
        )
    return {"branch": worktree.branch_name(slug), "base_branch": base}


def refuse_old_state(engine: Engine, settings: Settings, specs: Sequence[TaskSpec]) -> None:
    """A slug used before (a database made afresh) would write its attempts'
    output over the old task's files in `state/<slug>/<stage>-001/`."""
    slugs = [s.slug for s in specs if isinstance(s.slug, str) and slug_problem(s.slug) is None]
    with read_tx(engine) as conn:
        taken = repo.existing_slugs(conn, slugs)  # add_tasks says "already exists"
    for spec in specs:
        if spec.slug not in slugs or spec.slug in taken:
            continue
        old = settings.state_root / spec.slug
        if os.path.lexists(old):  # a dangling link is a leftover too
            raise RefusedError(
                f"{spec.slug}: {_shown(old)} holds the output of an earlier task named "
                f"{spec.slug!r}, which its attempts would overwrite; move it away or "
                "pick another slug"
            )


def _shown(path: Path) -> str:
    """`path` relative to the working folder when under it, as the CLI prints paths."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
