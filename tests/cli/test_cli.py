"""The CLI refuses a database that is missing, empty, behind or ahead of the
code (exit 78, naming `orchestrator db upgrade` or the newer schema), for
every command that reads or writes tasks, and writes nothing when it does."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import Result
from sqlalchemy import inspect, text
from support import Project, check_invariants, make_project

from orchestrator.storage import migrate, schema
from orchestrator.storage.db import make_engine

# Every command that needs the database (run, init, demo, doctor and verdict
# are not here: run loops, init/demo create, doctor reports, verdict needs none).
COMMANDS: list[tuple[str, ...]] = [
    ("add", "t9", "--title", "T"),
    ("list",),
    ("list", "--json"),
    ("show", "t1"),
    ("approve", "t1"),
    ("reject", "t1", "--note", "n"),
    ("halt", "t1"),
    ("resume", "t1"),
    ("cancel", "t1"),
    ("history",),
    ("scores", "t1"),
    ("sql", "SELECT 1"),
    ("tick",),
]
UPGRADE_HINT = r"run `orchestrator db upgrade`"


def refuse_all(project: Project, commands: list[tuple[str, ...]], match: str) -> None:
    for args in commands:
        result: Result = project.cli(*args)
        assert result.exit_code == 78, (args, result.exit_code, result.output)
        assert result.stdout == "", (args, result.stdout)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, (args, lines)
        assert lines[0].startswith("Error: "), (args, lines)
        assert re.search(match, lines[0]), (args, match, lines[0])


def stamp(url: str, revision: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    engine.dispose()


def test_a_newer_schema_is_refused_by_every_command(project: Project) -> None:
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    stamp(project.db_url, "ffffffffffff")
    before = project.counts()
    refuse_all(
        project,
        [*COMMANDS, ("db", "upgrade"), ("db", "downgrade", "base")],
        r"schema ffffffffffff is newer than this orchestrator",
    )
    assert project.counts() == before
    current = project.cli("db", "current")  # a diagnostic: it shows, it does not refuse
    assert current.exit_code == 0
    assert "ffffffffffff" in current.stdout
    stamp(project.db_url, schema.HEAD)
    assert project.cli("list").exit_code == 0
    assert check_invariants(project.db_url) == []


def test_a_schema_behind_the_code_is_refused(project: Project) -> None:
    downgraded = project.cli("db", "downgrade", "base")
    assert downgraded.exit_code == 0, downgraded.output
    refuse_all(project, COMMANDS, rf"database is empty .*{UPGRADE_HINT}")
    upgraded = project.cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert f"database at {schema.HEAD}" in upgraded.stdout
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    assert check_invariants(project.db_url) == []


def test_an_older_revision_is_refused(project: Project) -> None:
    downgraded = project.cli("db", "downgrade", "0001")
    assert downgraded.exit_code == 0, downgraded.output
    refuse_all(
        project, COMMANDS, rf"schema is at 0001, this code needs {schema.HEAD}; {UPGRADE_HINT}"
    )


def test_an_empty_database_is_refused(backend: str, db_url: str, tmp_path: Path) -> None:
    """A 0-byte SQLite file (a failed copy) or a PostgreSQL database without
    our tables: 78 and nothing created, never "no tasks"."""
    path = tmp_path / "orchestrator.db"
    if backend == "sqlite":
        path.touch()
    project = make_project(tmp_path / "proj", db_url)
    refuse_all(project, COMMANDS, rf"database is empty .*{UPGRADE_HINT}")
    if backend == "sqlite":
        assert path.stat().st_size == 0
    engine = make_engine(db_url)
    try:
        assert migrate.current(engine) is None
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "data" / "orchestrator.db"
    project = make_project(tmp_path / "proj", f"sqlite:///{path}")
    refuse_all(
        project,
        [*COMMANDS, ("db", "current"), ("db", "downgrade", "base")],
        rf"database not found at {re.escape(str(path))}.*orchestrator db upgrade",
    )
    assert not path.parent.exists()
    created = project.cli("db", "upgrade")
    assert created.exit_code == 0, created.output
    assert path.exists()
    assert project.cli("list", "--json").stdout.strip() == "[]"


def test_errors_are_one_line_and_verbose_adds_the_cause(project: Project) -> None:
    stamp(project.db_url, "ffffffffffff")
    quiet = project.cli("list")
    assert quiet.stderr.count("\n") == 1
    verbose = project.cli("-v", "list")
    assert verbose.exit_code == 78
    assert verbose.stderr.startswith("Error: ")
    assert "Traceback" not in verbose.output


def test_usage_errors_exit_2_and_write_nothing(project: Project) -> None:
    before = project.counts()
    for args in (
        ("add", "-rf", "--title", "T"),  # click reads -rf as options: a usage error
        ("add", "t1"),  # no --title
        ("add", "t1", "--title", "T", "--body", "b", "--body-file", __file__),
        ("reject", "t1"),  # no --note
        ("approve",),
        ("nonsense",),
    ):
        result = project.cli(*args)
        assert result.exit_code == 2, (args, result.output)
    assert project.counts() == before
