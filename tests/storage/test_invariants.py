"""The schema refuses states that must never exist, on both backends
(migration 0002), and the values it allows are the code's."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from support import make_project

from orchestrator.domain.decide import HaltReason, Outcome
from orchestrator.domain.pipeline import RECORDED_EVENTS, Status
from orchestrator.errors import SchemaError
from orchestrator.storage import migrate, schema
from orchestrator.storage.db import make_engine

NOW = "2026-12-01 00:00:00"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url, create=True)
    yield engine
    engine.dispose()


def seed(engine: Engine, tasks: int = 2) -> None:
    """Rows as a tick leaves them: tasks, transitions, finished attempts."""
    with engine.begin() as conn:
        for i in range(1, tasks + 1):
            conn.execute(
                text(
                    "INSERT INTO tasks (id, slug, title, body, pipeline, priority, stage, status,"
                    " run, version, next_hint, created_at, updated_at) VALUES (:i, :slug, 't',"
                    " '', 'default', :i, 'research', 'ready', 1, 1, '', :now, :now)"
                ),
                {"i": i, "slug": f"t{i}", "now": NOW},
            )
            conn.execute(
                text(
                    "INSERT INTO transitions (task_id, seq, to_state, event, actor, at)"
                    " VALUES (:i, 1, 'research', 'add', 'me', :now)"
                ),
                {"i": i, "now": NOW},
            )
            for number in (1, 2):
                conn.execute(
                    text(
                        "INSERT INTO attempts (task_id, stage, run, number, outcome, hint,"
                        " lease_token, lease_expires_at, host, boot_id, tick_pid, started_at,"
                        " finished_at) VALUES (:i, 'research', 1, :n, 'failed', '', 'tok',"
                        " :now, 'h', 'b', 1, :now, :now)"
                    ),
                    {"i": i, "n": number, "now": NOW},
                )


def open_attempt(engine: Engine, number: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO attempts (task_id, stage, run, number, hint, lease_token,"
                " lease_expires_at, host, boot_id, tick_pid, started_at) VALUES"
                " (1, 'research', 1, :n, '', 'tok', :now, 'h', 'b', 1, :now)"
            ),
            {"n": number, "now": NOW},
        )


def test_a_second_unfinished_attempt_is_refused(engine: Engine) -> None:
    migrate.upgrade(engine)
    seed(engine)
    open_attempt(engine, 3)
    with pytest.raises(IntegrityError):
        open_attempt(engine, 4)
    with engine.begin() as conn:  # once the first is finished, the next may open
        conn.execute(text("UPDATE attempts SET finished_at = :now WHERE number = 3"), {"now": NOW})
    open_attempt(engine, 4)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE tasks SET status = 'halt' WHERE id = 1",
        "UPDATE tasks SET status = 'halted', halt_reason = 'bored' WHERE id = 1",
        "UPDATE attempts SET outcome = 'success' WHERE id = 1",
        "UPDATE transitions SET event = 'teleport' WHERE id = 1",
    ],
)
def test_unknown_values_are_refused(engine: Engine, statement: str) -> None:
    migrate.upgrade(engine)
    seed(engine)
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text(statement))


def allowed(engine: Engine, table: str, column: str) -> set[str]:
    for check in inspect(engine).get_check_constraints(table):
        if check["name"] == f"ck_{table}_{column}":
            return set(re.findall(r"'([^']*)'", check["sqltext"]))
    raise AssertionError(f"no CHECK on {table}.{column}")


def test_the_schema_allows_exactly_the_codes_values(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert allowed(engine, "tasks", "status") == {s.value for s in Status}
    assert allowed(engine, "tasks", "halt_reason") == {r.value for r in HaltReason}
    assert allowed(engine, "attempts", "outcome") == {o.value for o in Outcome}
    assert allowed(engine, "transitions", "event") == set(RECORDED_EVENTS)


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("tasks", "attempts", "transitions")
        }


def test_upgrading_and_downgrading_keep_every_row(engine: Engine) -> None:
    """0001 -> 0002 rebuilds tables on SQLite: no cascade may eat the children."""
    migrate.upgrade(engine, "0001")
    seed(engine, tasks=3)
    before = counts(engine)
    assert before == {"tasks": 3, "attempts": 6, "transitions": 3}
    migrate.upgrade(engine)
    assert counts(engine) == before
    migrate.downgrade(engine, "0001")
    assert counts(engine) == before
    migrate.upgrade(engine)
    assert counts(engine) == before
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
            claim = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'ix_tasks_claim'"
            ).scalar_one()
            assert "priority DESC" in claim


def test_an_upgrade_refused_by_the_data_changes_nothing(engine: Engine) -> None:
    """A 0001 database holding a state 0002 forbids: the upgrade fails whole."""
    migrate.upgrade(engine, "0001")
    seed(engine)
    open_attempt(engine, 3)
    open_attempt(engine, 4)  # two open attempts: allowed by 0001
    with pytest.raises(SchemaError, match="cannot upgrade: rows break a rule"):
        migrate.upgrade(engine)
    assert migrate.current(engine) == "0001"
    assert counts(engine) == {"tasks": 2, "attempts": 6, "transitions": 2}


def test_db_upgrade_names_the_rows_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    engine = make_engine(url, create=True)
    migrate.upgrade(engine, "0001")
    seed(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE tasks SET status = 'paused' WHERE id = 1"))
    engine.dispose()
    project = make_project(tmp_path / "proj", url)
    result = project.run("db", "upgrade")
    assert result.returncode == 78, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot upgrade"), result.stderr
    assert "[SQL" not in result.stderr


def test_rows_orphaned_before_the_upgrade_do_not_stop_it(tmp_path: Path) -> None:
    """The sqlite3 shell has foreign keys off: a task deleted there leaves its
    attempts behind. The upgrade goes on and keeps them as they were."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    engine = make_engine(url, create=True)
    migrate.upgrade(engine, "0001")
    seed(engine)
    engine.dispose()
    with sqlite3.connect(tmp_path / "o.db") as conn:
        conn.execute("DELETE FROM tasks WHERE id = 1")  # foreign keys off: no cascade
    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        assert migrate.current(engine) == schema.HEAD
        assert counts(engine) == {"tasks": 1, "attempts": 4, "transitions": 2}
    finally:
        engine.dispose()
