"""Alembic migrations on SQLite and PostgreSQL: the scripts match the Core
tables' metadata (`alembic check`), round-trip down to base and back, work
from the repository root with Alembic's own command line, and create the
contract's views."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from orchestrator.errors import SchemaError
from orchestrator.storage import migrate, schema
from orchestrator.storage.db import make_engine
from orchestrator.storage.tables import metadata

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLES = {"tasks", "attempts", "transitions", "ticks"}
VIEW_COLUMNS = {
    "task_states": [
        "task_id",
        "task",
        "title",
        "pipeline",
        "priority",
        "stage",
        "status",
        "state",
        "halt_reason",
        "attempts",
        "score",
        "created_at",
        "updated_at",
    ],
    "score_history": [
        "task",
        "task_id",
        "stage",
        "attempt",
        "run",
        "score",
        "pass",
        "best_so_far",
        "at",
    ],
    "timeline": [
        "id",
        "task",
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
    ],
    "costs": [
        "task",
        "task_id",
        "stage",
        "attempts",
        "cost_usd",
        "input_tokens",
        "output_tokens",
        "turns",
        "duration_ms",
    ],
}


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url, create=True)
    yield engine
    engine.dispose()


def drift(engine: Engine) -> list[object]:
    """What `alembic check` would report: the Core tables versus the migrated schema."""
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "render_as_batch": True}
        )
        return list(compare_metadata(context, metadata))


def names(engine: Engine) -> tuple[set[str], set[str]]:
    inspector = inspect(engine)
    return set(inspector.get_table_names()), set(inspector.get_view_names())


def test_upgrade_check_downgrade_upgrade(engine: Engine) -> None:
    assert migrate.current(engine) is None
    migrate.upgrade(engine)
    assert migrate.current(engine) == schema.HEAD
    assert drift(engine) == []
    tables, views = names(engine)
    assert tables >= TABLES
    assert views == set(VIEW_COLUMNS)

    migrate.downgrade(engine, "base")
    assert migrate.current(engine) is None
    tables, views = names(engine)
    assert tables & TABLES == set()
    assert views == set()

    migrate.upgrade(engine)
    assert migrate.current(engine) == schema.HEAD
    assert drift(engine) == []
    migrate.upgrade(engine)  # at head already: a no-op
    assert migrate.current(engine) == schema.HEAD


def test_sqlite_migration_keeps_foreign_keys_and_integrity(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'o.db'}", create=True)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
    engine.dispose()


def test_schema_constants_match_the_scripts() -> None:
    revisions = migrate.script_revisions()
    assert tuple(revisions) == schema.REVISIONS
    assert revisions[-1] == schema.HEAD
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert script.get_heads() == [schema.HEAD]  # one head, no branches
    assert migrate.migrations_dir() == REPO_ROOT / "migrations"


def test_alembic_command_line_from_the_repository_root(db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_DB_URL"] = db_url

    def alembic(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "alembic", *args],
            check=False,
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    upgraded = alembic("upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    checked = alembic("check")
    assert checked.returncode == 0, checked.stderr
    assert "No new upgrade operations detected" in checked.stdout + checked.stderr
    engine = make_engine(db_url)
    try:
        assert migrate.current(engine) == schema.HEAD
        assert names(engine)[1] == set(VIEW_COLUMNS)
    finally:
        engine.dispose()


def test_views_have_the_same_columns_on_every_backend(engine: Engine) -> None:
    migrate.upgrade(engine)
    with engine.connect() as conn:
        for view, columns in VIEW_COLUMNS.items():
            result = conn.execute(text(f"SELECT * FROM {view}"))
            assert list(result.keys()) == columns, view
            assert result.all() == []


def test_upgrade_and_downgrade_refuse_a_newer_schema(engine: Engine) -> None:
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffffffff'"))
    for call in (lambda: migrate.upgrade(engine), lambda: migrate.downgrade(engine, "base")):
        with pytest.raises(SchemaError, match=r"ffffffffffff is newer than this orchestrator"):
            call()
    assert migrate.current(engine) == "ffffffffffff"
    assert names(engine)[0] >= TABLES
