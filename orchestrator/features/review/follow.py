"""The review loop in a tick: a held task's pull request read (at most every
`poll_seconds`, conditionally), and what it says recorded in one short
transaction each: merged (`landed`, `complete`, the merge commit; its
worktree and branch removed first), closed (`give_up`, `pr_closed`), a
person's feedback or a failing check (`send_back` with it as the hint, or
past `max_feedback_rounds`, `give_up` `feedback_rounds`). The comments a
pushed fix answered are replied to, naming its commit.

Crash-safe by order: every GitHub read comes before the transaction that
records it, and the ETag is stored only in it, so a tick killed anywhere
reads the same answer again. A fix is pushed by the landing, whose record
(`hold_finished`) marks the round's comments answered in the same
transaction; the replies follow, each marked once posted: a tick killed
between the push and the replies leaves them to the next tick, and the
landing pushes nothing twice."""

from __future__ import annotations

import functools
import os
from datetime import timedelta

from sqlalchemy import Connection

from orchestrator import runner
from orchestrator.config import PipelineConfig
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.event_kinds import LANDED
from orchestrator.domain.pipeline import COMPLETE, Event, State, Status
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import ACTOR, TickOptions
from orchestrator.ext.ports import Kernel
from orchestrator.features.review import reading, store
from orchestrator.features.review.config import REVIEW_SECTION, ReviewConfig
from orchestrator.features.review.github import Answer, GhFault, GitHubApi
from orchestrator.features.review.store import Feedback, Pull
from orchestrator.features.review.tables import ensure
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.repo import outbox
from orchestrator.workspace.gitrun import GIT_TIMEOUT, SafeGit
from orchestrator.workspace.worktree import Worktree


