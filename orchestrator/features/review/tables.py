"""The review loop's rows: the pull request each held task waits on (its
ETags, when it was read, the rounds it took), and every piece of feedback
that came back (who, when, what, which attempt it led to): the record the
verifier's agreement is measured against later.

On a `MetaData` of the feature's own, made when a config first follows a
pull request (`ensure`): a database nobody follows a pull request in holds
none of it, and the engine's schema (and the idle tick's copy of it) is
unchanged."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.exc import DBAPIError

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


def ensure(engine: Engine) -> None:
    """Make the tables when missing. Two hosts making them at once: the
    loser's CREATE fails and it finds them made."""
    try:
        metadata.create_all(engine, checkfirst=True)
    except DBAPIError:
        metadata.create_all(engine, checkfirst=True)
