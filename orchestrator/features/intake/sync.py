"""Issues become tasks: each tick (at most every `poll_seconds`) the
tracker's open issues with the label are read, conditionally; a new one is
added as task `issue-N` (its body ending `Closes #N`, so the pull request
the landing opens closes it), an edited one not started yet takes the new
text, and one that lost its label (or was closed) before it started is
cancelled. The issue is told when its task starts, opens its pull request
and halts. Idempotent on the issue's number: the task and its row are
written in one transaction."""

from __future__ import annotations

import os

from orchestrator import runner
from orchestrator.config import Settings
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.domain.text import clean_text, one_line
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import ACTOR, TickOptions
from orchestrator.ext.ports import Kernel
from orchestrator.features.intake import store
from orchestrator.features.intake.config import IntakeConfig, intakes
from orchestrator.features.intake.tracker import Fault, GitHubTracker, Issue, Tracker, Unchanged
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.workspace import worktree

BODY_LIMIT = 60000


def slug_of(issue: Issue) -> str:
    return f"issue-{issue.number}"


def body_of(issue: Issue) -> str:
    """The issue's words, then the line that closes it once merged."""
    return clean_text(issue.body.strip(), BODY_LIMIT) + f"\n\nCloses #{issue.number}"


def title_of(issue: Issue) -> str:
    return one_line(issue.title, 200) or f"Issue #{issue.number}"


def tracker_for(settings: Settings, config: IntakeConfig) -> Tracker:
    env = runner.child_environment(
        os.environ,
        deny=settings.child_deny,
        extra=settings.shared_env(os.environ),
        orchestrator_vars={},
    )
    return GitHubTracker(config.repo, env)


class Intake:
    """Writes `intake_issues`, `intake_polls`, and new tasks (`repo.insert_tasks`);
    cancels through `repo.apply_transition`; comments on the tracker."""

    def __init__(self, kernel: Kernel) -> None:
        self.settings = kernel.settings
        self.tx = kernel.tx
        self.tick = kernel.tick

    def sync(self, config: IntakeConfig, key: str, tracker: Tracker) -> None:
        pipeline = self.settings.pipeline(config.pipeline)
        if pipeline is None:
            self.tick.warn(f"intake {key}: no pipeline {config.pipeline!r}")
            return
        with read_tx(self.tx.engine) as conn:
            etag, polled = store.last_poll(conn, key)
            now = db_now(conn)
        if polled is not None and (now - polled).total_seconds() < config.poll_seconds:
            return
        got = tracker.open_issues(config.label, etag)
        if isinstance(got, Fault):
            self.tick.warn(f"intake {key}: {got.reason}")
            return
        base = None
        if pipeline.repository is not None:
            root = worktree.repository_root(pipeline.repository)
            base = pipeline.base or worktree.current_branch(root)

        def write(_again: bool) -> None:
            with self.tx.write() as conn:
                now = db_now(conn)
                if isinstance(got, Unchanged):
                    store.note_poll(conn, key, etag, now)
                    return
                issues, tag = got
                self._apply(conn, key, config, issues, base)
                store.note_poll(conn, key, tag, now)

        self.tx.retrying(write)

    def _apply(self, conn, key, config, issues, base) -> None:  # type: ignore[no-untyped-def]
        known = store.known(conn, key)
        now = db_now(conn)
        open_numbers = {issue.number for issue in issues}
        for issue in issues:
            found = known.get(issue.number)
            if found is not None:
                if not store.started(conn, found.task_id):
                    store.retext(conn, found.task_id, title_of(issue), body_of(issue))
                continue
            slug = slug_of(issue)
            if repo.existing_slugs(conn, [slug]):
                self.tick.warn(f"intake {key}: issue #{issue.number}: task {slug} exists already")
                continue
            self.tx.ensure_tick(conn, now)
            pipeline = self.settings.pipeline(config.pipeline)
            assert pipeline is not None
            branch = (
                {} if base is None else {"branch": worktree.branch_name(slug), "base_branch": base}
            )
            new = repo.NewTask(
                slug=slug,
                title=title_of(issue),
                pipeline=config.pipeline,
                first_stage=pipeline.first_stage(),
                body=body_of(issue),
                **branch,
            )
            repo.insert_tasks(conn, [new], now, f"intake:{key}")
            task = repo.get_task(conn, slug)
            assert task is not None
            store.remember(conn, key, issue.number, task.id)
            self.tx.say_after_commit(f"{slug}: added from issue #{issue.number}")
        for number, found in known.items():
            if number in open_numbers:
                continue
            task = repo.get_task_by_id(conn, found.task_id)
            if task is None or task.status is not Status.READY or store.started(conn, task.id):
                continue
            self.tx.ensure_tick(conn, now)
            repo.apply_transition(
                conn,
                task,
                Event.CANCEL,
                State(task.stage, Status.CANCELLED),
                now=now,
                actor=ACTOR,
                reason=f"issue #{number} lost its label {config.label!r} or was closed "
                "before the task started",
            )
            self.tx.say_after_commit(f"{task.slug}: cancelled (issue #{number} left the intake)")

    def tell(self, key: str, tracker: Tracker) -> None:
        """Comment on each issue whose task started, opened its pull request
        or halted since it was last told; each marked once posted."""
        with read_tx(self.tx.engine) as conn:
            rows = store.known(conn, key)
            news = []
            for number, found in rows.items():
                task = repo.get_task_by_id(conn, found.task_id)
                if task is None:
                    continue
                if not found.said_started and store.started(conn, task.id):
                    news.append((number, "said_started", f"Started as task `{task.slug}`."))
                if not found.said_pr and task.pr_url:
                    news.append((number, "said_pr", f"Pull request opened: {task.pr_url}"))
                if not found.said_halted and task.status is Status.HALTED:
                    news.append(
                        (
                            number,
                            "said_halted",
                            f"Task `{task.slug}` halted ({task.halt_reason}); a person must look.",
                        )
                    )
        for number, what, text in news:
            fault = tracker.comment(number, text)
            if fault is not None:
                self.tick.warn(f"intake {key}: commenting on #{number}: {fault.reason}")
                return

            def mark(_again: bool, number: int = number, what: str = what) -> None:
                with self.tx.write() as conn:
                    store.mark_said(conn, key, number, what)

            self.tx.retrying(mark)


def tick_hooks(kernel: Kernel) -> TickHooks:
    """Before the claims the issues are read (a new task is claimed in the
    same tick); after them the issues are told what happened."""
    store.ensure(kernel.tx.engine)
    intake = Intake(kernel)

    def before(options: TickOptions) -> None:
        if options.task is not None or kernel.tick.stop.is_set():
            return
        for config in intakes(kernel.settings):
            intake.sync(
                config, f"{config.tracker}:{config.repo}", tracker_for(kernel.settings, config)
            )

    def after(options: TickOptions) -> None:
        if options.task is not None or kernel.tick.stop.is_set():
            return
        for config in intakes(kernel.settings):
            intake.tell(f"{config.tracker}:{config.repo}", tracker_for(kernel.settings, config))

    return TickHooks(before_claims=before, after_claims=after)
