"""What a stage changed in a task's workspace, for the reviewer at its gate.

A repository of the workspace's own answers with its diff against the
commit the stage began from plus the files the stage created
(`orchestrator.workspace.git`); any other folder, or a repository git
cannot read, with the files modified since the stage began
(`orchestrator.workspace.listing`). The approval hash
(`orchestrator.views.gate`) covers every changed file by digest, or by its
metadata (`safefs.stand_in`) past `HASH_BYTES` or once the look has read
`LOOK_BYTES` in all: a thousand files just under the per-file cap cost one
look no more than a few.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.git import git_changes
from orchestrator.workspace.listing import (
    LOOK_BYTES,
    StageStart,
    WorkspaceChanges,
    files_changes,
    own_git_dir,
)


def collect(
    workspace: Path, start: StageStart, budget: safefs.Budget | None = None
) -> WorkspaceChanges:
    """The stage's changes; `budget` is what the look may read (a fresh
    `LOOK_BYTES` one by default), shared with the capture tails."""
    budget = safefs.Budget(LOOK_BYTES) if budget is None else budget
    if not workspace.is_dir() or workspace.is_symlink():
        return WorkspaceChanges(kind="none", digest_parts=["none"], budget=budget)
    if own_git_dir(workspace):
        changes = git_changes(workspace, start, budget)
        if changes is not None:
            return changes
    # A stage that began in a repository whose history is gone now: its
    # files' times are the worker's to set, so every file is listed.
    since = None if start.commit else start.since
    return files_changes(workspace, since, budget)
