"""Attempts: opening one under a lease, renewing and closing it.

Renewing and closing an expired lease are each one conditional statement,
so of a thawed owner and a recovering host exactly one wins.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, bindparam, insert, select, update

from orchestrator.storage.prepared import Prepared
from orchestrator.storage.repo.records import _ATTEMPT_COLUMNS, AttemptSnapshot, _attempt, attempts

_LAST_ATTEMPT = Prepared(
    select(attempts.c.number, attempts.c.outcome, attempts.c.score)
    .where(attempts.c.task_id == bindparam("task_id"), attempts.c.stage == bindparam("stage"))
    .order_by(attempts.c.number.desc())
    .limit(1)
)
_OPEN_COLUMNS = (
    "task_id",
    "stage",
    "run",
    "number",
    "hint",
    "tick_id",
    "lease_token",
    "lease_expires_at",
    "host",
    "boot_id",
    "tick_pid",
    "tick_start",
    "started_at",
    "start_commit",
    "pool",
)
# `attempts.start_commit` besides a sha: the worker has not started yet (so
# the attempt changed nothing), or the workspace had no commit then.
START_PENDING = "pending"
START_NO_COMMIT = "none"
_OPEN_ATTEMPT = Prepared(
    insert(attempts)
    .values({name: bindparam(name) for name in _OPEN_COLUMNS})
    .returning(attempts.c.id)
)


# A lease that has expired cannot be renewed, and recovery closes only an
# expired one (`close_attempt(expired_at=...)`): each is one conditional
# statement, so of a thawed owner renewing and another host recovering,
# exactly one wins, whatever the interleaving of their reads.
_RENEW_LEASE = Prepared(
    update(attempts)
    .where(
        attempts.c.id == bindparam("attempt_id"),
        attempts.c.lease_token == bindparam("token"),
        attempts.c.finished_at.is_(None),
        attempts.c.lease_expires_at >= bindparam("now"),
    )
    .values(lease_expires_at=bindparam("expires"))
)


@dataclass(frozen=True)
class LastAttempt:
    """The newest attempt of a task at a stage: the next one's number, and
    what the next one is told of it (ORCHESTRATOR_PREV_*)."""

    number: int
    outcome: str | None
    score: float | None


def last_attempt(conn: Connection, task_id: int, stage: str) -> LastAttempt | None:
    row = _LAST_ATTEMPT.execute(conn, {"task_id": task_id, "stage": stage}).first()
    return None if row is None else LastAttempt(int(row[0]), row[1], row[2])


def open_attempt(conn: Connection, **values: Any) -> int:
    """Insert an open attempt; `values` names every column of `_OPEN_COLUMNS`
    (but `start_commit`, pending until the worker starts, and `pool`, None
    for a stage in no pool)."""
    row = _OPEN_ATTEMPT.execute(
        conn, {"start_commit": START_PENDING, "pool": None, **values}
    ).first()
    assert row is not None
    return int(row[0])


def renew_lease(
    conn: Connection, attempt_id: int, token: str, now: datetime, expires: datetime
) -> bool:
    """Extend our lease; False when the attempt is no longer ours, or its
    lease ran out (`now` past it): then another host may already be
    recovering it, and we must stop rather than run on."""
    result = _RENEW_LEASE.execute(
        conn, {"attempt_id": attempt_id, "token": token, "now": now, "expires": expires}
    )
    return result.rowcount == 1


def close_attempt(
    conn: Connection,
    attempt_id: int,
    token: str | None,
    *,
    expired_at: datetime | None = None,
    **values: Any,
) -> bool:
    """Close an open attempt, fenced by its lease token (None: any owner).

    With `expired_at`, only if the lease had run out by then: recovery's
    close of an attempt it judged by its lease alone."""
    statement = _close_statement(
        tuple(sorted(values)), fenced=token is not None, expired=expired_at is not None
    )
    params = {f"new_{name}": value for name, value in values.items()}
    if token is not None:
        params["token"] = token
    if expired_at is not None:
        params["expired_at"] = expired_at
    result = statement.execute(conn, {**params, "attempt_id": attempt_id})
    return result.rowcount == 1


@functools.cache
def _close_statement(columns: tuple[str, ...], *, fenced: bool, expired: bool) -> Prepared:
    condition = and_(attempts.c.id == bindparam("attempt_id"), attempts.c.finished_at.is_(None))
    if fenced:
        condition = and_(condition, attempts.c.lease_token == bindparam("token"))
    if expired:
        condition = and_(condition, attempts.c.lease_expires_at < bindparam("expired_at"))
    return Prepared(
        update(attempts)
        .where(condition)
        .values({name: bindparam(f"new_{name}") for name in columns})
    )


_START_COMMIT = Prepared(
    update(attempts)
    .where(
        attempts.c.id == bindparam("attempt_id"),
        attempts.c.lease_token == bindparam("token"),
        attempts.c.finished_at.is_(None),
    )
    .values(start_commit=bindparam("commit"))
)


def record_start_commit(conn: Connection, attempt_id: int, token: str, commit: str) -> bool:
    """Note the workspace's commit as the worker starts ("" for none),
    fenced by the lease; False when the attempt is no longer ours."""
    params = {"attempt_id": attempt_id, "token": token, "commit": commit or START_NO_COMMIT}
    return _START_COMMIT.execute(conn, params).rowcount == 1


def stage_start_commit(conn: Connection, task_id: int, stage: str, run: int) -> str | None:
    """The commit the stage's run began from: that of its first attempt
    whose worker started ("" when it had none); None when that attempt is
    from before the record (or no worker started yet)."""
    rows = conn.execute(
        select(attempts.c.start_commit)
        .where(attempts.c.task_id == task_id, attempts.c.stage == stage, attempts.c.run == run)
        .order_by(attempts.c.number)
    )
    for (commit,) in rows:
        if commit == START_PENDING:
            continue  # stopped before its worker: changed nothing
        if commit is None:
            return None
        return "" if commit == START_NO_COMMIT else str(commit)
    return None


def judged_commits(conn: Connection, task_id: int, stage: str, run: int) -> set[str]:
    """The commits a verifier passed in the stage's run (its stage commits;
    best of N: each candidate's), which a gate may move on without a look."""
    rows = conn.execute(
        select(attempts.c.commit_sha).where(
            attempts.c.task_id == task_id,
            attempts.c.stage == stage,
            attempts.c.run == run,
            attempts.c.commit_sha.is_not(None),
        )
    )
    return {str(sha) for (sha,) in rows}


