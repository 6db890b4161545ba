"""A PostgreSQL session that ends under a tick: the server's idle-in-transaction
timeout (a host frozen mid-transaction) or a terminated backend.

The translator must call every such error a lost connection (exit 69, one
line, no SQL and no parameters), and a finished attempt whose record was
lost with the session is recorded all the same: the tick reconnects and
retries the transaction.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from support import make_project

from orchestrator.errors import ConnectionLostError
from orchestrator.storage import migrate
from orchestrator.storage.db import db_now, make_engine, write_tx
from orchestrator.storage.driver_errors import translate

pytestmark = [pytest.mark.reliability, pytest.mark.pg]

IDLE_MS = 300


def with_idle_timeout(url: str, ms: int = IDLE_MS) -> str:
    """The URL's own options come after the product's 30 s default: they win."""
    return f"{url}?options={quote(f'-c idle_in_transaction_session_timeout={ms}')}"


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def admin(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def backend_gone(admin: Engine, pid: int) -> Callable[[], bool]:
    def gone() -> bool:
        with admin.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}
            ).scalar_one()
        return int(found) == 0

    return gone


def assert_lost(error: BaseException) -> None:
    assert isinstance(error, ConnectionLostError), repr(error)
    assert error.exit_code == 69
    message = str(error)
    assert message.startswith("lost the connection to the database"), message
    assert "\n" not in message and "SQL" not in message and "SELECT" not in message.upper()


@pytest.mark.parametrize("statement", ["execute", "prepared"])
def test_idle_in_transaction_timeout_is_a_lost_connection(
    pg_url: str, admin: Engine, statement: str
) -> None:
    """psycopg raises IdleInTransactionSessionTimeout as an InternalError;
    on the hot path (`Prepared`) and through `Connection.execute` alike."""
    engine = make_engine(with_idle_timeout(pg_url))
    try:
        with pytest.raises(ConnectionLostError) as caught, write_tx(engine) as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            wait_until(backend_gone(admin, pid), "the server to end the idle session")
            if statement == "prepared":
                db_now(conn)
            else:
                conn.execute(text("SELECT :secret"), {"secret": "parameter-value"})
        assert_lost(caught.value)
        assert "idle-in-transaction" in str(caught.value)
        assert "parameter-value" not in str(caught.value)
    finally:
        engine.dispose()


def test_terminated_backend_is_a_lost_connection(pg_url: str, admin: Engine) -> None:
    engine = make_engine(pg_url)
    try:
        with pytest.raises(ConnectionLostError) as caught, write_tx(engine) as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            wait_until(backend_gone(admin, pid), "the backend to end")
            db_now(conn)
        assert_lost(caught.value)
    finally:
        engine.dispose()


def test_the_product_default_stays_thirty_seconds(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            value = conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar_one()
    finally:
        engine.dispose()
    assert value == "30s"


def test_other_errors_are_not_lost_connections(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            try:
                conn.exec_driver_sql("SELECT 1/0")
            except Exception as exc:
                mapped = translate(exc)
            else:
                raise AssertionError("1/0 did not fail")
    finally:
        engine.dispose()
    assert not isinstance(mapped, ConnectionLostError)


STAGES = """
[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9, \\"next_hint\\": \\"kept\\"}'"]
"""


def process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def idle_in_transaction(admin: Engine, database: str) -> int:
    with admin.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = :d AND state = 'idle in transaction'"
                ),
                {"d": database},
            ).scalar_one()
        )


def test_tick_frozen_inside_the_record_transaction(
    pg_url: str, admin: Engine, tmp_path: Path
) -> None:
    """A tick stops itself inside the transaction that records a passing
    attempt; the server ends its session; thawed, the tick reconnects and
    records the attempt (issue 17): exit 0, the attempt `passed` once, no
    error, nothing kept aside for a later tick."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc to see the tick stopped")
    engine = make_engine(pg_url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    url = with_idle_timeout(pg_url)
    project = make_project(tmp_path / "proj", url, STAGES)
    assert project.cli("add", "t1", "--title", "x").exit_code == 0
    database = make_url(pg_url).database or ""
    tick = project.popen("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "inside_record_tx:stop"})
    try:
        wait_until(lambda: process_state(tick.pid) == "T", "the tick to freeze")
        wait_until(
            lambda: idle_in_transaction(admin, database) == 0, "the server to end its session"
        )
    finally:
        os.kill(tick.pid, signal.SIGCONT)
        out, err = tick.communicate(timeout=60)
    shown = out + err
    assert tick.returncode == 0, shown
    assert "Error" not in err and "Traceback" not in shown, shown
    rows = project.query("SELECT number, outcome, score, late_result FROM attempts ORDER BY id")
    assert rows == [(1, "passed", 0.9, None)]
    assert not (project.dir / "state" / "t1" / "research-001" / "result.json").exists()
    assert project.state("t1") == "research:awaiting_approval"
    claims = project.query("SELECT count(*) FROM transitions WHERE event = 'claim'")
    assert claims == [(1,)]


def test_a_retried_record_does_not_take_another_hosts_close_for_its_own(
    pg_url: str, admin: Engine, tmp_path: Path
) -> None:
    """Host A freezes inside the record of a passing attempt; its lease runs
    out and host B recovers the attempt (`crashed`) once A's session is
    ended. Thawed, A's record meets the lost connection and retries: the
    closed attempt is B's doing, so A keeps its result in `late_result` and
    does not report it as recorded."""
    engine = make_engine(pg_url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    project = make_project(
        tmp_path / "proj", pg_url, STAGES, lease_seconds=3, affinity="any", reconnect_seconds=30
    )
    other = project.dir / "other.toml"
    other.write_text(project.config.read_text().replace("orchestrator.lock", "other.lock"))
    assert project.cli("add", "t1", "--title", "x").exit_code == 0
    database = make_url(pg_url).database or ""
    owner = project.popen(
        "tick",
        extra_env={"ORCHESTRATOR_TEST_FAULT": "inside_record_tx:stop", "ORCHESTRATOR_HOST": "a"},
    )
    try:
        wait_until(lambda: process_state(owner.pid) == "T", "host A to freeze in its record")

        def expired() -> bool:
            with admin.connect() as conn:
                return bool(
                    conn.execute(
                        text("SELECT bool_and(lease_expires_at < now()) FROM attempts")
                    ).scalar_one()
                )

        wait_until(expired, "A's lease to run out")
        rescuer = project.popen(
            "--config", str(other), "tick", extra_env={"ORCHESTRATOR_HOST": "b"}
        )
        wait_until(
            lambda: idle_in_transaction(admin, database) == 1, "A's session idle in its record"
        )
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :d AND state = 'idle in transaction'"
                ),
                {"d": database},
            )
        _, rescued = rescuer.communicate(timeout=60)
        assert rescuer.returncode == 0, rescued
    finally:
        os.kill(owner.pid, signal.SIGCONT)
        out, err = owner.communicate(timeout=60)
    assert "recorded before the connection was lost" not in out + err
    rows = project.query("SELECT number, outcome, late_result FROM attempts ORDER BY number")
    first = rows[0]
    assert first[1] == "crashed"
    assert first[2] is not None and '"outcome": "passed"' in first[2], rows
