"""The SQLite engine: WAL with synchronous=FULL, foreign keys, a busy
timeout; every write transaction begins IMMEDIATE, so concurrent
read-then-write transactions queue instead of failing with
SQLITE_BUSY_SNAPSHOT; a missing file is refused, never created."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import PASS, stage
from sqlalchemy import Engine, event, insert, select, text
from support import Project, check_invariants, make_project

from orchestrator.errors import SchemaError
from orchestrator.storage import db, driver_errors, migrate, repo
from orchestrator.storage.db import make_engine, read_tx, write_tx

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def migrated(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = make_engine(url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    yield migrated(tmp_path / "orchestrator.db")


def test_pragmas(sqlite_url: str) -> None:
    for timeout, expected in ((30.0, 30000), (2.5, 2500)):
        engine = make_engine(sqlite_url, busy_timeout=timeout)
        with read_tx(engine) as conn:
            pragma = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar_one()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
        engine.dispose()
        assert pragma == {
            "journal_mode": "wal",
            "synchronous": 2,  # FULL
            "foreign_keys": 1,
            "busy_timeout": expected,
        }


def test_a_missing_file_is_refused_not_created(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "missing.db"
    with pytest.raises(SchemaError, match=r"database not found at .*orchestrator db upgrade"):
        make_engine(f"sqlite:///{path}")
    assert not path.parent.exists()


@pytest.mark.parametrize("folder", ["with space", "hash#mark", "question?mark", "per%41cent"])
def test_paths_with_uri_characters(tmp_path: Path, folder: str) -> None:
    """The existing file is opened as a `file:` URI; `?`, `#` and `%` in the
    path must not make SQLite open (and create) some other file."""
    from orchestrator.config import resolve_database_url

    (tmp_path / folder).mkdir()
    url = resolve_database_url("sqlite:///o.db", tmp_path / folder)
    engine = make_engine(url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    engine = make_engine(url)
    try:
        assert migrate.current(engine) == migrate.HEAD
    finally:
        engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]


class Recorder:
    """Per connection: the kind of the open transaction, and every write
    statement with the BEGIN it ran under. It listens on the driver (SQLite's
    trace callback), so it sees what SQLite runs, whichever way it came."""

    def __init__(self) -> None:
        self.current: dict[int, str | None] = {}
        self.writes: list[tuple[str | None, str]] = []
        self.begins: list[str] = []

    def attach(self, engine: Engine) -> Engine:
        event.listen(engine, "connect", self._connected)
        return engine

    def _connected(self, dbapi_conn: Any, _record: Any) -> None:
        key = id(dbapi_conn)
        dbapi_conn.set_trace_callback(lambda statement: self._statement(key, statement))

    def _statement(self, key: int, statement: str) -> None:
        words = statement.strip().upper()
        if words.startswith("BEGIN"):
            self.current[key] = words
            self.begins.append(words)
        elif words.startswith(("COMMIT", "ROLLBACK", "END")):
            self.current[key] = None
        elif words.startswith(WRITES):
            self.writes.append((self.current.get(key), words.split("\n")[0][:60]))


def test_every_write_transaction_begins_immediate(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    real = db.make_engine

    def recording(*args: Any, **kwargs: Any) -> Engine:
        return recorder.attach(real(*args, **kwargs))

    monkeypatch.setattr(db, "make_engine", recording)
    project = make_project(tmp_path / "proj", sqlite_url)
    commands = [
        ("add", "t1", "--title", "one"),
        ("add", "t2", "--title", "two"),
        ("add", "t3", "--title", "three"),
        ("tick",),
        ("approve", "t1", "--by", "a"),
        ("reject", "t2", "--note", "again"),
        ("halt", "t3"),
        ("resume", "t3"),
        ("tick",),
        ("cancel", "t3"),
        ("list", "--json"),
        ("show", "t1", "--json"),
        ("history", "--json"),
        ("sql", "SELECT count(*) FROM tasks"),
    ]
    for args in commands:
        result = project.cli(*args)
        assert result.exit_code == 0, (args, result.output)
    assert project.state("t1") == "complete"
    assert check_invariants(project.db_url) == []
    kinds = {kind for kind, _ in recorder.writes}
    assert kinds == {"BEGIN IMMEDIATE"}, [w for w in recorder.writes if w[0] != "BEGIN IMMEDIATE"]
    statements = {statement.split()[0] for _, statement in recorder.writes}
    assert statements >= {"INSERT", "UPDATE"}
    assert len(recorder.writes) >= 20
    assert "BEGIN" in recorder.begins  # read-only transactions stay deferred


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_write_transaction_per_attempt_with_one_job(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, jobs: str
) -> None:
    """`--jobs 1` records an attempt and claims the next in one transaction:
    the first claim, one per attempt, a last look that finds nothing, the
    tick's close; and one per attempt as its worker starts, noting the
    workspace's commit (the gate's base). With more jobs, the claims run
    apart from the records."""
    recorder = Recorder()
    real = db.make_engine
    monkeypatch.setattr(db, "make_engine", lambda *a, **k: recorder.attach(real(*a, **k)))
    project = make_project(
        tmp_path / "proj", sqlite_url, stage("only", worker=["true"], verifier=PASS)
    )
    for slug in ("t1", "t2", "t3", "t4"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    recorder.begins.clear()
    result = project.cli("tick", "--jobs", jobs)
    assert result.exit_code == 0, result.output
    assert [project.state(s) for s in ("t1", "t2", "t3", "t4")] == ["complete"] * 4
    writes = recorder.begins.count("BEGIN IMMEDIATE")
    if jobs == "1":
        assert writes == 2 * 4 + 3
    else:  # how many claims find nothing depends on how the attempts overlap
        assert writes >= 3 * 4 + 1
    assert check_invariants(project.db_url, allow_running=False) == []


def test_four_concurrent_read_then_write_transactions_all_succeed(sqlite_url: str) -> None:
    """With a deferred BEGIN, 3 of 4 would fail at once with
    SQLITE_BUSY_SNAPSHOT; through write_tx they queue and each sees the last."""
    engine = make_engine(sqlite_url, busy_timeout=20)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait()
            with write_tx(engine) as conn:
                seen = conn.execute(select(repo.ticks.c.id)).all()
                time.sleep(0.05)  # hold the read while the others try to start
                conn.execute(
                    insert(repo.ticks).values(
                        host=f"seen-{len(seen)}",
                        pid=1,
                        started_at=datetime.now(UTC),
                        claimed=0,
                        recovered=0,
                        advanced=0,
                    )
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with read_tx(engine) as conn:
        hosts = sorted(conn.execute(select(repo.ticks.c.host)).scalars())
    engine.dispose()
    assert hosts == ["seen-0", "seen-1", "seen-2", "seen-3"]  # serialised, none lost


def test_a_deferred_read_then_write_is_what_immediate_prevents(tmp_path: Path) -> None:
    """The hazard the rule guards against, shown directly with sqlite3.

    SQLite refuses at once with SQLITE_BUSY_SNAPSHOT (a stale snapshot cannot
    become a writer; the busy handler is never asked), where a wait that
    ran out would be a plain SQLITE_BUSY: the code says which, no stopwatch."""
    path = tmp_path / "o.db"
    migrated(path)
    reader = sqlite3.connect(path, isolation_level=None, timeout=5)
    writer = sqlite3.connect(path, isolation_level=None, timeout=5)
    row = "INSERT INTO ticks (host, pid, started_at, claimed, recovered, advanced) "
    row += "VALUES ('h', 1, '2026-01-01 00:00:00', 0, 0, 0)"
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM ticks").fetchone()
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(row)
        writer.execute("COMMIT")
        with pytest.raises(sqlite3.OperationalError, match="locked") as refused:
            reader.execute(row)
        assert refused.value.sqlite_errorname == "SQLITE_BUSY_SNAPSHOT"
    finally:
        reader.close()
        writer.close()


def test_a_writer_held_past_the_busy_timeout_exits_69(tmp_path: Path, sqlite_url: str) -> None:
    project: Project = make_project(tmp_path / "proj", sqlite_url, busy_timeout=0.3)
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    before = project.counts()
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        for args in (("halt", "t1"), ("add", "t2", "--title", "T")):
            result = project.cli(*args)
            assert result.exit_code == 69, (args, result.output)
            assert result.stderr.startswith("Error: database busy")
            assert len(result.stderr.splitlines()) == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert project.counts() == before
    assert project.cli("halt", "t1").exit_code == 0
    assert check_invariants(project.db_url) == []


def test_read_tx_does_not_take_the_write_lock(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url, busy_timeout=0.2)
    try:
        with write_tx(engine) as writing:
            writing.execute(text("SELECT 1"))
            with read_tx(engine) as reading:  # would wait for the writer if IMMEDIATE
                assert reading.execute(text("SELECT count(*) FROM tasks")).scalar_one() == 0
    finally:
        engine.dispose()


def test_the_tick_says_nothing_while_it_holds_the_write_lock(tmp_path: Path) -> None:
    """Every line the tick prints (an attempt recorded, a stage the config
    lost halted) comes after its transaction committed: a writer elsewhere
    can take the lock at that very moment."""
    from orchestrator.config import load_settings
    from orchestrator.tick import Ticker

    url = migrated(tmp_path / "orchestrator.db")
    project = make_project(tmp_path / "proj", url, stage("only", worker=["true"], verifier=PASS))
    for slug in ("t1", "t2", "t3"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    with sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None) as conn:
        conn.execute("UPDATE tasks SET stage = 'gone' WHERE slug = 't2'")
    said: list[tuple[str, str | None]] = []

    def probe(line: str) -> None:
        other = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            said.append((line, None))
        except sqlite3.OperationalError as exc:
            said.append((line, str(exc)))
        finally:
            other.close()

    settings = load_settings(config=str(project.config), db_url=url, require_config=True)
    engine = make_engine(url)
    try:
        Ticker(settings, engine, say=probe).tick()
    finally:
        engine.dispose()
    assert [line for line, _ in said if "halted" in line] == ["t2: halted (unknown_stage 'gone')"]
    assert len(said) == 3, said
    assert [error for _, error in said] == [None, None, None], said


@pytest.mark.pg
def test_the_postgresql_pool_fits_the_jobs(pg_url: str) -> None:
    engine = make_engine(pg_url, jobs=8)
    try:
        assert engine.pool.size() == 10  # type: ignore[attr-defined]
    finally:
        engine.dispose()
    small = make_engine(pg_url)
    try:
        assert small.pool.size() == 5  # type: ignore[attr-defined]
    finally:
        small.dispose()


def test_a_pool_timeout_is_database_busy() -> None:
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    from orchestrator.errors import DatabaseBusyError

    with (
        pytest.raises(DatabaseBusyError, match="no free connection"),
        driver_errors.translate_errors(),
    ):
        raise PoolTimeoutError("QueuePool limit of size 5 overflow 10 reached")
