"""Replies to the comments a pushed fix answered, each naming the commit:
an inline comment in its thread, a review or a conversation comment on
the conversation. Each reply is marked once posted; one `gh` cannot post
stops this tick's replies (the next tick posts the rest)."""

from __future__ import annotations

from orchestrator.ext.ports import Kernel
from orchestrator.features.review import store
from orchestrator.features.review.github import GhFault, GitHubApi, task_env
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx


def reply_all(kernel: Kernel) -> None:
    with read_tx(kernel.tx.engine) as conn:
        replies = store.unreplied(conn)
        tasks = {r.task_id: repo.get_task_by_id(conn, r.task_id) for r in replies}
    for reply in replies:
        task = tasks.get(reply.task_id)
        pipeline = None if task is None else kernel.settings.pipeline(task.pipeline)
        if task is None or pipeline is None:
            continue
        api = GitHubApi(
            reply.repo, task_env(kernel.settings, task.slug, pipeline), pipeline.landing.timeout
        )
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
            kernel.tick.warn(f"{task.slug}: replying on its pull request: {reason}")
            return

        def mark(_again: bool, feedback_id: int = reply.id) -> None:
            with kernel.tx.write() as conn:
                store.mark_replied(conn, feedback_id, db_now(conn))

        kernel.tx.retrying(mark)
