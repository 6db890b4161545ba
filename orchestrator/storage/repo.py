"""The queries: verbs that say what the database does, on a caller's
transaction, returning frozen snapshots (never live ORM objects).

Every change of a task's state is `apply_transition`: a compare-and-set
UPDATE on the task's `version` checked by row count, plus the transition row
with `seq = version + 1`, in the caller's transaction. The unique
`(task_id, seq)` makes a second writer of the same step fail rather than
write it twice.

The statements of the tick's hot path are built once, at import, with bound
parameters, and run as `Prepared` statements (compiled once per dialect, run
on the driver cursor): SQLAlchemy's per-execution bookkeeping costs more than
SQLite takes to answer them, and a tick of 100 attempts runs ~1,100 of them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, bindparam, exists, func, insert, or_, select, update

from orchestrator.domain.decide import Outcome, RunHistory
from orchestrator.domain.pipeline import ADD, Event, State, Status, check_transition, state_string
from orchestrator.errors import OrchestratorError
from orchestrator.events import outbox
from orchestrator.storage import tables
from orchestrator.storage.prepared import Prepared

tasks = tables.tasks
attempts = tables.attempts
transitions = tables.transitions
ticks = tables.ticks


class ConflictError(OrchestratorError):
    """Someone else changed the task between our read and our write."""

    exit_code = 1


@dataclass(frozen=True)
class TaskSnapshot:
    id: int
    slug: str
    title: str
    body: str
    pipeline: str
    priority: int
    stage: str
    status: Status
    halt_reason: str | None
    run: int
    version: int
    next_hint: str
    hint_source: str | None
    host: str | None
    created_at: datetime
    updated_at: datetime
    max_cost_usd: float | None = None  # the task's own budget

    @property
    def state(self) -> State:
        return State(self.stage, self.status)


@dataclass(frozen=True)
class NewTask:
    slug: str
    title: str
    pipeline: str
    first_stage: str
    priority: int = 0
    body: str = ""
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class AttemptSnapshot:
    id: int
    task_id: int
    stage: str
    run: int
    number: int
    outcome: str | None
    passed: bool | None
    score: float | None
    reasons: tuple[str, ...]
    next_hint: str | None
    hint: str
    error: str | None
    lease_token: str
    lease_expires_at: datetime
    host: str
    boot_id: str
    tick_pid: int
    tick_start: str | None
    pid: int | None
    pgid: int | None
    proc_start: str | None
    started_at: datetime
    finished_at: datetime | None
    tick_id: int | None = None


_TASK_COLUMNS = [tasks.c[name] for name in TaskSnapshot.__dataclass_fields__]
_ATTEMPT_COLUMNS = [
    attempts.c["pass" if name == "passed" else name]
    for name in AttemptSnapshot.__dataclass_fields__
]


_STATUS = list(TaskSnapshot.__dataclass_fields__).index("status")


def _task(row: Sequence[Any]) -> TaskSnapshot:
    """A snapshot from a row of `_TASK_COLUMNS`, in that order."""
    values = list(row)
    values[_STATUS] = Status(values[_STATUS])
    return TaskSnapshot(*values)


def _attempt(row: Any) -> AttemptSnapshot:
    data = dict(row._mapping)
    data["passed"] = data.pop("pass")
    data["reasons"] = tuple(json.loads(data["reasons"])) if data["reasons"] else ()
    return AttemptSnapshot(**data)


# -- tasks ---------------------------------------------------------------


_TASK_BY_SLUG = select(*_TASK_COLUMNS).where(tasks.c.slug == bindparam("slug"))
_TASK_BY_SLUG_LOCKED = _TASK_BY_SLUG.with_for_update()
_TASK_BY_ID = Prepared(select(*_TASK_COLUMNS).where(tasks.c.id == bindparam("task_id")))


def get_task(conn: Connection, slug: str, *, for_update: bool = False) -> TaskSnapshot | None:
    locked = for_update and conn.dialect.name == "postgresql"
    row = conn.execute(_TASK_BY_SLUG_LOCKED if locked else _TASK_BY_SLUG, {"slug": slug}).first()
    return None if row is None else _task(row)


def get_task_by_id(conn: Connection, task_id: int) -> TaskSnapshot | None:
    row = _TASK_BY_ID.execute(conn, {"task_id": task_id}).first()
    return None if row is None else _task(row)


def existing_slugs(conn: Connection, slugs: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(slugs), 500):
        chunk = slugs[start : start + 500]
        found.update(conn.execute(select(tasks.c.slug).where(tasks.c.slug.in_(chunk))).scalars())
    return found


def insert_tasks(conn: Connection, new: Sequence[NewTask], now: datetime, actor: str) -> None:
    """Create tasks at their first stage, each with its creating transition (seq 1)."""
    for start in range(0, len(new), 500):
        chunk = new[start : start + 500]
        conn.execute(
            insert(tasks),
            [
                {
                    "slug": t.slug,
                    "title": t.title,
                    "body": t.body,
                    "pipeline": t.pipeline,
                    "priority": t.priority,
                    "stage": t.first_stage,
                    "status": Status.READY.value,
                    "run": 1,
                    "version": 1,
                    "next_hint": "",
                    "created_at": now,
                    "updated_at": now,
                    "max_cost_usd": t.max_cost_usd,
                }
                for t in chunk
            ],
        )
        ids = dict(
            conn.execute(
                select(tasks.c.slug, tasks.c.id).where(tasks.c.slug.in_([t.slug for t in chunk]))
            ).all()
        )
        conn.execute(
            insert(transitions),
            [
                {
                    "task_id": ids[t.slug],
                    "seq": 1,
                    "from_state": None,
                    "to_state": t.first_stage,
                    "event": ADD,
                    "actor": actor,
                    "reason": "task added",
                    "note": None,
                    "attempt_id": None,
                    "at": now,
                }
                for t in chunk
            ],
        )


def apply_transition(
    conn: Connection,
    task: TaskSnapshot,
    event: Event,
    to: State,
    *,
    now: datetime,
    actor: str,
    reason: str | None = None,
    note: str | None = None,
    attempt_id: int | None = None,
    halt_reason: str | None = None,
    next_hint: str | None = None,
    hint_source: str | None = None,
    new_run: bool = False,
    host: str | None = None,
) -> TaskSnapshot:
    """Compare-and-set the task from the state in `task` to `to`, and record it.

    Raises ConflictError when the task moved since `task` was read, and
    IllegalTransitionError for an edge the state machine does not have: the
    caller's transaction then rolls back and nothing is written.
    """
    check_transition(task.state, event, to)
    run = task.run + 1 if new_run or to.stage != task.stage else task.run
    after = TaskSnapshot(
        **{
            **task.__dict__,
            "stage": to.stage,
            "status": to.status,
            "halt_reason": halt_reason if to.status is Status.HALTED else None,
            "version": task.version + 1,
            "run": run,
            "next_hint": task.next_hint if next_hint is None else next_hint,
            "hint_source": task.hint_source if next_hint is None else hint_source,
            "host": task.host if host is None else host,
            "updated_at": now,
        }
    )
    result = _COMPARE_AND_SET.execute(
        conn,
        {
            "expected_id": task.id,
            "expected_version": task.version,
            **{f"new_{name}": getattr(after, name) for name in _CAS_COLUMNS},
        },
    )
    if result.rowcount != 1:
        raise ConflictError(f"task {task.slug!r} changed meanwhile; try again")
    _INSERT_TRANSITION.execute(
        conn,
        {
            "task_id": task.id,
            "seq": after.version,
            "from_state": str(task.state),
            "to_state": str(to),
            "event": str(event),
            "actor": actor,
            "reason": reason,
            "note": note,
            "attempt_id": attempt_id,
            "at": now,
        },
    )
    # The outbox: an event of interest commits or rolls back with its transition.
    outbox.on_transition(
        conn,
        task,
        event,
        to,
        now=now,
        actor=actor,
        reason=reason,
        note=note,
        attempt_id=attempt_id,
        halt_reason=after.halt_reason,
    )
    return after


_CAS_COLUMNS = (
    "stage",
    "status",
    "halt_reason",
    "version",
    "run",
    "next_hint",
    "hint_source",
    "host",
    "updated_at",
)
_COMPARE_AND_SET = Prepared(
    update(tasks)
    .where(tasks.c.id == bindparam("expected_id"), tasks.c.version == bindparam("expected_version"))
    .values({name: bindparam(f"new_{name}") for name in _CAS_COLUMNS})
)
_TRANSITION_COLUMNS = (
    "task_id",
    "seq",
    "from_state",
    "to_state",
    "event",
    "actor",
    "reason",
    "note",
    "attempt_id",
    "at",
)
# inline(): no implicit RETURNING of the new id (PostgreSQL), which nobody reads.
_INSERT_TRANSITION = Prepared(
    insert(transitions).values({name: bindparam(name) for name in _TRANSITION_COLUMNS}).inline()
)


def last_event(conn: Connection, task_id: int, event: str) -> tuple[int, str | None] | None:
    """(seq, from_state) of the task's newest transition of this event, or None."""
    row = conn.execute(
        select(transitions.c.seq, transitions.c.from_state)
        .where(and_(transitions.c.task_id == task_id, transitions.c.event == event))
        .order_by(transitions.c.seq.desc())
        .limit(1)
    ).first()
    return None if row is None else (int(row[0]), row[1])


