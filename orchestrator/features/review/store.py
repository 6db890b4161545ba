"""The review loop's queries: its own rows (`tables.py`), and the one
column of the engine's it writes, the task's landed commit once the pull
request is merged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update

from orchestrator.features.review.tables import review_feedback, review_pulls
from orchestrator.storage import tables


@dataclass(frozen=True)
class Pull:
    task_id: int
    url: str
    repo: str
    number: int
    etag: str | None
    checks_etag: str | None
    checks_pending: bool
    head_sha: str | None
    polled_at: datetime | None
    fault: str | None
    rounds: int


@dataclass(frozen=True)
class Feedback:
    """One review, comment or failing check that came back."""

    key: str
    kind: str  # review, inline, conversation, check
    author: str
    body: str
    at: datetime
    state: str | None = None
    path: str | None = None
    line: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class Reply:
    id: int
    task_id: int
    repo: str
    number: int
    key: str
    kind: str
    author: str
    url: str | None
    commit: str


def pull_of(conn: Connection, task_id: int) -> Pull | None:
    row = conn.execute(select(review_pulls).where(review_pulls.c.task_id == task_id)).first()
    if row is None:
        return None
    return Pull(
        row.task_id,
        row.url,
        row.repo,
        row.number,
        row.etag,
        row.checks_etag,
        bool(row.checks_pending),
        row.head_sha,
        row.polled_at,
        row.fault,
        row.rounds,
    )


def follow(
    conn: Connection, task_id: int, url: str, repo: str, number: int, commit: str | None
) -> None:
    """The task waits on this pull request: its row made, or (the fix of a
    round pushed to the same one) the last round's feedback marked as
    answered by `commit`, by the task's newest attempt, to be replied to."""
    found = pull_of(conn, task_id)
    if found is None or found.number != number or found.repo != repo:
        if found is not None:
            conn.execute(delete_pull(task_id))
        conn.execute(
            insert(review_pulls).values(
                task_id=task_id, url=url, repo=repo, number=number, rounds=0
            )
        )
        return
    if commit is None or found.rounds == 0:
        return
    newest = select(func.max(tables.attempts.c.id)).where(tables.attempts.c.task_id == task_id)
    conn.execute(
        update(review_feedback)
        .where(
            review_feedback.c.task_id == task_id,
            review_feedback.c.round == found.rounds,
            review_feedback.c.addressed_commit.is_(None),
        )
        .values(addressed_commit=commit, attempt_id=newest.scalar_subquery())
    )


def delete_pull(task_id: int):  # type: ignore[no-untyped-def]
    return review_pulls.delete().where(review_pulls.c.task_id == task_id)


def note_poll(conn: Connection, task_id: int, now: datetime, **values: object) -> None:
    """When it was read, and what the answer changed (ETags, head, fault)."""
    conn.execute(
        update(review_pulls)
        .where(review_pulls.c.task_id == task_id)
        .values(polled_at=now, **values)
    )


def known_keys(conn: Connection, task_id: int) -> set[str]:
    query = select(review_feedback.c.key).where(review_feedback.c.task_id == task_id)
    return set(conn.execute(query).scalars())


def record_feedback(conn: Connection, task_id: int, items: Sequence[Feedback], round_: int) -> None:
    for item in items:
        conn.execute(
            insert(review_feedback).values(
                task_id=task_id,
                key=item.key,
                kind=item.kind,
                author=item.author,
                state=item.state,
                body=item.body,
                path=item.path,
                line=item.line,
                url=item.url,
                at=item.at,
                round=round_,
            )
        )


def set_rounds(conn: Connection, task_id: int, rounds: int) -> None:
    conn.execute(
        update(review_pulls).where(review_pulls.c.task_id == task_id).values(rounds=rounds)
    )


def open_feedback(conn: Connection, task_id: int) -> list[Feedback]:
    """What came back and no pushed commit answered yet, oldest first."""
    query = (
        select(review_feedback)
        .where(
            review_feedback.c.task_id == task_id,
            review_feedback.c.round > 0,
            review_feedback.c.addressed_commit.is_(None),
        )
        .order_by(review_feedback.c.id)
    )
    return [
        Feedback(r.key, r.kind, r.author, r.body, r.at, r.state, r.path, r.line, r.url)
        for r in conn.execute(query)
    ]


def unreplied(conn: Connection) -> list[Reply]:
    """Comments a pushed commit answered, not replied to yet."""
    f, p = review_feedback, review_pulls
    query = (
        select(f.c.id, f.c.task_id, p.c.repo, p.c.number, f.c.key, f.c.kind, f.c.author)
        .add_columns(f.c.url, f.c.addressed_commit)
        .join(p, p.c.task_id == f.c.task_id)
        .where(
            f.c.addressed_commit.is_not(None),
            f.c.replied_at.is_(None),
            f.c.kind.in_(("inline", "conversation", "review")),
        )
        .order_by(f.c.id)
    )
    return [Reply(*row) for row in conn.execute(query)]


def mark_replied(conn: Connection, feedback_id: int, now: datetime) -> None:
    conn.execute(
        update(review_feedback).where(review_feedback.c.id == feedback_id).values(replied_at=now)
    )


def set_landed_commit(conn: Connection, task_id: int, commit: str | None) -> None:
    if commit is not None:
        conn.execute(
            update(tables.tasks).where(tables.tasks.c.id == task_id).values(landed_commit=commit)
        )
