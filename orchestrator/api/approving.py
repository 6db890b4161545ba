"""Approving a gate from any door (the CLI, `Project.approve`, the web
page): what moves on is fixed here, at the approval, never at the tick.

For a branch task the look that computes the approval hash also writes the
tree the worktree would commit (`views/branch.py`). When that tree and the
commit under it are what a verifier passed (the stage commit), approving
needs no hash, as it always did. When the worktree holds more (an edit made
after the verdict: a reviewer's, an editor's, a process's), nobody judged it,
so the approval must show it was seen: `--expect HASH` from `show`, or the
web form's hash. Then that very tree, and nothing written after the look,
becomes the commit that moves on (`workspace/approval.py`), named on the
approve transition. A task that is not a branch keeps the hash as its only
binding (its folder is not a commit to fix).
"""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator.api import actions
from orchestrator.config import Settings
from orchestrator.errors import RefusedError
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.views.gate import GateView, gate_view
from orchestrator.workspace import approval
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import Identity


def approve_gate(
    engine: Engine,
    settings: Settings,
    slug: str,
    actor: str,
    note: str | None = None,
    expect: str | None = None,
) -> actions.ActionResult:
    """Approve `slug`'s gate. `expect` (an approval hash; "" from a form
    without one) must match what the gate shows now; None: no hash given."""
    if expect is None:
        with read_tx(engine) as conn:
            task = repo.get_task(conn, slug)
        if task is None or task.branch is None:  # nothing to look at or fix
            return actions.approve(engine, slug, actor, note)
    view = gate_view(engine, settings, slug)
    if not view.waiting:  # "already approved", or why not: approve says
        return actions.approve(engine, slug, actor, note)
    if expect is not None and expect.strip().lower() != view.digest:
        raise RefusedError(
            f"{slug}: changed since you looked (approval hash {expect.strip()} is now "
            f"{view.digest}); review it again"
        )
    commit = _bind(engine, settings, view, seen=expect is not None)
    return actions.approve(engine, slug, actor, note, commit=commit, seen_version=view.task.version)


def _bind(engine: Engine, settings: Settings, view: GateView, *, seen: bool) -> str | None:
    """The commit a branch task's approval moves on (None: not a branch)."""
    task, change = view.task, view.branch
    pipeline = settings.pipeline(task.pipeline)
    if change is None or pipeline is None or pipeline.repository is None:
        return None
    if change.head is None or change.tree is None:
        raise RefusedError(
            f"{task.slug}: cannot read the change to approve "
            f"({change.whole.diff.strip('()')}); approve when it can be read"
        )
    with read_tx(engine) as conn:
        judged = repo.judged_commits(conn, task.id, task.stage, task.run)
    beyond = change.head not in judged or change.tree != change.head_tree
    if beyond and not seen:
        raise RefusedError(
            f"{task.slug}: the worktree holds changes no verifier judged (beyond the "
            f"{task.stage} stage commit); look at them (orchestrator diff {task.slug}, "
            f"orchestrator show {task.slug}), then approve --expect HASH with the "
            "approval hash show prints"
        )
    identity = Identity.parse(pipeline.commit_author)
    assert identity is not None  # the config refuses any other
    message = f"{task.slug}: {task.stage} approved, with the reviewer's changes\n"
    try:
        return approval.pin(
            pipeline.repository, task.slug, change.head, change.tree, message, identity
        )
    except GitError as exc:
        raise RefusedError(f"{task.slug}: cannot keep the approved tree: {exc}") from exc