def tasks_with_status(conn: Connection, status: Status) -> list[TaskSnapshot]:
    rows = conn.execute(
        select(*_TASK_COLUMNS).where(tasks.c.status == status.value).order_by(tasks.c.id)
    )
    return [_task(row) for row in rows]


def find_claimable(
    conn: Connection,
    *,
    host: str,
    any_host: bool,
    exclude: Collection[int] = (),
    slug: str | None = None,
    lock: bool = True,
) -> TaskSnapshot | None:
    """The next ready task (priority, then age) with no unfinished attempt,
    skipping the ids in `exclude`.

    The query reads one row more than `exclude` holds and skips those ids
    here: the same answer as `NOT IN (...)`, from one statement that needs no
    recompiling as the set changes. On PostgreSQL the rows are locked with
    SKIP LOCKED, so ticks on other hosts pass over them instead of waiting;
    on SQLite the caller's BEGIN IMMEDIATE already excludes every other writer.
    A task waiting out a backoff (`backoff_until` still ahead of the
    database's clock) is passed over.
    """
    query = _claim_query(any_host=any_host, slug=slug is not None, lock=lock)
    params: dict[str, Any] = {"limit": len(exclude) + 1}
    if not any_host:
        params["host"] = host
    if slug is not None:
        params["slug"] = slug
    for row in query.execute(conn, params).rows:
        if row[0] not in exclude:
            return _task(row)
    return None