class Follower:
    """Follows the held tasks' pull requests. Touches `review_pulls`,
    `review_feedback`, and through `repo.apply_transition` and the outbox
    `tasks`, `transitions`, `events`; the task's worktree and branch once
    merged."""

    def __init__(self, kernel: Kernel) -> None:
        self.settings = kernel.settings
        self.tx = kernel.tx
        self.tick = kernel.tick
        self.own: str | None = None  # the account gh speaks as, asked once

    def run(self, options: TickOptions) -> None:
        if self.tick.stop.is_set() or self.tick.db_down.is_set():
            return
        self.reply_all()
        with read_tx(self.tx.engine) as conn:
            held = repo.tasks_with_status(conn, Status.HELD)
        for task in held:
            if self.tick.stop.is_set():
                return
            if options.task is None or task.slug == options.task:
                self.poll(task)

    # Holding.

    def hold(
        self, conn: Connection, task: repo.TaskSnapshot, commit: str | None, url: str | None
    ) -> str | None:
        pipeline = self.settings.pipeline(task.pipeline)
        if pipeline is None or url is None or not REVIEW_SECTION.of(pipeline).follow:
            return None
        found = reading.pull_of_url(url)
        if found is None:
            return None
        store.follow(conn, task.id, url, found[0], found[1], commit)
        return f"pull request {url} followed"

    # Reading.

    def poll(self, task: repo.TaskSnapshot) -> None:
        pipeline = self.settings.pipeline(task.pipeline)
        if pipeline is None or not REVIEW_SECTION.of(pipeline).follow:
            return None
        config = REVIEW_SECTION.of(pipeline)
        with read_tx(self.tx.engine) as conn:
            pull = store.pull_of(conn, task.id)
            now = db_now(conn)
        if pull is None:
            return None
        if pull.polled_at is not None and now - pull.polled_at < timedelta(
            seconds=config.poll_seconds
        ):
            return None
        api = GitHubApi(pull.repo, self._env(task, pipeline), pipeline.landing.timeout)
        got = api.get(f"pulls/{pull.number}", pull.etag)
        if isinstance(got, GhFault):
            return self._fault(task, got.reason)
        if got.status == 304:
            if not (pull.checks_pending and pull.head_sha):
                return self._write(task, pull, pipeline, config, [], {})
            runs = api.get(f"commits/{pull.head_sha}/check-runs", pull.checks_etag)
            if isinstance(runs, GhFault):
                return self._fault(task, runs.reason)
            return self._checks(task, pull, pipeline, config, pull.head_sha, runs, {})
        body = got.body if got.status == 200 and isinstance(got.body, dict) else None
        if body is None:
            return self._fault(task, f"GitHub answered {got.status} for {pull.url}")
        if body.get("merged"):
            return self._merged(task, pull, pipeline, body.get("merge_commit_sha"))
        if body.get("state") == "closed":
            issue = api.get(f"issues/{pull.number}")
            closer = issue.body.get("closed_by") if isinstance(issue, Answer) else None
            who = closer.get("login") if isinstance(closer, dict) else None
            return self._closed(task, pull, str(who or "someone"))
        head = body.get("head")
        sha = str(head.get("sha") or "") if isinstance(head, dict) else ""
        lists = [api.get(f"{path}?per_page=100") for path in _FEEDBACK_PATHS(pull.number)]
        runs = api.get(f"commits/{sha}/check-runs") if sha else Answer(200, None, {})
        faults = [a for a in (*lists, runs) if isinstance(a, GhFault)]
        if faults:
            return self._fault(task, faults[0].reason)
        own = self._own(api)
        reviews, inline, conversation = (a.body if isinstance(a, Answer) else [] for a in lists)
        items = reading.feedback(reviews, inline, conversation, own, config.from_bots)
        assert isinstance(runs, Answer)
        tags: dict[str, object] = {"etag": got.etag}
        self._checks(task, pull, pipeline, config, sha, runs, tags, items)
        return None

    def _checks(
        self,
        task: repo.TaskSnapshot,
        pull: Pull,
        pipeline: PipelineConfig,
        config: ReviewConfig,
        sha: str,
        runs: Answer,
        tags: dict[str, object],
        items: list[Feedback] | None = None,
    ) -> None:
        values = dict(tags)
        failed: list[Feedback] = []
        if runs.status != 304:
            failed, pending = reading.check_runs(runs.body, sha)
            values.update(checks_etag=runs.etag, checks_pending=pending, head_sha=sha)
        self._write(task, pull, pipeline, config, [*(items or []), *failed], values)

    def _own(self, api: GitHubApi) -> str | None:
        if self.own is None:
            answer = api.user()
            if isinstance(answer, Answer) and isinstance(answer.body, dict):
                self.own = str(answer.body.get("login") or "") or None
        return self.own

    def _env(self, task: repo.TaskSnapshot, pipeline: PipelineConfig) -> dict[str, str]:
        """As the landing's `gh` gets it: the tick's environment less what
        `child_deny` names, `[orchestrator] env`, the `land_secrets`."""
        sources = self.settings.secret_sources(os.environ)
        secrets = pipeline.landing.secrets
        return runner.child_environment(
            os.environ,
            deny=self.settings.child_deny,
            extra={
                **self.settings.shared_env(os.environ),
                **{name: sources[name] for name in secrets if name in sources},
            },
            orchestrator_vars={"ORCHESTRATOR_TASK": task.slug},
        )

    # Recording.

    def _write(
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

    def _fault(self, task: repo.TaskSnapshot, reason: str) -> None:
        """The host's: noted for `explain`, warned, the task not charged."""
        self.tick.warn(f"{task.slug}: following its pull request: {reason}")

        def note(_again: bool) -> None:
            with self.tx.write() as conn:
                store.note_poll(conn, task.id, db_now(conn), fault=reason)

        self.tx.retrying(note)

    def _merged(
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

    def _closed(self, task: repo.TaskSnapshot, pull: Pull, who: str) -> None:
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

    def reply_all(self) -> None:
        with read_tx(self.tx.engine) as conn:
            replies = store.unreplied(conn)
            tasks = {r.task_id: repo.get_task_by_id(conn, r.task_id) for r in replies}
        for reply in replies:
            task = tasks.get(reply.task_id)
            pipeline = None if task is None else self.settings.pipeline(task.pipeline)
            if task is None or pipeline is None:
                continue
            api = GitHubApi(reply.repo, self._env(task, pipeline), pipeline.landing.timeout)
            short = reply.commit[:12]
            if reply.kind == "inline":
                path = f"pulls/{reply.number}/comments/{reply.key.split(':')[1]}/replies"
                posted = api.post(path, f"Addressed in {short}.")
            else:
                text = f"@{reply.author}: addressed in {short}" + (
                    f" ({reply.url})." if reply.url else "."
                )
                posted = api.post(f"issues/{reply.number}/comments", text)
            if isinstance(posted, GhFault) or posted.status >= 300:
                reason = posted.reason if isinstance(posted, GhFault) else str(posted.status)
                self.tick.warn(f"{task.slug}: replying on its pull request: {reason}")
                return

            def mark(_again: bool, feedback_id: int = reply.id) -> None:
                with self.tx.write() as conn:
                    store.mark_replied(conn, feedback_id, db_now(conn))

            self.tx.retrying(mark)


def _FEEDBACK_PATHS(number: int) -> tuple[str, str, str]:
    return (f"pulls/{number}/reviews", f"pulls/{number}/comments", f"issues/{number}/comments")


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


def tick_hooks(kernel: Kernel) -> TickHooks:
    """Before the claims and after them, the held tasks are read (what the
    landing held after the claims is read at once: its first poll); the
    landing's record asks `hold_finished`."""
    ensure(kernel.tx.engine)
    follower = Follower(kernel)
    return TickHooks(
        before_claims=follower.run,
        after_claims=follower.run,
        hold_finished=follower.hold,
    )
