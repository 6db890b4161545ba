"""Which commits wake `run` on SQLite (`orchestrator.tick.wake`), on a real
database: a gate approved or a task made ready since the tick began wakes
it; what the tick itself left ready does not (`run --max-tasks` paces)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from support import make_project

from orchestrator.api.project import Project as Library
from orchestrator.tick.wake import Wake


@pytest.fixture
def library(tmp_path: Path, template_db: Path) -> Library:
    shutil.copyfile(template_db, tmp_path / "orchestrator.db")
    url = f"sqlite:///{tmp_path / 'orchestrator.db'}"
    project = make_project(tmp_path / "proj", url)
    opened = Library.open(project.config, db=url)
    opened.add("t1", "T1")
    return opened


# An interval no test outlives: a wake is told from a slept-out interval by
# what `wait` returns, never by how long it took. PATIENCE is the safety net
# for a wake that never comes: then a timer sets `stop`, and the test fails.
FOREVER = 3600.0
PATIENCE = 120.0


def _wait(wake: Wake, stop: threading.Event) -> bool:
    """`wake.wait(stop, FOREVER)` in this thread (SQLite's handle is this
    thread's), which must end by itself, before the safety net stops it."""
    late = threading.Event()

    def give_up() -> None:
        late.set()
        stop.set()

    net = threading.Timer(PATIENCE, give_up)
    net.start()
    try:
        woken = wake.wait(stop, FOREVER)
    finally:
        net.cancel()
    assert not late.is_set(), "the wait ended only when the safety net stopped it"
    return woken


def _gate(library: Library, slug: str) -> None:
    """Put `slug` at the first stage's gate, as a tick would."""
    path = library.engine.url.database
    assert path is not None
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "UPDATE tasks SET status = 'awaiting_approval', version = version + 1 WHERE slug = ?",
        (slug,),
    )
    conn.close()


def test_what_wakes_run_and_what_does_not(library: Library) -> None:
    wake = Wake()
    wake.follow(str(library.engine.url))
    stop = threading.Event()
    try:
        wake.arm()  # t1 is ready when the tick begins ...
        wake.settled()  # ... and when it ends (left: --max-tasks, say)
        assert wake.wait(stop, 0.3) is False

        wake.arm()
        library.add("t2", "T2")  # new work after the tick's last claim...
        wake.settled()  # ... is seen at its end: the tick's own, paced
        assert wake.wait(stop, 0.3) is False

        wake.arm()
        wake.settled()
        library.add("t3", "T3")  # added after the tick ended: wakes
        assert _wait(wake, stop) is True  # woken, not the interval's end

        _gate(library, "t1")
        wake.arm()
        library.approve("t1")  # approved while the tick ran, after its last look
        wake.settled()
        assert _wait(wake, stop) is True

        wake.arm()
        wake.settled()
        stop.set()  # a signal ends the wait at once
        assert _wait(wake, stop) is False  # ended, with an hour of interval left
    finally:
        wake.close()
        library.close()


def test_a_database_that_is_not_there_sleeps_out_the_interval(tmp_path: Path) -> None:
    said: list[str] = []
    wake = Wake(warn=said.append)
    wake.follow(f"sqlite:///{tmp_path / 'missing.db'}")
    wake.arm()
    wake.settled()
    started = time.monotonic()
    assert wake.wait(threading.Event(), 0.2) is False
    assert time.monotonic() - started >= 0.2  # a floor: load only adds to it
    assert said and "no wake on approval" in said[0]
    assert not (tmp_path / "missing.db").exists()
