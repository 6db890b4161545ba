"""Shared fixtures: databases on both backends, projects, the CLI.

PostgreSQL: `ORCHESTRATOR_TEST_PG_URL` names a server database where we may
CREATE DATABASE; every test that asks for `db_url` on the `pg` backend gets a
database of its own, dropped afterwards. Without the variable those tests
skip with the reason; with CI=true they fail instead (CI must run them all).

A migrated database (`migrated_url`, `project`) is a copy of a template each
test process migrates once: a migration costs about a second, a copy a
millisecond (a file copy on SQLite, `CREATE DATABASE ... TEMPLATE` on
PostgreSQL). Tests of migrating itself start from `db_url`.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import BACKENDS, REPORTS, new_reports
from support import PG_DATABASES, Project, make_project, pg_server_url


def pytest_configure(config: pytest.Config) -> None:
    config.stash[REPORTS] = new_reports()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's bytecode once: the suite starts hundreds of
    `orchestrator` processes, and with PYTHONDONTWRITEBYTECODE set (as on CI
    machines) each would compile every module again, ~60 ms apiece."""
    import orchestrator

    compileall.compile_dir(Path(orchestrator.__file__).parent, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow lanes (soaks, sweeps) first: xdist hands tests out in this
    order, and a long test started last would leave the other workers idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Wait for the copied PostgreSQL databases still being dropped."""
    dropped_badly = PG_DATABASES.wait()
    assert not dropped_badly, f"test databases not dropped: {dropped_badly}"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: add a finished worker's reliability figures."""
    sent = getattr(node, "workeroutput", {}).get("reliability", {})
    for backend, data in sent.items():
        node.config.stash[REPORTS][backend].merge(data)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The reliability report, one block per backend the run exercised. With
    `ORCHESTRATOR_RELIABILITY_JSON=FILE` the figures are also appended to FILE
    as one JSON line per backend (for a dashboard)."""
    if hasattr(config, "workerinput"):
        return
    for backend, data in config.stash[REPORTS].items():
        if not data.used:
            continue
        title = f"reliability report on {BACKENDS[backend]}"
        terminalreporter.write_sep("=", title)
        for line in [title, *data.lines()[1:]]:
            terminalreporter.write_line(line)
        target = os.environ.get("ORCHESTRATOR_RELIABILITY_JSON")
        if target:
            with Path(target).open("a") as out:
                out.write(json.dumps({"backend": backend, **data.as_json()}) + "\n")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = make_url(pg_server_url())
    PG_DATABASES.server = server.render_as_string(hide_password=False)
    name = f"orch_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    PG_DATABASES.made.append(name)
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        PG_DATABASES.drop_all()  # in the background, as for the copies


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty database on each backend (SQLite file; PostgreSQL database)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'orchestrator.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database, built once and copied by each test (migrating
    costs far more than copying)."""
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    path = tmp_path_factory.mktemp("template") / "orchestrator.db"
    engine = make_engine(f"sqlite:///{path}", create=True)
    migrate.upgrade(engine)
    engine.dispose()  # the last close checkpoints the WAL into the file
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path


@pytest.fixture(scope="session")
def template_pg() -> Iterator[str]:
    """A migrated PostgreSQL database, built once and copied by each test."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    server = make_url(pg_server_url())
    PG_DATABASES.server = server.render_as_string(hide_password=False)
    name = f"orch_tpl_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = server.set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def migrated_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database at the schema's head on the backend under test (where
    `db_url` would be on SQLite): a copy of the session's template."""
    if backend == "sqlite":
        path = tmp_path / "orchestrator.db"
        shutil.copyfile(request.getfixturevalue("template_db"), path)
        yield f"sqlite:///{path}"
        return
    url = PG_DATABASES.copy(str(request.getfixturevalue("template_pg")))
    try:
        yield url
    finally:
        PG_DATABASES.drop_all()


@pytest.fixture
def migrated_pg(template_pg: str) -> Iterator[str]:
    """A PostgreSQL database at the schema's head for a test that runs only
    there (several hosts on one database): a copy of the session's template."""
    url = PG_DATABASES.copy(template_pg)
    try:
        yield url
    finally:
        PG_DATABASES.drop_all()


@pytest.fixture
def project(tmp_path: Path, migrated_url: str) -> Project:
    """A project folder with a config (two stages, the first gated) and a
    migrated database on the backend under test."""
    return make_project(tmp_path / "proj", migrated_url)