@functools.cache
def _claim_query(*, any_host: bool, slug: bool, lock: bool) -> Prepared:
    unfinished = exists().where(
        and_(attempts.c.task_id == tasks.c.id, attempts.c.finished_at.is_(None))
    )
    # The database's clock, in the statement: no extra round trip per claim.
    # SQLite's CURRENT_TIMESTAMP is UTC text to the second, compared with the
    # stored text: at worst the wait ends up to a second late.
    waited = or_(tasks.c.backoff_until.is_(None), tasks.c.backoff_until <= func.current_timestamp())
    query = select(*_TASK_COLUMNS).where(tasks.c.status == Status.READY.value, ~unfinished, waited)
    if not any_host:
        query = query.where(or_(tasks.c.host.is_(None), tasks.c.host == bindparam("host")))
    if slug:
        query = query.where(tasks.c.slug == bindparam("slug"))
    query = query.order_by(tasks.c.priority.desc(), tasks.c.id).limit(bindparam("limit"))
    if lock:  # `tick --dry-run` reads the same rows without locking them
        # FOR UPDATE ... SKIP LOCKED is PostgreSQL's; SQLite's compiler leaves it out.
        query = query.with_for_update(skip_locked=True, of=tasks)
    return Prepared(query)


# -- attempts --------------------------------------------------------------


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
)
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
    """Insert an open attempt; `values` names every column of `_OPEN_COLUMNS`."""
    row = _OPEN_ATTEMPT.execute(conn, values).first()
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


_RUN_HISTORY = Prepared(
    select(attempts.c.id, attempts.c.outcome, attempts.c.score, attempts.c.workspace_changed)
    .where(
        attempts.c.task_id == bindparam("task_id"),
        attempts.c.stage == bindparam("stage"),
        attempts.c.run == bindparam("run"),
        attempts.c.finished_at.is_not(None),
    )
    .order_by(attempts.c.number)
)


def run_history(
    conn: Connection, task: TaskSnapshot, *, excluding: int | None = None
) -> RunHistory:
    """The facts `decide` needs about the task's current run at its stage."""
    rows = _RUN_HISTORY.execute(
        conn, {"task_id": task.id, "stage": task.stage, "run": task.run}
    ).rows
    kept = [row for row in rows if row[0] != excluding]
    return RunHistory.of(
        [(Outcome(row[1]), row[2]) for row in kept],
        hint=task.next_hint,
        changes=[row[3] for row in kept],
    )


