"""Database faults on PostgreSQL, through the real CLI: a server-side session
killed (`pg_terminate_backend`) while a tick runs an attempt, a schema from
the future, a server that does not answer. Each must end with its
documented status, one `Error:` line and no traceback, and leave the
invariants holding once a clean tick has run."""

from __future__ import annotations

import pytest
from e2e.e2e_support import agent, stage, wait_for
from reliability_report import DB_FAULTS, ProjectFactory
from reliability_support import one_error_line, query, run, violations
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from support import Project

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.lane(DB_FAULTS),
    pytest.mark.parametrize("reliability_backend", [pytest.param("pg", marks=pytest.mark.pg)]),
]


def terminate_sessions(db_url: str) -> int:
    """End every session on the project's database but our own."""
    database = make_url(db_url).database
    admin = create_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :d AND pid <> pg_backend_pid()"
                    ),
                    {"d": database},
                ).all()
            )
    finally:
        admin.dispose()


def gated_project(new_project: ProjectFactory, release: str, pidfile: str) -> Project:
    worker = agent("--pidfile", pidfile, "--wait-file", release)
    verifier = agent("--pass", "--score", "0.9")
    return new_project(stage("research", worker=worker, verifier=verifier, gate=True))


def test_sessions_killed_while_an_attempt_runs(
    reliability_backend: str, new_project: ProjectFactory, tmp_path: object
) -> None:
    """The tick's pooled sessions die while its worker runs; renewing the
    lease or recording the result then meets a dead connection, reconnects
    and retries (issue 17): exit 0, the attempt recorded `passed` once, no
    traceback, no SQL shown, every invariant holding."""
    from pathlib import Path

    folder = Path(str(tmp_path))
    release, pidfile = folder / "release", folder / "worker.pid"
    project = gated_project(new_project, str(release), str(pidfile))
    assert project.cli("add", "t1", "--title", "killed sessions").exit_code == 0
    tick = project.popen("tick")
    try:
        wait_for(pidfile.exists, what="the worker")
        assert terminate_sessions(project.db_url) >= 1
    finally:
        release.touch()
        out, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    assert "Traceback" not in out + err and "Error" not in err, err
    assert violations(project.db_url) == []
    assert project.state("t1") == "research:awaiting_approval"
    rows = query(project.db_url, "SELECT outcome FROM attempts")
    assert rows == [("passed",)]


def test_schema_from_the_future(reliability_backend: str, new_project: ProjectFactory) -> None:
    project = new_project()
    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    for command in (("list",), ("tick",), ("add", "t9", "--title", "x")):
        result = run(project, *command)
        assert result.returncode == 78, (command, result.stderr)
        line = one_error_line(result.stderr)
        assert line is not None and "newer than this orchestrator" in line, result.stderr
    assert query(project.db_url, "SELECT count(*) FROM tasks") == [(0,)]


def test_a_server_that_does_not_answer(
    reliability_backend: str, new_project: ProjectFactory
) -> None:
    """A server that is down is temporary (69), not a configuration problem:
    cron must not read a restart as a broken config (issue 17)."""
    project = new_project()
    # A port on this machine where nothing listens: refused at once.
    project.db_url = make_url(project.db_url).set(port=1).render_as_string(hide_password=False)
    for command in (("list",), ("tick",)):
        result = run(project, *command)
        assert result.returncode == 69, (command, result.returncode, result.stderr)
        line = one_error_line(result.stderr)
        assert line is not None and "cannot reach the database" in line, result.stderr


def test_a_database_the_server_does_not_have(
    reliability_backend: str, new_project: ProjectFactory
) -> None:
    """The URL names a database the server does not know: the URL is wrong,
    a configuration problem (78), not a blip to wait out."""
    project = new_project()
    project.db_url = (
        make_url(project.db_url).set(database="no_such_db").render_as_string(hide_password=False)
    )
    result = run(project, "tick")
    assert result.returncode == 78, (result.returncode, result.stderr)
    assert one_error_line(result.stderr) is not None, result.stderr
