"""Fixtures of the reliability suite, and the counting half of the
`reliability report` (the root conftest prints it).

Tests record what they survived in the `report` of their backend; at the end
of the session the root conftest prints one block per backend. Parametrised
fault cases count themselves: mark a test `@pytest.mark.lane("database
faults")` and each of its items adds one case, passed or not. The statement
sweep and the kill soak record finer counts themselves. Under pytest-xdist a
worker hands its figures to the controller when it finishes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import REPORTS, ReliabilityReport, new_reports
from reliability_support import GATED
from support import PG_DATABASES, Project, make_project


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lane(name): count each item of this test as one case of a report lane"
    )
    if REPORTS not in config.stash:
        config.stash[REPORTS] = new_reports()


def _backend(item: Any) -> str:
    """The backend an item runs on: its `reliability_backend` or `backend`
    parameter, else SQLite (the lanes written for its files)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return str(params.get("reliability_backend", params.get("backend", "sqlite")))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ReliabilityReport:
    """The report of the backend this test runs on."""
    return request.config.stash[REPORTS][_backend(request.node)]


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
        item.config.stash[REPORTS][_backend(item)].count(str(marker.args[0]), result.passed)
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker sends its figures to the controller, which prints them."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        reports = session.config.stash[REPORTS]
        output["reliability"] = {name: data.transport() for name, data in reports.items()}


# -- projects -------------------------------------------------------------------------


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
