"""Fixtures of the reliability suite, and the `reliability report` plugin.

Tests record what they survived in the session-scoped `report`; at the end of
the session `pytest_terminal_summary` prints one block with the figures of
RELIABILITY.md (c). Parametrised fault cases count themselves: mark a test
`@pytest.mark.lane("database faults")` and each of its items adds one case,
passed or not. The statement sweep and the kill soak record finer counts
themselves. With `ORCHESTRATOR_RELIABILITY_JSON=FILE` the figures are also
appended to FILE as one JSON line (for a dashboard).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import ReliabilityReport
from reliability_support import GATED
from support import Project, make_project

_REPORT = pytest.StashKey[ReliabilityReport]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lane(name): count each item of this test as one case of a report lane"
    )
    config.stash[_REPORT] = ReliabilityReport()


@pytest.fixture(scope="session")
def report(pytestconfig: pytest.Config) -> ReliabilityReport:
    return pytestconfig.stash[_REPORT]


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
        item.config.stash[_REPORT].count(str(marker.args[0]), result.passed)
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    data = config.stash.get(_REPORT, None)
    if data is None or not data.used:
        return
    terminalreporter.write_sep("=", "reliability report")
    for line in data.lines():
        terminalreporter.write_line(line)
    target = os.environ.get("ORCHESTRATOR_RELIABILITY_JSON")
    if target:
        with Path(target).open("a") as out:
            out.write(json.dumps(data.as_json()) + "\n")


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


@pytest.fixture
def new_project(tmp_path: Path, template_db: Path) -> Iterator[Callable[..., Project]]:
    """`new_project(stages=GATED, name="proj", **orchestrator_settings)`: a project
    folder with its own copy of the migrated SQLite database."""
    made = 0

    def make(stages: str = GATED, name: str | None = None, **settings: Any) -> Project:
        nonlocal made
        made += 1
        folder = tmp_path / (name or f"proj{made}")
        folder.mkdir(parents=True)
        db = folder / "orchestrator.db"
        shutil.copyfile(template_db, db)
        return make_project(folder, f"sqlite:///{db}", stages, **settings)

    yield make
