"""Shared fixtures: databases on both backends, projects, the CLI.

PostgreSQL: `ORCHESTRATOR_TEST_PG_URL` names a server database where we may
CREATE DATABASE; every test that asks for `db_url` on the `pg` backend gets a
database of its own, dropped afterwards. Without the variable those tests
skip with the reason; with CI=true they fail instead (CI must run them all).
"""

from __future__ import annotations

import compileall
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import BACKENDS, REPORTS, new_reports
from support import Project, make_project, pg_server_url


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
    name = f"orch_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty database on each backend (SQLite file; PostgreSQL database)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'orchestrator.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def migrated_url(db_url: str) -> str:
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    engine = make_engine(db_url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    return db_url


@pytest.fixture
def project(tmp_path: Path, migrated_url: str) -> Project:
    """A project folder with a config (two stages, the first gated) and a
    migrated database on the backend under test."""
    return make_project(tmp_path / "proj", migrated_url)