def record_late_result(conn: Connection, attempt_id: int, result: dict[str, Any]) -> None:
    conn.execute(
        update(attempts)
        .where(attempts.c.id == attempt_id)
        .values(late_result=json.dumps(result, sort_keys=True))
    )


def attempt_with_token(conn: Connection, token: str) -> AttemptSnapshot | None:
    """The attempt a lease token names: a retried transaction's way to see
    whether its first try committed (the token is made before the first try)."""
    row = conn.execute(select(*_ATTEMPT_COLUMNS).where(attempts.c.lease_token == token)).first()
    return None if row is None else _attempt(row)


def unfinished_attempts(conn: Connection) -> list[AttemptSnapshot]:
    rows = conn.execute(
        select(*_ATTEMPT_COLUMNS).where(attempts.c.finished_at.is_(None)).order_by(attempts.c.id)
    )
    return [_attempt(row) for row in rows]


def any_unfinished(conn: Connection) -> bool:
    """Whether an attempt is open; reads no column but `id`, so it also works
    on a database an upgrade is about to give new columns."""
    row = conn.execute(select(attempts.c.id).where(attempts.c.finished_at.is_(None)).limit(1))
    return row.first() is not None


def lease_expiry(now: datetime, lease_seconds: float) -> datetime:
    return now + timedelta(seconds=lease_seconds)
