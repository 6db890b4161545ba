"""Where a stage begins: the workspace's commit as an attempt's worker starts.

Recorded on the attempt (`attempts.start_commit`) so the gate can diff the
stage's work against it (`orchestrator.workspace.git`); commit dates are
the worker's to choose and cannot say where the stage began.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from orchestrator.storage import repo
from orchestrator.storage.db import write_tx
from orchestrator.workspace.gitrun import SafeGit
from orchestrator.workspace.listing import own_git_dir


def head_commit(workspace: Path) -> str:
    """HEAD's sha in a repository of the workspace's own; "" without one
    (no repository, no commit yet, or git could not tell): the gate then
    takes every file for the stage's."""
    if not own_git_dir(workspace):
        return ""
    found = SafeGit(workspace).out("rev-parse", "--verify", "-q", "HEAD^{commit}")
    sha = (found or b"").decode("ascii", "replace").strip()
    return sha if sha and all(c in "0123456789abcdef" for c in sha) else ""


def note_start(engine: Engine, attempt_id: int, token: str, workspace: Path) -> None:
    """Record the workspace's commit on the attempt, before its worker runs."""
    commit = head_commit(workspace)
    with write_tx(engine) as conn:
        repo.record_start_commit(conn, attempt_id, token, commit)
