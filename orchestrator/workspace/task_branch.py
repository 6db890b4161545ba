"""A task's branch as the steps that write it name it: its worktree, the
author of the commits the orchestrator makes there, and the sealed key
that marks a stage's commit as one attempt's. Shared by the tick's own git
steps and by the features that rewrite the branch (`restore`), so neither
imports the other."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from orchestrator.config import PipelineConfig
from orchestrator.storage import repo
from orchestrator.workspace.worktree import Identity, Worktree


def task_worktree(
    pipeline: PipelineConfig, task: repo.TaskSnapshot, workspace: Path, base_commit: str
) -> Worktree:
    assert pipeline.repository is not None and task.branch is not None
    return Worktree(pipeline.repository, workspace, task.branch, base_commit)


def author(pipeline: PipelineConfig) -> Identity:
    identity = Identity.parse(pipeline.commit_author)
    assert identity is not None  # the config refuses any other
    return identity


def sealed_key(slug: str, stage: str, attempt_id: int, token: str) -> str:
    """Names one attempt for ever (the attempt row's id is never reused),
    with a seal made from its lease token, which no worker sees: a worker
    that writes the trailer into a commit of its own cannot pass that
    commit off as the stage's and keep the rest of its work out of it."""
    seal = hmac.new(token.encode(), b"stage-commit", hashlib.sha256).hexdigest()[:16]
    return f"{slug}/{stage}/{attempt_id}/{seal}"
