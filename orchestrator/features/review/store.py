"""The review loop's rows and queries, and the one column of the engine's
it writes (the task's landed commit once the pull request is merged).

Its rows: the pull request each held task waits on (its ETags, when it
was read, the rounds it took), and every piece of feedback that came back
(who, when, what, which attempt it led to): the record the verifier's
agreement is measured against later. On a `MetaData` of the feature's
own, made when a config first follows a pull request (`ensure`): a
database nobody follows a pull request in holds none of it, and the
engine's schema (and the idle tick's copy of it) is unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError

from orchestrator.storage import tables
from orchestrator.storage.tables import UTCDateTime

metadata = MetaData()

review_pulls = Table(
    "review_pulls",
    metadata,
    Column("task_id", Integer, primary_key=True),
    Column("url", Text, nullable=False),
    Column("repo", String(255), nullable=False),  # OWNER/NAME
    Column("number", Integer, nullable=False),
    Column("etag", String(255)),  # the pull request's last answer
    Column("checks_etag", String(255)),  # its head's check runs' last answer
    Column("checks_pending", Boolean, nullable=False, default=False),
    Column("head_sha", String(64)),
    Column("polled_at", UTCDateTime),
    Column("fault", Text),  # the last `gh` failure, cleared by an answer
    Column("rounds", Integer, nullable=False, default=0),  # feedback rounds sent back
)

review_feedback = Table(
    "review_feedback",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("task_id", Integer, nullable=False, index=True),
    # `review:ID`, `inline:ID`, `conversation:ID`, `check:SHA:NAME`: one row each.
    Column("key", String(512), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("author", String(255), nullable=False),
    Column("state", String(64)),  # a review's: CHANGES_REQUESTED, APPROVED, COMMENTED
    Column("body", Text, nullable=False),
    Column("path", Text),
    Column("line", Integer),
    Column("url", Text),
    Column("at", UTCDateTime, nullable=False),
    Column("round", Integer, nullable=False),  # the round it sent back (0: none)
    Column("attempt_id", Integer),  # the attempt whose work answered it
    Column("addressed_commit", String(64)),  # the pushed commit answering it
    Column("replied_at", UTCDateTime),
    UniqueConstraint("task_id", "key", name="uq_review_feedback_key"),
)


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


def ensure(engine: Engine) -> None:
    """Make the tables when missing. Two hosts making them at once: the
    loser's CREATE fails and it finds them made."""
    try:
        metadata.create_all(engine, checkfirst=True)
    except DBAPIError:
        metadata.create_all(engine, checkfirst=True)


def following(conn: Connection) -> bool:
    """Whether any config ever followed a pull request in this database."""
    return inspect(conn).has_table("review_pulls")
