"""A first end-to-end path through the CLI on both backends."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import Project, check_invariants, cli_json


def test_gate_approve_complete(project: Project) -> None:
    assert project.cli("add", "t1", "--title", "First").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "research:awaiting_approval"
    assert project.cli("approve", "t1").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "complete"
    rows = cli_json(project.cli("list", "--json"))
    assert rows[0]["state"] == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


# What a SQLite tick imports: cron pays each module 1,440 times a day.
HEAVY = ("sqlalchemy.orm", "alembic", "sqlalchemy.dialects.postgresql")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_sqlite_tick_that_runs_an_attempt_imports_no_orm_alembic_or_postgresql(
    project: Project,
) -> None:
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    code = (
        "import sys\n"
        "from orchestrator.__main__ import main\n"
        "sys.argv = ['orchestrator', 'tick', '--jobs', '1']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print('heavy:', *[m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "attempt 1" in ran.stdout  # it did run an attempt, not the idle answer
    assert ran.stdout.strip().splitlines()[-1] == "heavy:"
