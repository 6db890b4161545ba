"""Fault injection for the reliability tests.

Product code calls `fault_point("after_claim_commit")`; it does nothing unless
`ORCHESTRATOR_TEST_FAULT` names that point. The action after the colon is
`exit` (default: `os._exit(137)`, no finalisers, like SIGKILL), `raise`
(an exception), `term` (SIGTERM to ourselves) or `stop` (SIGSTOP to
ourselves, once per process). Read once at import: a tick is one process, and the check must
cost nothing on the hot path.

`ORCHESTRATOR_TEST_CRASH_AFTER_STMT=n` makes the process `os._exit(137)`
right after its n-th SQL statement (the SQLite "fault after N operations"
loop, applied to our statements); `install_statement_crash` hooks it onto
an engine, and `Prepared` statements count themselves.

`ORCHESTRATOR_TEST_DROP_AFTER_STMT=n` instead has the server end (with
`pg_terminate_backend`, from a second session) the PostgreSQL session that
ran the n-th statement, so the next statement on it meets a lost connection.
`ORCHESTRATOR_TEST_LOSE_COMMIT=n` commits the n-th transaction, ends its
session, then reports the commit as lost: the case where the first try of a
transaction did commit but its client never heard so. Both fire once.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

_SPEC = os.environ.get("ORCHESTRATOR_TEST_FAULT", "")
_CRASH_AFTER = int(os.environ.get("ORCHESTRATOR_TEST_CRASH_AFTER_STMT", "0") or 0)
_DROP_AFTER = int(os.environ.get("ORCHESTRATOR_TEST_DROP_AFTER_STMT", "0") or 0)
_LOSE_COMMIT = int(os.environ.get("ORCHESTRATOR_TEST_LOSE_COMMIT", "0") or 0)
_COUNTING = _CRASH_AFTER > 0 or _DROP_AFTER > 0
_POINT, _, _ACTION = _SPEC.partition(":")


_stopped = False


class InjectedFault(RuntimeError):
    """Raised at a crash point whose action is `raise`."""


def fault_point(name: str) -> None:
    if not _POINT or name != _POINT:
        return
    if _ACTION == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if _ACTION == "term":
        # As if SIGTERM arrived right here: the handler sets the stop event.
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _ACTION == "stop":
        # Once: the test does something to the frozen process and thaws it,
        # and a retry that passes the same point must then go on.
        global _stopped  # noqa: PLW0603 - one process, one stop, by design
        if _stopped:
            return
        _stopped = True
        # Aimed at this thread, so it stops here and not a few statements on.
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        return
    os._exit(137)


_executed = 0
_commits = 0


def statement_executed(_sql: str = "", driver: Any = None) -> None:
    """Count one SQL statement; exit (or end its session) when it is the
    n-th one asked for.

    Called by `Prepared` (which runs on the driver cursor, out of the
    engine's sight) and by the hook `install_statement_crash` puts on an
    engine, so the sweep covers every statement, hot path or not. The
    sweep's counter replaces this function to see the same statements."""
    global _executed  # noqa: PLW0603 - one process, one count, by design
    if not _COUNTING:
        return
    _executed += 1
    if _CRASH_AFTER > 0 and _executed >= _CRASH_AFTER:
        os._exit(137)
    if _executed == _DROP_AFTER and driver is not None:
        terminate_session(driver)


def terminate_session(driver: Any) -> None:
    """Have the server end `driver`'s session, as an administrator or a
    restart would, and wait until it is gone. PostgreSQL (psycopg 3) only."""
    info = getattr(driver, "info", None)
    if info is None or not hasattr(info, "backend_pid"):
        return
    import time

    import psycopg

    pid = info.backend_pid
    with psycopg.connect(info.dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            time.sleep(0.005)


def _lose_commit(conn: Any) -> None:
    global _commits  # noqa: PLW0603 - one process, one count, by design
    _commits += 1
    if _commits != _LOSE_COMMIT:
        return
    from sqlalchemy.exc import OperationalError

    driver = conn.connection.driver_connection
    driver.commit()  # it is durable now ...
    terminate_session(driver)  # ... but the answer never arrives
    lost = RuntimeError("server closed the connection unexpectedly (injected after COMMIT)")
    raise OperationalError("COMMIT", None, lost, connection_invalidated=True)


def install_statement_crash(engine: Any) -> None:
    """Exit, or end the session, after the n-th statement executed on
    `engine`; lose the n-th commit's answer; each only when asked to."""
    if not _COUNTING and _LOSE_COMMIT <= 0:
        return
    from sqlalchemy import event

    if _COUNTING:
        event.listen(
            engine,
            "after_cursor_execute",
            lambda conn, *_args: statement_executed("", conn.connection.driver_connection),
        )
    if _LOSE_COMMIT > 0:
        event.listen(engine, "commit", _lose_commit)
