"""What a read of a held task's pull request leads to, each in one short
transaction, fenced by the task's version and status (a person's halt or
cancel meanwhile wins): the feedback recorded, and the task sent back,
halted (`feedback_rounds`, `pr_closed`) or completed (merged: its worktree
and branch removed first, the merge commit its landed commit)."""

from __future__ import annotations

import functools

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.event_kinds import LANDED
from orchestrator.domain.pipeline import COMPLETE, Event, State, Status
from orchestrator.ext.model import ACTOR
from orchestrator.ext.ports import Kernel
from orchestrator.features.review import reading, store
from orchestrator.features.review.config import ReviewConfig
from orchestrator.features.review.store import Feedback, Pull
from orchestrator.storage import repo
from orchestrator.storage.db import db_now
from orchestrator.storage.repo import outbox
from orchestrator.workspace.gitrun import GIT_TIMEOUT, SafeGit
from orchestrator.workspace.worktree import Worktree


class Outcomes:
    """Writes `review_pulls`, `review_feedback`, and through
    `repo.apply_transition` and the outbox `tasks`, `transitions`, `events`."""

    def __init__(self, kernel: Kernel) -> None:
        self.settings = kernel.settings
        self.tx = kernel.tx
        self.tick = kernel.tick

    def write(
        self,
        task: repo.TaskSnapshot,
        pull: Pull,
        pipeline: PipelineConfig,
        config: ReviewConfig,
        items: list[Feedback],
        values: dict[str, object],
    ) -> None:
        self.tx.retrying(
            functools.partial(self._record, task, pull, pipeline, config, items, values)
        )

    def _record(
        self,
        task: repo.TaskSnapshot,
        pull: Pull,
        pipeline: PipelineConfig,
        config: ReviewConfig,
        items: list[Feedback],
        values: dict[str, object],
        _again: bool,
    ) -> None:
        with self.tx.write() as conn:
            current = _still_held(conn, task)
            now = db_now(conn)
            store.note_poll(conn, task.id, now, fault=None, **values)
            if current is None:
                return
            known = store.known_keys(conn, task.id)
            new = [item for item in items if item.key not in known]
            back = [item for item in new if reading.sends_back(item)]
            if not back:
                store.record_feedback(conn, task.id, new, 0)
                return
            self.tx.ensure_tick(conn, now)
            rounds = pull.rounds + 1
            store.record_feedback(conn, task.id, new, rounds)
            hint = reading.hint(pull.url, back)
            if rounds > config.max_rounds:
                repo.apply_transition(
                    conn,
                    current,
                    Event.GIVE_UP,
                    State(current.stage, Status.HALTED),
                    now=now,
                    actor=ACTOR,
                    reason=f"feedback came back a {rounds}th time (max_feedback_rounds "
                    f"{config.max_rounds}) on {pull.url}",
                    halt_reason=HaltReason.FEEDBACK_ROUNDS.value,
                    next_hint=hint,
                    hint_source="review",
                )
                self.tick.halted()
                self.tx.say_after_commit(f"{task.slug}: halted (feedback_rounds)")
                return
            store.set_rounds(conn, task.id, rounds)
            to = _feedback_stage(pipeline, config)
            repo.apply_transition(
                conn,
                current,
                Event.SEND_BACK,
                State(to, Status.READY),
                now=now,
                actor=ACTOR,
                reason=f"review feedback round {rounds} on {pull.url} ({len(back)} item(s))",
                next_hint=hint,
                hint_source="review",
                new_run=True,
            )
            self.tx.say_after_commit(f"{task.slug}: review feedback sent it back to {to}")

    def fault(self, task: repo.TaskSnapshot, reason: str) -> None:
        """The host's: noted for `explain`, warned, the task not charged."""
        self.tick.warn(f"{task.slug}: following its pull request: {reason}")

        def note(_again: bool) -> None:
            with self.tx.write() as conn:
                store.note_poll(conn, task.id, db_now(conn), fault=reason)

        self.tx.retrying(note)

    def merged(
        self, task: repo.TaskSnapshot, pull: Pull, pipeline: PipelineConfig, sha: object
    ) -> None:
        branch = task.branch or f"task/{task.slug}"
        if pipeline.repository is not None:
            workspace = self.settings.workspace_root / task.slug
            try:
                Worktree(pipeline.repository, workspace, branch, "").remove()
                git = SafeGit(pipeline.repository, timeout=GIT_TIMEOUT)
                if git.out("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"):
                    git.run("branch", "-D", branch)
            except Exception as exc:
                self.tick.warn(f"{task.slug}: merged; its worktree stays ({exc})")
        commit = sha if isinstance(sha, str) and sha else None

        def record(_again: bool) -> None:
            with self.tx.write() as conn:
                current = _still_held(conn, task)
                if current is None:
                    return
                now = db_now(conn)
                self.tx.ensure_tick(conn, now)
                after = repo.apply_transition(
                    conn,
                    current,
                    Event.LANDED,
                    State(COMPLETE, Status.COMPLETE),
                    now=now,
                    actor=ACTOR,
                    reason=f"pull request {pull.url} merged",
                )
                store.set_landed_commit(conn, task.id, commit)
                facts = {"state": str(after.state), "branch": branch, "commit": commit}
                outbox.record(
                    conn,
                    LANDED,
                    after,
                    now=now,
                    attempt_id=None,
                    stage=current.stage,
                    run=current.run,
                    facts={**facts, "url": pull.url, "mode": "pr", "base_branch": task.base_branch},
                )
                self.tx.say_after_commit(f"{task.slug}: pull request merged -> complete")

        self.tx.retrying(record)

    def closed(self, task: repo.TaskSnapshot, pull: Pull, who: str) -> None:
        def record(_again: bool) -> None:
            with self.tx.write() as conn:
                current = _still_held(conn, task)
                if current is None:
                    return
                now = db_now(conn)
                self.tx.ensure_tick(conn, now)
                repo.apply_transition(
                    conn,
                    current,
                    Event.GIVE_UP,
                    State(current.stage, Status.HALTED),
                    now=now,
                    actor=ACTOR,
                    reason=f"pull request {pull.url} closed without merge by {who}",
                    halt_reason=HaltReason.PR_CLOSED.value,
                )
                self.tick.halted()
                self.tx.say_after_commit(f"{task.slug}: halted (pr_closed by {who})")

        self.tx.retrying(record)

    # Replying.


def _still_held(conn: Connection, task: repo.TaskSnapshot) -> repo.TaskSnapshot | None:
    current = repo.get_task_by_id(conn, task.id)
    if current is None or current.version != task.version or current.status is not Status.HELD:
        return None  # a person halted or cancelled it meanwhile, or a retry's first try won
    return current


def _feedback_stage(pipeline: PipelineConfig, config: ReviewConfig) -> str:
    names = [stage.name for stage in pipeline.stages]
    if config.to in names:
        return str(config.to)
    return pipeline.landing.to or pipeline.first_stage()
