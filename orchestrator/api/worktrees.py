"""Removing the worktrees of finished tasks (`prune --finished`, and
`keep_worktree_days` at each tick). The branch always stays: it is the
change, and `git worktree add` brings the folder back from it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.domain.slug import slug_problem
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.reads.finished import finished_branches
from orchestrator.workspace.attempt_refs import drop_attempt_refs
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import Worktree


@dataclass(frozen=True)
class Removed:
    slug: str
    workspace: Path
    branch: str
    error: str | None = None  # git refused: the worktree is still there


def finished_worktrees(
    engine: Engine, settings: Settings, *, days: float | None = None, dry_run: bool = False
) -> list[Removed]:
    """Remove the worktrees of tasks complete or cancelled at least `days`
    ago (None: each pipeline's `keep_worktree_days`; a pipeline without it
    keeps its worktrees). Tasks with an attempt open are left alone."""
    wanted: dict[str, float] = {}
    for name, pipeline in settings.pipelines.items():
        keep = days if days is not None else pipeline.keep_worktree_days
        if pipeline.repository is not None and keep is not None:
            wanted[name] = keep
    if not wanted:
        return []
    with read_tx(engine) as conn:
        now = db_now(conn)
        rows = finished_branches(conn, wanted)
    removed: list[Removed] = []
    for row in rows:
        slug, name, branch = row.slug, row.pipeline, row.branch
        if slug_problem(slug) is not None or row.updated_at > now - timedelta(days=wanted[name]):
            continue
        workspace = settings.workspace_root / slug
        if not workspace.exists() and not workspace.is_symlink():
            continue  # removed before: the cheap answer for most finished tasks
        repository = settings.pipelines[name].repository
        assert repository is not None
        tree = Worktree(repository, workspace, branch, row.base_commit or "")
        try:
            if dry_run:
                if tree.exists():
                    removed.append(Removed(slug, workspace, branch))
            elif tree.remove():
                # The attempts' kept refs (best of N's candidates) go with it.
                drop_attempt_refs(repository, slug)
                removed.append(Removed(slug, workspace, branch))
        except GitError as exc:
            removed.append(Removed(slug, workspace, branch, error=str(exc)))
    return removed
