"""What `explain` says of a followed pull request: its URL, the rounds it
took, when it was last read and a `gh` failure if the last read failed (the
host's, not the task's), and the feedback no pushed commit answered yet."""

from __future__ import annotations

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.domain.text import one_line
from orchestrator.ext.views import Explained
from orchestrator.features.review import store
from orchestrator.storage import repo


def explain(conn: Connection, settings: Settings, task: repo.TaskSnapshot) -> Explained | None:
    if not store.following(conn):
        return None  # no config ever followed a pull request here
    pull = store.pull_of(conn, task.id)
    if pull is None:
        return None
    feedback = store.open_feedback(conn, task.id)
    data = {
        "url": pull.url,
        "rounds": pull.rounds,
        "polled_at": None if pull.polled_at is None else pull.polled_at.isoformat(),
        "fault": pull.fault,
        "open_feedback": [
            {"author": f.author, "body": f.body, "path": f.path, "line": f.line, "url": f.url}
            for f in feedback
        ],
    }
    lines = [f"pull request: {pull.url} (feedback rounds: {pull.rounds})"]
    if pull.fault:
        lines.append(f"  gh failed (the host's fault, not charged): {one_line(pull.fault)}")
    for item in feedback:
        where = f" {item.path}:{item.line}" if item.path else ""
        lines.append(f"  open: {item.author}{where}: {one_line(item.body, 120)}")
    return Explained(key="review", data=data, lines=tuple(lines))
