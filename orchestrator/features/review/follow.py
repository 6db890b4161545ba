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

import json
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig
from orchestrator.domain.pipeline import Status
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Claim, TickOptions
from orchestrator.ext.ports import Kernel
from orchestrator.features.review import reading, store
from orchestrator.features.review.config import REVIEW_SECTION, ReviewConfig
from orchestrator.features.review.github import Answer, GhFault, GitHubApi, task_env
from orchestrator.features.review.outcomes import Outcomes
from orchestrator.features.review.replies import reply_all
from orchestrator.features.review.store import Feedback, Pull
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx


class Follower:
    """Follows the held tasks' pull requests. Touches `review_pulls`,
    `review_feedback`, and through `repo.apply_transition` and the outbox
    `tasks`, `transitions`, `events`; the task's worktree and branch once
    merged."""

    def __init__(self, kernel: Kernel) -> None:
        self.settings = kernel.settings
        self.tx = kernel.tx
        self.tick = kernel.tick
        self.kernel = kernel
        self.outcomes = Outcomes(kernel)
        self.own: str | None = None  # the account gh speaks as, asked once

    def run(self, options: TickOptions) -> None:
        if self.tick.stop.is_set() or self.tick.db_down.is_set():
            return
        reply_all(self.kernel)
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

    def feedback(self, claim: Claim, folder: Path) -> tuple[str, Path] | None:
        """The open round's comments for the attempt answering them: as
        text (`{feedback}`) and as `feedback.json` (`ORCHESTRATOR_FEEDBACK`)."""
        if not REVIEW_SECTION.of(claim.pipeline).follow:
            return None
        with read_tx(self.tx.engine) as conn:
            pull = store.pull_of(conn, claim.task.id)
            items = [] if pull is None else store.open_feedback(conn, claim.task.id)
        if pull is None or not items:
            return None
        path = folder / "feedback.json"
        rows = [
            {"author": f.author, "body": f.body, "path": f.path, "line": f.line, "url": f.url}
            for f in items
        ]
        path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
        return reading.hint(pull.url, items), path

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
        api = GitHubApi(
            pull.repo, task_env(self.settings, task.slug, pipeline), pipeline.landing.timeout
        )
        got = api.get(f"pulls/{pull.number}", pull.etag)
        if isinstance(got, GhFault):
            return self.outcomes.fault(task, got.reason)
        if got.status == 304:
            if not (pull.checks_pending and pull.head_sha):
                return self.outcomes.write(task, pull, pipeline, config, [], {})
            runs = api.get(f"commits/{pull.head_sha}/check-runs", pull.checks_etag)
            if isinstance(runs, GhFault):
                return self.outcomes.fault(task, runs.reason)
            return self._checks(task, pull, pipeline, config, pull.head_sha, runs, {})
        body = got.body if got.status == 200 and isinstance(got.body, dict) else None
        if body is None:
            return self.outcomes.fault(task, f"GitHub answered {got.status} for {pull.url}")
        if body.get("merged"):
            return self.outcomes.merged(task, pull, pipeline, body.get("merge_commit_sha"))
        if body.get("state") == "closed":
            issue = api.get(f"issues/{pull.number}")
            closer = issue.body.get("closed_by") if isinstance(issue, Answer) else None
            who = closer.get("login") if isinstance(closer, dict) else None
            return self.outcomes.closed(task, pull, str(who or "someone"))
        head = body.get("head")
        sha = str(head.get("sha") or "") if isinstance(head, dict) else ""
        lists = [api.get(f"{path}?per_page=100") for path in _FEEDBACK_PATHS(pull.number)]
        runs = api.get(f"commits/{sha}/check-runs") if sha else Answer(200, None, {})
        faults = [a for a in (*lists, runs) if isinstance(a, GhFault)]
        if faults:
            return self.outcomes.fault(task, faults[0].reason)
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
        self.outcomes.write(task, pull, pipeline, config, [*(items or []), *failed], values)

    def _own(self, api: GitHubApi) -> str | None:
        if self.own is None:
            answer = api.user()
            if isinstance(answer, Answer) and isinstance(answer.body, dict):
                self.own = str(answer.body.get("login") or "") or None
        return self.own


def _FEEDBACK_PATHS(number: int) -> tuple[str, str, str]:
    return (f"pulls/{number}/reviews", f"pulls/{number}/comments", f"issues/{number}/comments")


def tick_hooks(kernel: Kernel) -> TickHooks:
    """Before the claims and after them, the held tasks are read (what the
    landing held after the claims is read at once: its first poll); the
    landing's record asks `hold_finished`."""
    store.ensure(kernel.tx.engine)
    follower = Follower(kernel)
    return TickHooks(
        before_claims=follower.run,
        after_claims=follower.run,
        hold_finished=follower.hold,
        attempt_feedback=follower.feedback,
    )
