"""A task's workspace: made on first use by the pipeline's `setup`, which
counts as done only once it exited 0; what an unfinished setup left behind
is removed and set up again."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from orchestrator import runner
from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome
from orchestrator.ext.model import AttemptRun, Claim
from orchestrator.tick import branches
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.commands import CommandRunner
from orchestrator.tick.fence import FenceGuard
from orchestrator.tick.steps import failure, setup_state, stopped_run, write_setup_state
from orchestrator.tick.transactions import Transactions


class WorkspacePreparer:
    """A task's workspace is made once, by setup, and kept for every stage.

    Touches the workspace under `workspace_root` and the task's `setup.json`
    marker beside its state folders; setup runs as a command. For a pipeline
    with a `repository`, the task's worktree and its base commit on the task
    row (`tick.branches.prepare`)."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        commands: CommandRunner,
        *,
        before_workspace: Callable[[Claim], None] = lambda claim: None,
        around_workspace: Callable[
            [Claim, Callable[[], AttemptRun | None]], AttemptRun | None
        ] = lambda claim, make: make(),
    ) -> None:
        self.settings = settings
        self.tx = tx  # for a task's worktree (`tick.branches`)
        self.commands = commands
        # The features' `before_workspace` hooks (`Registry`), in order.
        self.before_workspace = before_workspace
        self.around_workspace = around_workspace  # the features' (`Registry`), nested

    def prepare(
        self, claim: Claim, context: AttemptContext, state_dir: Path, guard: FenceGuard, tag: str
    ) -> AttemptRun | None:
        """Make the task's workspace on first use (running the pipeline's
        `setup` there); None when it is ready, else the attempt's result.

        Setup runs like a worker: stopped by a signal, a halt or a lost lease,
        its identity noted for recovery. It counts as done only once it
        exited 0 (`setup.json` beside the task's state folders says so); a
        workspace left by a setup that failed or was stopped is removed and
        set up again, rather than taken as ready.
        """
        workspace = context.workspace
        if claim.pipeline.repository is not None:
            return self._worktree(claim, context, state_dir, guard, tag)
        try:
            mode = os.lstat(workspace).st_mode
        except FileNotFoundError:
            mode = None
        # The slug has no separator and no `..`, so only a link can lead
        # out of the root; links are refused, wherever they point.
        if mode is not None and stat.S_ISLNK(mode):
            return AttemptRun(
                Outcome.WORKER_ERROR,
                error=f"workspace {workspace} is a link; refusing to follow it",
            )
        setup = claim.pipeline.setup
        marker = state_dir.parent / "setup.json"
        if mode is not None and (setup is None or setup_state(marker) != "started"):
            return None  # ready (or made by hand before the task was added)
        self.settings.workspace_root.mkdir(parents=True, exist_ok=True)
        if setup is None:
            workspace.mkdir()
            return None
        if mode is not None:  # what an unfinished setup left behind
            if stat.S_ISDIR(mode):
                shutil.rmtree(workspace)
            else:
                workspace.unlink()
        write_setup_state(marker, "started", claim.number)
        root = self.settings.workspace_root
        result = self._run_setup(setup, context, root, state_dir, guard, tag)
        stopped = stopped_run(result, guard, "setup")
        if stopped is not None:
            return stopped
        if not result.ok:
            return AttemptRun(Outcome.WORKER_ERROR, error=failure("setup", result))
        # What setup left at the workspace's path is the task's doing, not
        # the host's: anything but a folder (or nothing) fails the attempt.
        try:
            mode = os.lstat(workspace).st_mode
        except FileNotFoundError:
            workspace.mkdir()
        else:
            if not stat.S_ISDIR(mode):
                kind = "a link" if stat.S_ISLNK(mode) else "not a folder"
                return AttemptRun(
                    Outcome.WORKER_ERROR,
                    error=f"setup left {workspace} {kind}; refusing to work there",
                )
        write_setup_state(marker, "done", claim.number)
        return None

    def _worktree(
        self, claim: Claim, context: AttemptContext, state_dir: Path, guard: FenceGuard, tag: str
    ) -> AttemptRun | None:
        """A task is a branch: the worktree first (`tick.branches`), then the
        pipeline's `setup`, if any, once, inside it."""
        self.settings.workspace_root.mkdir(parents=True, exist_ok=True)
        # A feature may make a workspace of its own around the task's (a
        # candidate's worktree), or settle the branch first.
        return self.around_workspace(
            claim, lambda: self._task_worktree(claim, context, state_dir, guard, tag)
        )

    def _task_worktree(
        self, claim: Claim, context: AttemptContext, state_dir: Path, guard: FenceGuard, tag: str
    ) -> AttemptRun | None:
        workspace = self.settings.workspace_root / claim.task.slug
        self.before_workspace(claim)  # e.g. a land check a killed tick left
        made = branches.prepare(self.tx.engine, self.tx.retrying, claim, workspace)
        if made is not None:
            return made
        setup = claim.pipeline.setup
        marker = state_dir.parent / "setup.json"
        if setup is not None and setup_state(marker) != "done":
            write_setup_state(marker, "started", claim.number)
            result = self._run_setup(setup, context, workspace, state_dir, guard, tag)
            stopped = stopped_run(result, guard, "setup")
            if stopped is not None:
                return stopped
            if not result.ok:
                return AttemptRun(Outcome.WORKER_ERROR, error=failure("setup", result))
            write_setup_state(marker, "done", claim.number)
        return None

    def _run_setup(
        self,
        setup: tuple[str, ...],
        context: AttemptContext,
        cwd: Path,
        state_dir: Path,
        guard: FenceGuard,
        tag: str,
    ) -> runner.ProcessResult:
        env = runner.child_environment(
            os.environ,
            deny=self.settings.child_deny,
            extra=self.settings.shared_env(os.environ),  # `[orchestrator] env`, no secret
            orchestrator_vars={**context.setup_environment(), runner.PROCESS_TAG: tag},
        )
        return self.commands.run("setup", setup, context.for_setup(), cwd, env, state_dir, guard)
