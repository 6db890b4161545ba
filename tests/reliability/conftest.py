"""Fixtures of the reliability suite, and the `reliability report` plugin.

Tests record what they survived in the session-scoped `report`; at the end of
the session `pytest_terminal_summary` prints one block with the figures
(cases run and survived per lane, the sweep's and the soak's counts).
Parametrised fault cases count themselves: mark a test
`@pytest.mark.lane("database faults")` and each of its items adds one case,
passed or not. The statement sweep and the kill soak record finer counts
themselves. With `ORCHESTRATOR_RELIABILITY_JSON=FILE` the figures are also
appended to FILE as one JSON line (for a dashboard).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import ReliabilityReport
from reliability_support import GATED, PG_DATABASES
from support import Project, make_project, pg_server_url

_REPORTS = pytest.StashKey[dict[str, ReliabilityReport]]()
BACKENDS = {"sqlite": "SQLite", "pg": "PostgreSQL"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lane(name): count each item of this test as one case of a report lane"
    )
    config.stash[_REPORTS] = {name: ReliabilityReport() for name in BACKENDS}


def _backend(item: Any) -> str:
    """The backend an item runs on: its `reliability_backend` or `backend`
    parameter, else SQLite (the lanes written for its files)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return str(params.get("reliability_backend", params.get("backend", "sqlite")))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ReliabilityReport:
    """The report of the backend this test runs on."""
    return request.config.stash[_REPORTS][_backend(request.node)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    result = yield
    marker = item.get_closest_marker("lane")
    if marker is None or result.skipped:
        return result
    counted = result.when == "call" or (result.when == "setup" and result.failed)
    if counted:
        item.config.stash[_REPORTS][_backend(item)].count(str(marker.args[0]), result.passed)
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for backend, data in config.stash.get(_REPORTS, {}).items():
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


# -- projects -------------------------------------------------------------------------


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


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def reliability_backend(request: pytest.FixtureRequest) -> str:
    """The lanes that take this fixture run on both backends."""
    return str(request.param)


@pytest.fixture
def new_project(
    tmp_path: Path, template_db: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Project]]:
    """`new_project(stages=GATED, name="proj", **orchestrator_settings)`: a project
    folder with its own copy of the migrated database: SQLite, or PostgreSQL
    when the test also asks for `reliability_backend` and it is "pg"."""
    backend = "sqlite"
    if "reliability_backend" in request.fixturenames:
        backend = str(request.getfixturevalue("reliability_backend"))
    template = str(request.getfixturevalue("template_pg")) if backend == "pg" else None
    made = 0

    def make(stages: str = GATED, name: str | None = None, **settings: Any) -> Project:
        nonlocal made
        made += 1
        folder = tmp_path / (name or f"proj{made}")
        folder.mkdir(parents=True)
        if template is not None:
            return make_project(folder, PG_DATABASES.copy(template), stages, **settings)
        db = folder / "orchestrator.db"
        shutil.copyfile(template_db, db)
        return make_project(folder, f"sqlite:///{db}", stages, **settings)

    try:
        yield make
    finally:
        PG_DATABASES.drop_all()
