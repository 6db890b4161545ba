"""`Prepared` must be indistinguishable from `Connection.execute`: the same
stored bytes, the same values back, the same exceptions, on both backends."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, bindparam, insert, select, text
from sqlalchemy.exc import IntegrityError

from orchestrator import testing
from orchestrator.domain.pipeline import State, Status
from orchestrator.storage import repo, tables
from orchestrator.storage.db import db_now, make_engine, write_tx
from orchestrator.storage.prepared import Prepared

NOW = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)


@pytest.fixture
def conn(migrated_url: str) -> Iterator[Connection]:
    engine = make_engine(migrated_url)
    try:
        with write_tx(engine) as connection:
            yield connection
    finally:
        engine.dispose()


def add(conn: Connection, *slugs: str, priority: int = 0) -> list[repo.TaskSnapshot]:
    repo.insert_tasks(
        conn, [repo.NewTask(s, s.upper(), "default", "work", priority) for s in slugs], NOW, "test"
    )
    found = [repo.get_task(conn, slug) for slug in slugs]
    assert all(task is not None for task in found)
    return [task for task in found if task is not None]


def open_attempt(
    conn: Connection, task: repo.TaskSnapshot, number: int = 1, at: datetime = NOW
) -> int:
    return repo.open_attempt(
        conn,
        task_id=task.id,
        stage=task.stage,
        run=task.run,
        number=number,
        hint="try harder",
        tick_id=None,
        lease_token="t" * 32,
        lease_expires_at=at + timedelta(seconds=90),
        host="h",
        boot_id="b",
        tick_pid=1,
        tick_start=None,
        started_at=at,
    )


def test_a_task_reads_back_as_connection_execute_reads_it(conn: Connection) -> None:
    [task] = add(conn, "t1")
    row = conn.execute(select(*repo._TASK_COLUMNS).where(tables.tasks.c.id == task.id)).one()
    prepared = repo.get_task_by_id(conn, task.id)
    assert prepared == repo._task(row) == task
    assert prepared is not None and prepared.created_at == NOW
    assert prepared.created_at.tzinfo is UTC and prepared.status is Status.READY
    assert repo.get_task_by_id(conn, task.id + 1000) is None


@pytest.mark.parametrize("microsecond", [789012, 0])
def test_written_values_are_stored_as_sqlalchemy_stores_them(
    conn: Connection, microsecond: int
) -> None:
    at = NOW.replace(microsecond=microsecond)
    [task, other] = add(conn, "t1", "t2")
    ours = open_attempt(conn, task, 1, at=at)
    theirs = conn.execute(  # another task's: one open attempt per task
        insert(tables.attempts)
        .values(
            task_id=other.id,
            stage=task.stage,
            run=task.run,
            number=2,
            hint="try harder",
            lease_token="t" * 32,
            lease_expires_at=at + timedelta(seconds=90),
            host="h",
            boot_id="b",
            tick_pid=1,
            started_at=at,
        )
        .returning(tables.attempts.c.id)
    ).scalar_one()
    # What is in the database, read without any type processing: equal bytes,
    # so SQL comparisons (lease expiry) and reports see one format.
    raw = text(
        "SELECT CAST(started_at AS TEXT), CAST(lease_expires_at AS TEXT), hint "
        "FROM attempts WHERE id = :id"
    )
    assert conn.execute(raw, {"id": ours}).one() == conn.execute(raw, {"id": theirs}).one()


def test_booleans_floats_and_nulls_round_trip(conn: Connection) -> None:
    [task] = add(conn, "t1")
    attempt_id = open_attempt(conn, task)
    assert repo.close_attempt(
        conn, attempt_id, "t" * 32, outcome="passed", score=0.25, finished_at=NOW, **{"pass": True}
    )
    query = select(
        tables.attempts.c["pass"], tables.attempts.c.score, tables.attempts.c.error
    ).where(tables.attempts.c.id == bindparam("id"))
    expected = tuple(conn.execute(query, {"id": attempt_id}).one())
    assert Prepared(query).execute(conn, {"id": attempt_id}).rows == [expected]
    assert expected == (True, 0.25, None)


def test_row_counts_fence_writes(conn: Connection) -> None:
    [task] = add(conn, "t1")
    attempt_id = open_attempt(conn, task)
    assert not repo.close_attempt(conn, attempt_id, "x" * 32, outcome="passed", finished_at=NOW)
    assert repo.close_attempt(conn, attempt_id, "t" * 32, outcome="passed", finished_at=NOW)
    assert not repo.close_attempt(conn, attempt_id, "t" * 32, outcome="failed", finished_at=NOW)
    later = repo.apply_transition(
        conn, task, "claim", State("work", Status.RUNNING), now=NOW, actor="test"
    )
    assert later.version == task.version + 1
    with pytest.raises(repo.ConflictError):
        repo.apply_transition(
            conn, task, "claim", State("work", Status.RUNNING), now=NOW, actor="test"
        )


def test_claim_order_exclusion_and_slug(conn: Connection) -> None:
    low, high, other = add(conn, "low", "high", "other")
    conn.execute(tables.tasks.update().where(tables.tasks.c.id == high.id).values(priority=5))
    conn.execute(
        tables.tasks.update().where(tables.tasks.c.id == other.id).values(host="elsewhere")
    )

    def claim(**kwargs: object) -> str | None:
        options: dict[str, object] = {"host": "here", "any_host": False, **kwargs}
        task = repo.find_claimable(conn, **options)  # type: ignore[arg-type]
        return None if task is None else task.slug

    assert claim() == "high"
    assert claim(exclude={high.id}) == "low"
    assert claim(exclude={high.id, low.id}) is None  # "other" belongs to another host
    assert claim(exclude={high.id, low.id}, any_host=True) == "other"
    assert claim(slug="low") == "low"
    assert claim(slug="low", exclude={low.id}) is None
    open_attempt(conn, repo.get_task_by_id(conn, high.id))  # type: ignore[arg-type]
    assert claim() == "low"  # an unfinished attempt keeps a task from being claimed


def test_driver_errors_come_out_as_sqlalchemy_errors(conn: Connection) -> None:
    [task] = add(conn, "t1")
    duplicate = {
        "task_id": task.id,
        "seq": 1,  # insert_tasks wrote seq 1 already
        "from_state": None,
        "to_state": "work",
        "event": "add",
        "actor": "test",
        "reason": None,
        "note": None,
        "attempt_id": None,
        "at": NOW,
    }
    with pytest.raises(IntegrityError) as caught:
        repo._INSERT_TRANSITION.execute(conn, duplicate)
    assert "INSERT INTO transitions" in str(caught.value)


def test_db_now_is_aware_utc(migrated_url: str) -> None:
    engine = make_engine(migrated_url)
    try:
        # Bracketed by the test's reads around the whole transaction (on
        # PostgreSQL now() is the transaction's start), a second each side
        # for another clock's rounding on this machine.
        before = datetime.now(UTC)
        with write_tx(engine) as conn:
            now = db_now(conn)
        after = datetime.now(UTC)
    finally:
        engine.dispose()
    assert now.tzinfo is UTC
    assert before - timedelta(seconds=1) <= now <= after + timedelta(seconds=1)


def test_every_execution_is_counted_for_the_crash_sweep(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    monkeypatch.setattr(testing, "statement_executed", lambda sql, *_driver: seen.append(sql))
    add(conn, "t1")
    assert seen == []  # insert_tasks and get_task run through Connection.execute
    repo.find_claimable(conn, host="h", any_host=True)
    assert len(seen) == 1 and seen[0].startswith("SELECT tasks.id")


def test_python_side_defaults_are_refused_and_bare_connections_autobegin(migrated_url: str) -> None:
    engine = make_engine(migrated_url)
    try:
        with engine.connect() as bare:
            assert repo.get_task_by_id(bare, 1) is None
            assert bare.in_transaction()  # begun, as Connection.execute would
        with write_tx(engine) as conn:
            partial = Prepared(
                insert(tables.ticks).values(host=bindparam("host"), pid=1, started_at=NOW)
            )
            with pytest.raises(ValueError, match="defaults"):
                partial.execute(conn, {"host": "h"})
    finally:
        engine.dispose()


def test_expanding_parameters_are_refused(conn: Connection) -> None:
    query = select(tables.tasks.c.id).where(tables.tasks.c.id.in_(bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="expanding"):
        Prepared(query).execute(conn, {"ids": [1]})


def test_the_measurement_that_justifies_prepared_still_runs() -> None:
    """`Prepared` is kept on the strength of `python -m bench.prepared`
    (docs/decisions.md); the bench must keep working as the repo API moves."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bench.prepared", "--rounds", "1", "--attempts", "3", "--pg", ""],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^sqlite +wall .* µs with, .* µs without: [\d.]+x", done.stdout, re.M)