def context_rows(conn: Connection, task_id: int) -> list[dict[str, Any]]:
    """A task's finished attempts, oldest first, with what an attempt's
    context tells of them (not in `AttemptSnapshot`, which must read a
    database still at an older revision, as `db upgrade` does)."""
    columns = [
        attempts.c[name]
        for name in (
            "id", "stage", "run", "number", "outcome", "pass", "score", "reasons",
            "next_hint", "error", "workspace_changed", "finished_at",
        )
    ]  # fmt: skip
    rows = conn.execute(
        select(*columns)
        .where(attempts.c.task_id == task_id, attempts.c.finished_at.is_not(None))
        .order_by(attempts.c.id)
    )
    result = []
    for row in rows:
        data = dict(row._mapping)
        data["reasons"] = list(json.loads(data["reasons"])) if data["reasons"] else []
        result.append(data)
    return result


def set_backoff(conn: Connection, task_id: int, until: datetime | None) -> None:
    """Keep the task from being claimed before `until`, by any tick on any host."""
    conn.execute(update(tasks).where(tasks.c.id == task_id).values(backoff_until=until))


def backoff_until(conn: Connection, task_id: int) -> datetime | None:
    return conn.execute(select(tasks.c.backoff_until).where(tasks.c.id == task_id)).scalar()


def attempts_of(conn: Connection, task_id: int, stage: str | None = None) -> list[AttemptSnapshot]:
    query = select(*_ATTEMPT_COLUMNS).where(attempts.c.task_id == task_id)
    if stage is not None:
        query = query.where(attempts.c.stage == stage)
    return [_attempt(row) for row in conn.execute(query.order_by(attempts.c.id))]


def transitions_of(conn: Connection, task_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(
            transitions.c.seq,
            transitions.c.from_state,
            transitions.c.to_state,
            transitions.c.event,
            transitions.c.actor,
            transitions.c.reason,
            transitions.c.note,
            transitions.c.attempt_id,
            transitions.c.at,
        )
        .where(transitions.c.task_id == task_id)
        .order_by(transitions.c.seq)
    )
    return [dict(row._mapping) for row in rows]


# -- listings ----------------------------------------------------------------


def list_rows(
    conn: Connection,
    *,
    stage: str | None = None,
    status: Status | None = None,
    slug: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """One row per task for `list`: counts and last score at the task's stage,
    from correlated subqueries that each use the (task_id, stage, number) index."""
    count = (
        select(func.count())
        .where(and_(attempts.c.task_id == tasks.c.id, attempts.c.stage == tasks.c.stage))
        .scalar_subquery()
    )
    last_score = (
        select(attempts.c.score)
        .where(
            and_(
                attempts.c.task_id == tasks.c.id,
                attempts.c.stage == tasks.c.stage,
                attempts.c.score.is_not(None),
            )
        )
        .order_by(attempts.c.number.desc())
        .limit(1)
        .scalar_subquery()
    )
    cost = (
        select(func.sum(attempts.c.cost_usd))
        .where(attempts.c.task_id == tasks.c.id)
        .scalar_subquery()
    )
    query = select(
        tasks.c.slug,
        tasks.c.title,
        tasks.c.pipeline,
        tasks.c.priority,
        tasks.c.stage,
        tasks.c.status,
        tasks.c.halt_reason,
        count.label("attempt"),
        last_score.label("score"),
        cost.label("cost_usd"),
        tasks.c.max_cost_usd,
        tasks.c.updated_at,
    ).order_by(tasks.c.id)
    if stage is not None:
        query = query.where(tasks.c.stage == stage)
    if slug is not None:
        query = query.where(tasks.c.slug == slug)
    if status is not None:
        query = query.where(tasks.c.status == status.value)
    if limit is not None:
        query = query.limit(limit)
    out = []
    for row in conn.execute(query):
        data = dict(row._mapping)
        data["state"] = state_string(data["stage"], data["status"])
        out.append(data)
    return out


# -- ticks -------------------------------------------------------------------


def open_tick(conn: Connection, *, host: str, pid: int, now: datetime) -> int:
    result = conn.execute(
        insert(ticks)
        .values(host=host, pid=pid, started_at=now, claimed=0, recovered=0, advanced=0)
        .returning(ticks.c.id)
    )
    return int(result.scalar_one())


def close_tick(
    conn: Connection,
    tick_id: int,
    *,
    now: datetime,
    claimed: int,
    recovered: int,
    advanced: int,
    exit_code: int,
) -> None:
    conn.execute(
        update(ticks)
        .where(ticks.c.id == tick_id)
        .values(
            finished_at=now,
            claimed=claimed,
            recovered=recovered,
            advanced=advanced,
            exit_code=exit_code,
        )
    )


def lease_expiry(now: datetime, lease_seconds: float) -> datetime:
    return now + timedelta(seconds=lease_seconds)
